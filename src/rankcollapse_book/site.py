"""The HTML book: the pages `_toc.yml` lists (`toc_files`), the Jupyter Book configuration
with a footer naming the version and commit (`build_config`), and `build`, which refuses
chapters that cannot make one book, writes the generated pages (Figures, claims ledger,
Reproduce parts), runs jupyter-book with warnings as errors and copies the figure exports
beside the HTML."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from rankcollapse import __version__
from rankcollapse.files import atomic_write_text
from rankcollapse_book.chapter import FIGURE_DIR
from rankcollapse_book.figures_page import PAGE, write_figures_page
from rankcollapse_book.ledger import JSON as LEDGER_JSON
from rankcollapse_book.ledger import PAGE as LEDGER
from rankcollapse_book.ledger import write_ledger
from rankcollapse_book.project import BookError, Project, read_record
from rankcollapse_book.reproduce_page import write_reproduce_parts


TOC_HELP = "https://jupyterbook.org/en/stable/structure/toc.html"


def read_yaml(path: Path) -> dict:
    """The mapping in the YAML file at `path` (an empty file holds an empty one); BookError
    naming the file and the place when it is not UTF-8 YAML or not a mapping (OSError when
    it cannot be read)."""
    try:
        content = yaml.safe_load(path.read_bytes())
    except yaml.reader.ReaderError as error:  # a byte that is not UTF-8, or a control code
        what = (f"is not UTF-8 text (byte 0x{error.character:02x}" if error.encoding != "unicode"
                else f"holds a character YAML does not allow (#x{error.character:04x}")
        raise BookError(f"{path} {what} at offset {error.position}); save it as UTF-8 text "
                        f"without control characters") from None
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" at line {where.line + 1}" if where else ""
        raise BookError(f"{path} is not valid YAML{at} ({getattr(error, 'problem', error)}); "
                        f"correct it") from None
    content = {} if content is None else content
    if not isinstance(content, dict):
        raise BookError(f"{path} does not hold a mapping (`key: value` lines) but a "
                        f"{type(content).__name__}; correct it")
    return content


def toc_files(root: Path) -> list[str]:
    """Every `file:` and `root:` entry of `_toc.yml`, in order, without suffix; BookError
    naming `_toc.yml` when it is not valid YAML, not a mapping with a `root:`, or holds an
    entry that is not a file name."""
    path = root / "_toc.yml"

    def walk(node) -> list[str]:
        if isinstance(node, list):
            return [f for item in node for f in walk(item)]
        if not isinstance(node, dict):
            return []
        own = [node[k] for k in ("root", "file") if k in node]
        wrong = [f for f in own if not (isinstance(f, str) and f.strip())]
        if wrong:
            raise BookError(f"{path} has an entry whose file is {wrong[0]!r}, not a file name "
                            f"like book/intro; correct it (see {TOC_HELP})")
        return own + walk([v for v in node.values() if isinstance(v, (list, dict))])

    toc = read_yaml(path)
    if "root" not in toc:
        raise BookError(f"{path} has no `root:` entry (the first page, like book/intro); "
                        f"correct it (see {TOC_HELP})")
    return walk(toc)


BUILD_CONFIG = Path("_build") / "_config.yml"  # _config.yml with the footer, made by `build`


def _git(root: Path, *args: str) -> str | None:
    """Output of `git args` in `root`, or None when git cannot answer (not a repository)."""
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def footer(root: Path, repository: str = "") -> str:
    """The footer line of every page: the book's version and the commit it is built from
    (short sha, `+dirty` with uncommitted changes; a link to the commit when `repository`,
    the repository's address, is known), or "commit unknown" outside a git repository."""
    sha = _git(root, "rev-parse", "HEAD")
    if sha is None:
        commit = "commit unknown"
    else:
        short = sha[:7] + ("+dirty" if _git(root, "status", "--porcelain") else "")
        commit = (f'commit <a href="{repository.rstrip("/")}/commit/{sha}">{short}</a>'
                  if repository else f"commit <code>{short}</code>")
    return f'<p class="build-info">Version {__version__}, built from {commit}.</p>'


def build_config(root: Path) -> Path:
    """Write `_build/_config.yml`: `_config.yml` with `html.extra_footer` set to `footer`
    (the commit changes with every build, so it cannot live in `_config.yml` itself)."""
    config = read_yaml(root / "_config.yml")
    repository = (config.get("repository") or {}).get("url") or ""
    config.setdefault("html", {})["extra_footer"] = footer(root, repository)
    path = root / BUILD_CONFIG
    atomic_write_text(path, "# Generated by `rankcollapse_book build` from _config.yml: edit "
                      "that instead.\n" + yaml.safe_dump(config, sort_keys=False))
    return path


def unbuildable(project: Project, chapters: list[str], records: dict[str, dict | None]) -> str:
    """Why the executed chapters cannot make one book, with the command that fixes it; ""
    when they can. Every chapter needs its executed notebook and a valid cache record, and
    all of them one profile (the book states one)."""
    run = f"{sys.executable} -m rankcollapse_book run"
    by_profile: dict[str, list[str]] = {}
    for chapter, record in records.items():
        if record:
            by_profile.setdefault(record["parameters"]["profile"], []).append(chapter)
    missing = [c for c in chapters if records[c] is None or not project.output(c).is_file()]
    if missing:
        def why(chapter: str) -> str:
            path = project.record(chapter)
            return (f" (its cache record {path.relative_to(project.root)} is not valid)"
                    if path.is_file() and records[chapter] is None else "")
        profile = f" --profile {next(iter(by_profile))}" if len(by_profile) == 1 else ""
        named = ", ".join(f"book/chapters/{c}{why(c)}" for c in missing)
        return (f"not successfully executed: {named}; execute them first: {run} "
                f"{' '.join(missing)}{profile}")
    if len(by_profile) > 1:
        executed = "; ".join(f"{p} ({', '.join(c)})" for p, c in sorted(by_profile.items()))
        return (f"the chapters were executed under several profiles: {executed}; a book "
                f"states one: execute them all under one, e.g. {run} --profile "
                f"{min(by_profile)}")
    return ""


def build(project: Project) -> int:
    """Write the Figures page, build the HTML book with warnings as errors, then copy the
    figure exports to `_build/html/figures/`. Returns the exit status of jupyter-book, or 1
    with one line saying what to run when the chapters cannot make a book (one was not
    executed, or they were executed under several profiles) or a page is missing."""
    toc = toc_files(project.root)
    chapters = [Path(f).name for f in toc if f.startswith("book/chapters/")]
    records = {c: read_record(project, c) for c in chapters}
    refusal = unbuildable(project, chapters, records)
    if refusal:
        print(refusal, file=sys.stderr)
        return 1
    if str(PAGE.with_suffix("")) in toc:
        write_figures_page(project.root, project.chapters, toc)
    profiles = {r["parameters"]["profile"] for r in records.values()}
    if str(LEDGER.with_suffix("")) in toc and profiles:
        write_ledger(project.root, chapters, profiles.pop())
    if "book/reproduce" in toc:
        write_reproduce_parts(project.root, records)
    missing = [f for f in toc
               if not any((project.root / f).with_suffix(s).is_file() for s in (".md", ".ipynb"))]
    if missing:
        print(f"missing pages: {', '.join(missing)} (listed in _toc.yml, no .md or .ipynb); "
              f"write them or take them out of _toc.yml", file=sys.stderr)
        return 1
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    config = build_config(project.root).relative_to(project.root)
    command = [str(jupyter_book), "build", ".", "-W", "-n", "--keep-going", "--config",
               str(config)]
    print("$", " ".join(command), flush=True)
    status = subprocess.run(command, cwd=project.root).returncode
    exports = project.root / FIGURE_DIR
    if status == 0 and exports.is_dir():
        shutil.copytree(exports, project.root / "_build" / "html" / "figures",
                        dirs_exist_ok=True)
    claims = project.root / "book" / LEDGER_JSON
    if status == 0 and claims.is_file():
        shutil.copy(claims, project.root / "_build" / "html" / LEDGER_JSON)
    return status
