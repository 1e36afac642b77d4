"""The book's "Figures" page: every named figure with its thumbnail, chapter, caption, download
links and a ready-to-paste citation, generated from the executed chapters at build time."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml
from myst_nb.core.variables import format_plain_text
from myst_nb.ext.glue import extract_glue_data_cell

PAGE = Path("book") / "figures.md"
FORMATS = ("png", "svg", "pdf", "csv")
GLUE_ROLE = re.compile(r"\{glue:(text|md)\}`([^`]+)`")  # the roles a caption may use


@dataclass(frozen=True)
class Figure:
    name: str  # fig-...
    caption: str
    chapter: str  # notebook stem, e.g. 01_rank_collapse
    chapter_title: str


def collect(chapters_dir: Path, toc: list[str]) -> list[Figure]:
    """Named figures of the executed chapters, in table-of-contents order."""
    figures = []
    for entry in toc:
        path = chapters_dir / f"{Path(entry).name}.ipynb"
        if not entry.startswith("book/chapters/") or not path.is_file():
            continue
        nb = nbformat.read(path, as_version=4)
        title = next((line[2:].strip() for cell in nb.cells if cell.cell_type == "markdown"
                      for line in cell.source.splitlines() if line.startswith("# ")), path.stem)
        glue = glued(nb)
        for cell in nb.cells:
            figure = cell.metadata.get("mystnb", {}).get("figure", {})
            if "name" in figure:
                caption = pasted(figure.get("caption", ""), glue, f"{path.name}, {figure['name']}")
                figures.append(Figure(figure["name"], caption, path.stem, title))
    return figures


def glued(nb: nbformat.NotebookNode) -> dict[str, dict]:
    """What an executed notebook glued: name -> its MIME bundle (MyST-NB's own reading)."""
    return {name: output["data"] for cell in nb.cells if cell.cell_type == "code"
            for name, output in extract_glue_data_cell(nbformat.from_dict(cell))}


def pasted(caption: str, glue: dict[str, dict], where: str) -> str:
    """`caption` with each glue role replaced by what it pastes in its chapter: `{glue:text}`
    formatted as MyST-NB formats it, `{glue:md}` as its Markdown. This page is not the
    chapter, so a role here would find nothing; a name the chapter did not glue is an error
    naming it and `where` the caption is."""
    def value(match: re.Match) -> str:
        kind, spec = match[1], match[2]
        name, _, fmt = spec.partition(":")
        data = glue.get(name)
        mime = "text/plain" if kind == "text" else "text/markdown"
        if data is None or mime not in data:
            raise ValueError(f"the caption of {where} pastes {name!r} ({mime}), which its "
                             f"chapter did not glue; glue it in the chapter or drop the role")
        return (format_plain_text(data[mime], fmt) if kind == "text" else data[mime].strip())
    return GLUE_ROLE.sub(value, caption)


def base_url(root: Path) -> str:
    """The book's public address from `_config.yml` (html.baseurl), with a trailing slash;
    empty when not configured (citations then give the page's path only)."""
    path = root / "_config.yml"
    config = (yaml.safe_load(path.read_text()) if path.is_file() else None) or {}
    url = (config.get("html") or {}).get("baseurl") or ""
    return url.rstrip("/") + "/" if url else ""


_SYMBOLS = {"varepsilon": "ε", "epsilon": "ε", "sigma": "σ", "rho": "ρ", "lambda": "λ",
            "beta": "β", "times": "×", "infty": "∞", "le": "≤", "ge": "≥", "to": "→",
            "cdots": "…", "ldots": "…", "top": "ᵀ", "|": "‖"}


def _plain_math(tex: str) -> str:
    """Inline TeX as plain text: Greek letters and operators as symbols, other commands
    without their backslash (\\log -> log), font commands, spacing and braces dropped."""
    tex = re.sub(r"\\(?:mathrm|mathcal|mathbf|operatorname|text)\s*", "", tex)
    tex = re.sub(r"\\[,;!]|\\(?:left|right)", "", tex)
    tex = re.sub(r"\\([A-Za-z]+|\|)(\s*)",
                 lambda m: _SYMBOLS[m[1]] + m[2] if m[1] in _SYMBOLS else m[1] + (m[2] or " "),
                 tex)
    tex = re.sub(r"\s+([_^])", r"\1", tex.replace("{", "").replace("}", "")).replace("^ᵀ", "ᵀ")
    return re.sub(r"\s+", " ", tex).strip()


def _plain(caption: str) -> str:
    """The caption's first sentence without markup, for a citation; its math as plain text."""
    text = re.sub(r"\$([^$]*)\$", lambda m: _plain_math(m[1]), caption.split(". ")[0])
    text = re.sub(r"[`*\\]", "", text)
    return re.sub(r"\s+", " ", text).replace(" ,", ",").strip().rstrip(".")


def entry(fig: Figure, base: str, year: str) -> str:
    """One figure's block of the page (MyST markdown with raw HTML for links and images)."""
    link = f"chapters/{fig.chapter}.html#{fig.name}"
    commit = re.search(r"at commit (\S+?),", fig.caption)
    # no public address configured: the figure's path in the book and the commit that made it
    path = f"{base}book/{link}"
    made = f" (commit {commit[1]})" if commit and not base else ""
    published = f"\\url{{{path}}}" if base else path  # a path in the book is not a URL
    downloads = " · ".join(f'<a href="../figures/{fig.name}.{fmt}">{fmt.upper()}</a>'
                           for fmt in FORMATS)
    title = _plain(fig.caption)
    bibtex = (f"@misc{{rankcollapse-{fig.name},\n"
              f"  title        = {{{title}}},\n"
              f"  author       = {{{{The rankcollapse companion-book team}}}},\n"
              f"  year         = {{{year}}},\n"
              f"  howpublished = {{{published}}},\n"
              f"  note         = {{Figure {fig.name} of the companion book to "
              f"arXiv:2604.07925{made}}}\n}}")
    plain = (f"The rankcollapse companion-book team ({year}). {title}. Figure {fig.name} in "
             f"*Rank collapse: softmax versus Sinkhorn attention*, {path}{made}")
    return "\n".join([
        f"### {fig.name}", "",
        f"{{numref}}`{fig.name}` in {{doc}}`chapters/{fig.chapter}`", "",
        f'<a href="{link}"><img src="../figures/{fig.name}.png" alt="{html.escape(title)}" '
        f'width="360"></a>', "",
        fig.caption, "",
        f"Download: {downloads}", "",
        "```bibtex", bibtex, "```", "",
        plain, "",
    ])


def write_figures_page(root: Path, chapters_dir: Path, toc: list[str], year: str = "2026"
                       ) -> Path:
    """Write `book/figures.md` from the executed chapters; return its path."""
    figures = collect(chapters_dir, toc)
    base = base_url(root)
    lines = ["# Figures", "",
             "Every figure of the book, with its data. Each is also exported as PNG, SVG and "
             "PDF, with the numbers it plots as CSV; every file carries the commit, profile, "
             "seed, device, library version and date that produced it (in its metadata; "
             "in the CSV as `#` header lines).", ""]
    if not base:
        lines += ["This copy of the book has no public address, so each citation gives the "
                  "figure's path inside the book and the commit that produced it; prefix the "
                  "path with the address where you read the book.", ""]
    for chapter in dict.fromkeys(fig.chapter for fig in figures):
        group = [fig for fig in figures if fig.chapter == chapter]
        lines += [f"## {group[0].chapter_title}", ""] + [entry(fig, base, year) for fig in group]
    page = root / PAGE
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("\n".join(lines))
    return page
