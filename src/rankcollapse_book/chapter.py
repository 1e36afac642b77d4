"""What every chapter calls first: the provenance box (which settings and code produced it)
and a `Chapter` whose methods show and export figures and glue numbers and sentences.

The execution time is only known once the whole chapter has run, so the header shows
`TIME_PLACEHOLDER` and the pipeline (`rankcollapse_book.pipeline`) replaces it in the executed notebook
with the measured wall time (`fill_execution_time`). A chapter run by hand keeps the placeholder,
which says so honestly.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import matplotlib.pyplot as plt
import nbformat
import pandas as pd
import torch
from IPython.display import HTML, Markdown, display
from myst_nb import glue

from rankcollapse import __version__
from rankcollapse.devices import resolve_device
from rankcollapse.plots import use_style
from rankcollapse.profiles import Profile, get_profile
from rankcollapse.claim_rows import Claim
from rankcollapse_book.export import FIGURE_DIR, git_commit, save_figure
from rankcollapse_book.ledger import SYNTHETIC, chapter_box, save_records

TIME_PLACEHOLDER = "not measured (run outside the book pipeline)"


def provenance(profile: str, device: torch.device, seed: int) -> dict[str, str]:
    """The facts the header box states, as label -> text."""
    return {
        "profile": profile,
        "device": str(device),
        "seed": str(seed),
        "rankcollapse": __version__,
        "git commit": git_commit(),
        "torch": torch.__version__,
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "execution time": TIME_PLACEHOLDER,
    }


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds `_toc.yml` (the repository root)."""
    return next((f for f in (start, *start.parents) if (f / "_toc.yml").is_file()), None)


@dataclass
class Chapter:
    """What a chapter's cells need: its profile, device and seed, and `show` for figures."""

    settings: Profile
    device: torch.device
    facts: dict[str, str]  # the header box's provenance
    root: Path

    def show(self, fig: plt.Figure, name: str, data: pd.DataFrame) -> None:
        """Export `fig` as `name`.png/.svg/.pdf and the numbers it plots as `name`.csv, with
        provenance in each file, then display it. `name` is the figure's name in the
        cell metadata (`fig-...`)."""
        facts = {k: v for k, v in self.facts.items() if k != "execution time"}
        save_figure(fig, name, data, self.root / FIGURE_DIR, facts)
        plt.show()

    def glue(self, values: dict[str, object]) -> None:
        """Glue each value under its name (numbers for `{glue:text}`, no display)."""
        for name, value in values.items():
            glue(name, value.item() if hasattr(value, "item") else value, display=False)

    def glue_text(self, values: dict[str, str]) -> None:
        """Glue each sentence under its name as Markdown (for `{glue:md}`)."""
        for name, text in values.items():
            glue(name, Markdown(text), display=False)

    def glue_claims(self, name: str, claims: list[Claim], chapter: str,
                    data: str = SYNTHETIC) -> None:
        """Glue a chapter's claims as a table (for a `{glue:md}` box: `ledger.chapter_box`),
        and record them for the claims ledger (`ledger.save_records`) under `chapter`, with
        the `data` they were computed on."""
        records = [c.record() for c in claims]
        glue(name, Markdown(chapter_box(records, self.settings.name)), display=False)
        save_records(self.root, chapter, self.settings.name, records, data)


def chapter_header(profile: str, device: str, seed: int) -> Chapter:
    """Display the provenance box; return the chapter's `Chapter` (profile, device, ...)."""
    settings, torch_device = get_profile(profile), resolve_device(device)
    facts = provenance(settings.name, torch_device, seed)
    rows = "".join(f"<li><strong>{html.escape(k)}</strong>: {html.escape(v)}</li>"
                   for k, v in facts.items())
    display(HTML('<div class="admonition note"><p class="admonition-title">'
                 f"How this chapter was computed</p><ul>{rows}</ul></div>"))
    use_style()
    return Chapter(settings, torch_device, facts, find_root(Path.cwd()) or Path.cwd())


def caption_note(parameters: dict) -> str:
    """The provenance line appended to every figure caption of an executed chapter."""
    facts = provenance(parameters["profile"], parameters["device"], parameters["seed"])
    return (f" (Computed by rankcollapse {facts['rankcollapse']} at commit "
            f"{facts['git commit']}, profile {facts['profile']}, seed {facts['seed']}, "
            f"device {facts['device']}, {facts['date'][:10]}.)")


def fill_execution_time(nb: nbformat.NotebookNode, seconds: float) -> None:
    """Replace `TIME_PLACEHOLDER` in the outputs of the executed notebook `nb` by `seconds`."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            for mime, text in output.get("data", {}).items():
                if isinstance(text, str) and TIME_PLACEHOLDER in text:
                    output["data"][mime] = text.replace(TIME_PLACEHOLDER, f"{seconds:.1f} s")
