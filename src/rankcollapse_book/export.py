"""Figure export: every figure of the book as PNG, SVG and PDF with its numbers as CSV, each
file carrying the provenance (commit, profile, seed, device, versions) in its metadata."""

from __future__ import annotations

import subprocess
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from rankcollapse.files import atomic_write, atomic_write_text

FIGURE_DIR = Path("book") / "chapters" / "figures"  # exports, copied to _build/html/figures


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


def save_figure(fig: plt.Figure, name: str, data: pd.DataFrame, directory: Path,
                facts: dict[str, str]) -> None:
    """Write `name`.png, .svg, .pdf and `name`.csv (the plotted numbers) to `directory`, each
    carrying `facts` (commit, profile, seed, ...) in its metadata; atomic per file."""
    if not name.startswith("fig-"):
        raise ValueError(f"figure names start with 'fig-' (as in the cell metadata); got {name!r}")
    directory.mkdir(parents=True, exist_ok=True)
    text = "; ".join(f"{k}: {v}" for k, v in facts.items())
    metadata = {
        "png": {"Title": name, "Description": text, "Software": f"rankcollapse {facts.get('rankcollapse', '')}"},
        "svg": {"Title": name, "Description": text},
        "pdf": {"Title": name, "Subject": text, "Creator": "rankcollapse"},
    }
    for fmt, meta in metadata.items():
        atomic_write(directory / f"{name}.{fmt}",
                     lambda tmp: fig.savefig(tmp, format=fmt, metadata=meta))
    header = "".join(f"# {k}: {v}\n" for k, v in facts.items())
    atomic_write_text(directory / f"{name}.csv", header + data.to_csv(index=False))
