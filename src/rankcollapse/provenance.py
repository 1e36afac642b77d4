"""Provenance box at the top of every chapter: which settings and code produced it.

The execution time is only known once the whole chapter has run, so the header shows
`TIME_PLACEHOLDER` and the pipeline (`rankcollapse.book`) replaces it in the executed notebook
with the measured wall time (`fill_execution_time`). A chapter run by hand keeps the placeholder,
which says so honestly.
"""

from __future__ import annotations

import html
import subprocess
from datetime import datetime
from pathlib import Path

import nbformat
import torch
from IPython.display import HTML, display

from rankcollapse import __version__
from rankcollapse.profiles import Profile, get_profile, resolve_device

TIME_PLACEHOLDER = "not measured (run outside the book pipeline)"


def _git(*args: str) -> str | None:
    """Output of `git args` run in this package's folder, or None when git cannot answer."""
    try:
        done = subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_commit() -> str:
    """Short commit sha of the working tree, '+dirty' when it has uncommitted changes."""
    sha = _git("rev-parse", "--short", "HEAD")
    if sha is None:
        return "unknown"
    return sha + "+dirty" if _git("status", "--porcelain") else sha


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


def chapter_header(profile: str, device: str, seed: int) -> tuple[Profile, torch.device]:
    """Display the provenance box; return the chapter's `Profile` and resolved torch device."""
    settings, torch_device = get_profile(profile), resolve_device(device)
    rows = "".join(f"<li><strong>{html.escape(k)}</strong>: {html.escape(v)}</li>"
                   for k, v in provenance(settings.name, torch_device, seed).items())
    display(HTML('<div class="admonition note"><p class="admonition-title">'
                 f"How this chapter was computed</p><ul>{rows}</ul></div>"))
    return settings, torch_device


def fill_execution_time(nb: nbformat.NotebookNode, seconds: float) -> None:
    """Replace `TIME_PLACEHOLDER` in the outputs of the executed notebook `nb` by `seconds`."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            for mime, text in output.get("data", {}).items():
                if isinstance(text, str) and TIME_PLACEHOLDER in text:
                    output["data"][mime] = text.replace(TIME_PLACEHOLDER, f"{seconds:.1f} s")
