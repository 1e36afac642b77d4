"""One plotting style for the whole book, and the band plots its figures share."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

NORMALIZATION_COLORS = {"softmax": "#1f77b4", "sinkhorn": "#d62728"}


def use_style() -> None:
    """Seaborn whitegrid, readable sizes, no LaTeX (nothing to install)."""
    sns.set_theme(context="notebook", style="whitegrid", palette="tab10")
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "axes.titlesize": "medium",
                         "legend.fontsize": "small", "figure.constrained_layout.use": True})


def band(ax, x, mean, std, label: str | None = None, color=None, log: bool = False, **kw):
    """A line at `mean` with a shaded band of one standard deviation.

    With `log=True`, `mean` and `std` are of log10 values and the band is drawn as
    10**(mean +- std) on a log axis (a geometric mean with a multiplicative band)."""
    x, mean, std = np.asarray(x), np.asarray(mean, float), np.nan_to_num(np.asarray(std, float))
    lo, mid, hi = (mean - std, mean, mean + std)
    if log:
        lo, mid, hi = 10**lo, 10**mid, 10**hi
        ax.set_yscale("log")
    (line,) = ax.plot(x, mid, label=label, color=color, **kw)
    ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    return line


def band_from_summary(ax, summary: pd.DataFrame, x: str = "layer", log: bool = True, **kw):
    """`band` from a table with columns x, mean, std (as `collapse.log_summary` returns)."""
    s = summary.sort_values(x)
    return band(ax, s[x], s["mean"], s["std"], log=log, **kw)


def ratio_plot(ax, adv: pd.DataFrame, order: list[str] | None = None) -> None:
    """Ratio of medians (Sinkhorn / softmax) against path depth with its interval band, one
    line per setting; `adv` as `randmat.sinkhorn_advantage` returns."""
    for label in order or list(adv["setting"].unique()):
        a = adv[adv["setting"] == label]
        line, = ax.plot(a["depth"], a["ratio"], marker="o", markersize=3, label=label)
        ax.fill_between(a["depth"], a["low"], a["high"], color=line.get_color(), alpha=0.2)
    ax.axhline(1, color="grey", linewidth=0.8)
    ax.set(yscale="log", xlabel="path depth $k$", ylabel="median residual, Sinkhorn / softmax")
    ax.legend(fontsize="small")


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
        _atomic(directory / f"{name}.{fmt}", lambda tmp: fig.savefig(tmp, format=fmt,
                                                                       metadata=meta))
    header = "".join(f"# {k}: {v}\n" for k, v in facts.items())
    _atomic(directory / f"{name}.csv",
            lambda tmp: tmp.write_text(header + data.to_csv(index=False)))


def _atomic(path: Path, write) -> None:
    """Call write(temporary path), then rename it to `path`."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)
