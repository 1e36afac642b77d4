"""One plotting style for the whole book, and the kinds of figure its chapters draw.

Colours: softmax is always blue and Sinkhorn always red (`NORMALIZATION_COLORS`); anything
else (logit scales, block parts, settings) takes its colours from `OTHER_COLORS`, which holds
neither. Every function returns the figure; the chapter shows and exports it.
"""

from __future__ import annotations

import re
import textwrap

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
import numpy as np
from matplotlib.ticker import (FixedLocator, FuncFormatter, LogFormatterSciNotation, LogLocator,
                               MaxNLocator, NullFormatter, NullLocator)
import pandas as pd
import seaborn as sns

from .names import display
from .stats import MARGIN

NORMALIZATION_COLORS = {"softmax": "#1f77b4", "sinkhorn": "#d62728"}
# tab10 without its blue and its red
OTHER_COLORS = ["#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                "#17becf"]
LINESTYLES = ["-", "--", "-.", ":"]
# The book shows a figure at most about 750 px wide: a figure this many inches wide keeps
# 10-point tick labels about 13 px high there. Wider figures shrink every label with them.
WIDTH = 8.0

def use_style() -> None:
    """Seaborn whitegrid, readable sizes, no LaTeX (nothing to install)."""
    sns.set_theme(context="notebook", style="whitegrid", palette=OTHER_COLORS)
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "axes.titlesize": "medium",
                         "legend.fontsize": "small", "figure.constrained_layout.use": True,
                         # long enough to show a dash-dot pattern: line styles tell curves apart
                         "legend.handlelength": 3.5})


def panel_grid(n: int, ncols: int = 2, height: float = 3.0, **shared):
    """`n` panels in rows of at most `ncols`, `WIDTH` inches wide and `height` inches a row:
    the figure, its `n` axes in reading order and the cells left over (turned off: room for
    a legend off the data). `shared`: `sharex`/`sharey` as for `plt.subplots`."""
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(WIDTH, height * nrows), squeeze=False,
                             **shared)
    cells = list(axes.flat)
    for spare in cells[n:]:
        spare.axis("off")
        spare.tick_params(labelbottom=False, labelleft=False)
    return fig, cells[:n], cells[n:]


def legend_off_data(fig, handles, labels, spare: list, ncol: int = 2, **kw) -> None:
    """One legend for the whole figure, where it hides no curve: in a spare cell of the grid
    when there is one, else below the panels."""
    if spare:
        spare[0].legend(handles, labels, loc="center", ncol=1, **kw)
    else:
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol, **kw)


def linear_if_narrow(ax, low: float, high: float, margin: float = 0.05, most: int = 8) -> bool:
    """A linear y-axis from `low` to `high` (with a small margin) where they are less than a
    decade apart (a log axis would show one or two labels), else a log axis with
    `log_ticks`; True where linear."""
    if low > 0 and high / low < 10:
        pad = margin * (high - low)
        ax.set(yscale="linear", ylim=(low - pad, high + pad))
        return True
    ax.set(yscale="log", ylim=(low / 1.5, high * 1.5))
    log_ticks(ax, most=most)
    return False


def colors(keys) -> dict:
    """A colour per key: the normalization colours where each key names one normalization and
    no two keys the same ('softmax', 'trained with Sinkhorn'), else the others in order."""
    keys = list(dict.fromkeys(keys))
    named = {k: set(re.findall(r"\b(softmax|sinkhorn)\b", str(k).lower())) for k in keys}
    if all(len(n) == 1 for n in named.values()) and len(set().union(*named.values())) == len(keys):
        return {k: NORMALIZATION_COLORS[min(n)] for k, n in named.items()}
    return {k: OTHER_COLORS[i % len(OTHER_COLORS)] for i, k in enumerate(keys)}


def wrap_title(text: str, width: float) -> str:
    """`text` wrapped to fit a panel `width` inches wide (titles of neighbours do not meet)."""
    return textwrap.fill(text, max(12, int(7.5 * width)))


def log_ticks(ax, which: str = "y", most: int = 8) -> None:
    """Regular, readable labels on a log axis, chosen from its present limits (call it last):
    up to three decades plain numbers (0.8, 0.9, 1 nearly evenly spaced in a range of less
    than a factor 3, then 1, 2, 3, 5, 7 or 1, 2, 5 a decade, then decades), always at least
    two; wider, powers of ten every 1, 2, 5, 10, 20, 50... decades, at most `most` labels
    (fewer for short panels)."""
    axis = getattr(ax, f"{which}axis")
    low, high = sorted(getattr(ax, f"get_{which}lim")())
    ratio = high / low
    if ratio < 1e3:
        locator = (MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]) if ratio < 3 else
                   LogLocator(subs=(1, 2, 3, 5, 7) if ratio < 30 else (1, 2, 5) if ratio < 300
                              else (1,)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    else:
        decades = np.log10(ratio)
        step = next(s for s in (b * 10**k for k in range(4) for b in (1, 2, 5)) if decades / s <= most)
        first = np.ceil(np.log10(low) / step) * step
        locator = FixedLocator(10.0 ** np.arange(first, np.log10(high) + 1e-9, step))
        axis.set_major_formatter(LogFormatterSciNotation())
        if step > 1:
            axis.set_minor_locator(NullLocator())
    axis.set_major_locator(locator)
    axis.set_minor_formatter(NullFormatter())


# ----------------------------------------------------------------------------- bands


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


def floor_line(ax, floor: float | None, decades: float = 3.0):
    """A dotted grey line at the rounding `floor`, drawn only where the panel's curves come
    within `decades` powers of ten of it (elsewhere it would squash the curves); the line,
    or None."""
    low = ax.get_ylim()[0]
    if floor and low < floor * 10**decades:
        return ax.axhline(floor, color="grey", linestyle=":", linewidth=1, label="rounding floor")
    return None


def band_from_summary(ax, summary: pd.DataFrame, x: str = "layer", log: bool = True, **kw):
    """`band` from a table with columns x, mean, std (as `log_summary` returns)."""
    s = summary.sort_values(x)
    return band(ax, s[x], s["mean"], s["std"], log=log, **kw)


def residual_bands(summary: pd.DataFrame, hue: str, label: str = "{}", style: str | None = None,
                   floor: float | None = None, title: str = "", ax=None):
    """Relative residual against layer: one band per value of `hue` (normalizations in their
    colours), line styles per value of `style`, a dotted line at the rounding `floor`; the
    legend beside the axes on a figure of its own (where it hides no curve; a larger figure
    for the longer legend of two keys)."""
    beside = ax is None
    figsize = (6.5, 4) if style else (6, 3.8)
    fig, ax = (plt.subplots(figsize=figsize) if ax is None else (ax.figure, ax))
    palette = colors(summary[hue])
    # without a style column, other hues also differ in line style: no curve hides another
    by = style or (hue if set(palette) - set(NORMALIZATION_COLORS) else None)
    styles = {v: LINESTYLES[i % 4] for i, v in enumerate(dict.fromkeys(summary[by]))} if by else {}
    keys = [hue] + ([style] if style else [])
    for key, group in summary.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        band_from_summary(ax, group, color=palette[key[0]], linestyle=styles.get(key[-1], "-"),
                          label=label.format(*map(display, key)))
    floor_line(ax, floor, decades=np.inf)  # always: these captions name the floor
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="layer $l$ (0 = input)", ylabel="relative residual $r(X_l)$", title=title)
    where = dict(loc="upper left", bbox_to_anchor=(1.01, 1)) if beside else {}
    ax.legend(ncol=2 if summary[keys].drop_duplicates().shape[0] > 8 else 1, fontsize="x-small",
              **where)
    return fig


def paired_boxes(table: pd.DataFrame, x: str, y: str, ax=None, log: bool = False,
                 figsize=(6.5, 3.6), **labels):
    """Box plots of `y` per `x`, softmax and Sinkhorn side by side in their colours."""
    fig, ax = (plt.subplots(figsize=figsize) if ax is None else (ax.figure, ax))
    sns.boxplot(table, x=x, y=y, hue="normalization", ax=ax, log_scale=log,
                palette=NORMALIZATION_COLORS, fliersize=1, linewidth=0.7)
    ax.set(**labels)
    if ax.get_legend() is not None:
        for text in ax.get_legend().get_texts():
            text.set_text(display(text.get_text()))
    return fig


# ----------------------------------------------------------------------------- comparisons


def ratio_plot(ax, adv: pd.DataFrame, order: list[str] | None = None, x: str = "depth",
               xlabel: str = "path depth $k$",
               ylabel: str = "residual ratio,\nSinkhorn / softmax", legend: bool = True) -> None:
    """Ratio Sinkhorn / softmax with its interval band against `x`, one line per setting
    (`adv` as `stats.compare_table` returns); grey band: the parity margin. Settings that
    are not normalizations also differ in line style (bands overlap near 1)."""
    order = [s for s in (order or dict.fromkeys(adv["setting"]))
             if adv.loc[adv["setting"] == s, "ratio"].notna().any()]  # no curve, no legend entry
    palette = colors(order)
    named = set(palette.values()) <= set(NORMALIZATION_COLORS.values())
    for i, label in enumerate(order):
        a = adv[adv["setting"] == label]
        ax.plot(a[x], a["ratio"], marker="o", markersize=3, label=display(label),
                color=palette[label], linestyle="-" if named else LINESTYLES[i % 4])
        ax.fill_between(a[x], a["low"], a["high"], color=palette[label], alpha=0.2)
    ax.axhline(1, color="grey", linewidth=0.8)
    ax.axhspan(1 / (1 + MARGIN), 1 + MARGIN, color="grey", alpha=0.12, linewidth=0)
    ax.set(yscale="log", xlabel=xlabel, ylabel=ylabel)
    log_ticks(ax)
    if legend:
        ax.legend(fontsize="small")


def ratio_panels(adv: pd.DataFrame, titles: dict[str, str], panel: str = "task", **options):
    """`ratio_plot` in one panel per value of `panel` (`titles`: value -> panel title), two
    panels a row on one shared y-axis (the same ratio throughout), one legend off the data."""
    fig, axes, spare = panel_grid(len(titles), height=3.1, sharey=True)
    for ax, (key, title) in zip(axes, titles.items()):
        ratio_plot(ax, adv[adv[panel] == key], legend=False, **options)
        ax.set_title(wrap_title(title, WIDTH / 2))
    for ax in axes:
        if ax.get_subplotspec().colspan.start:
            ax.set_ylabel("")
    log_ticks(axes[0])  # the shared axis's limits are final only now
    handles = {t: h for ax in axes for h, t in zip(*ax.get_legend_handles_labels())}
    legend_off_data(fig, list(handles.values()), list(handles), spare, ncol=4)
    return fig


def ratio_figure(adv: pd.DataFrame, order: list[str] | None = None, x: str = "depth",
                 xlabel: str = "path depth $k$"):
    """`ratio_plot` in a figure of its own (larger for more than four curves)."""
    curves = len(order or dict.fromkeys(adv["setting"]))
    fig, ax = plt.subplots(figsize=(6.5, 3.8) if curves > 4 else (6, 3.6))
    ratio_plot(ax, adv, order, x, xlabel)
    return fig


def boxes_by(table: pd.DataFrame, panel: str, x: str, y: str = "residual", order=None,
             ylabel: str = "", xlabel: str = "path depth $k$", floor: float | None = None):
    """`paired_boxes` on a log axis, one panel per value of `panel`, two a row, shared y;
    the rounding `floor` dotted (and in the legend) where the boxes come within a decade of
    it; one legend, off the data (`legend_off_data`)."""
    order = order or list(dict.fromkeys(table[panel]))
    fig, cells, spare = panel_grid(len(order), height=3.2, sharey=True)
    width = WIDTH / min(2, len(order))  # inches per panel
    for ax, label in zip(cells, order):
        paired_boxes(table[table[panel] == label], x, y, ax=ax, log=True,
                     title=wrap_title(label, width), xlabel=xlabel,
                     ylabel="" if ax.get_subplotspec().colspan.start else ylabel)
        labels = ax.get_xticklabels()  # at most about 2.5 an inch: 1, 3, 5 or 1, 6, 11
        step = next(s for s in (1, 2, 5, 10, 20, 50) if len(labels) / s <= 2.5 * width)
        for i, text in enumerate(labels):
            text.set_visible(i % step == 0)
    lines = [floor_line(ax, floor, decades=1) for ax in cells]  # the y-limits are final
    first = cells[0].get_legend()
    for ax in cells:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if first is not None:
        line = next((ln for ln in lines if ln is not None), None)
        handles = [*first.legend_handles] + ([line] if line is not None else [])
        labels = [t.get_text() for t in first.get_texts()] + (
            [line.get_label()] if line is not None else [])
        legend_off_data(fig, handles, labels, spare, ncol=len(handles))
    return fig


def _band_range(part: pd.DataFrame) -> tuple[float, float]:
    """The smallest and largest value a `band_from_summary` of `part` draws (10**(mean -+
    std))."""
    std = part["std"].fillna(0)
    return 10 ** float((part["mean"] - std).min()), 10 ** float((part["mean"] + std).max())


def task_panels(summary: pd.DataFrame, titles: dict[str, str], ylabel: str,
                styles: dict[str, str] | None = None, floor: float | None = None,
                xlabel: str = "layer (0 = embeddings)",
                groups: dict[str, dict[str, str]] | None = None):
    """Softmax and Sinkhorn bands (geometric mean, one standard deviation) per task
    (`titles`: task -> title), one line style per inference variant.

    With `styles` (variant -> style; all variants of the summary when None): one panel per
    task, two a row, all on one y-axis. With `groups` (column title -> styles): one row per
    task and one column per group of variants, each column on its own y-axis (groups that
    differ by many decades do not squash each other). An axis spanning less than a decade
    is linear; the rounding `floor` is dotted where a log panel comes near it."""
    if groups is None:
        groups = {"": styles or {v: LINESTYLES[i % 4]
                                 for i, v in enumerate(dict.fromkeys(summary["variant"]))}}
    if len(groups) == 1:
        shown = next(iter(groups.values()))
        fig, axes, spare = panel_grid(len(titles), height=3.0, sharey=True)
        cells = [(ax, task, shown) for ax, task in zip(axes, titles)]
        columns = [axes]
    else:
        fig, grid = plt.subplots(len(titles), len(groups), figsize=(WIDTH, 2.5 * len(titles)),
                                 sharey="col", sharex=True, squeeze=False)
        cells = [(ax, task, shown) for row, task in zip(grid, titles)
                 for ax, shown in zip(row, groups.values())]
        columns, spare = [list(grid[:, j]) for j in range(len(groups))], []
    for ax, task, shown in cells:
        part = summary[(summary["task"] == task) & summary["variant"].isin(shown)]
        for (variant, name), g in part.groupby(["variant", "normalization"], sort=False):
            band_from_summary(ax, g, color=NORMALIZATION_COLORS[name],
                              linestyle=shown[variant], label=f"{display(name)}, {variant}")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        first_col = ax.get_subplotspec().is_first_col() and len(groups) == 1
        ax.set(xlabel=xlabel if ax.get_subplotspec().is_last_row() else "",
               ylabel=ylabel if first_col else "")
        width = WIDTH / (len(groups) if len(groups) > 1 else min(2, len(titles)))
        ax.set_title(wrap_title(titles[task], width), fontsize="small")
    for column, shown in zip(columns, groups.values()):
        present = summary[summary["task"].isin(list(titles)) & summary["variant"].isin(shown)]
        if not linear_if_narrow(column[0], *_band_range(present.dropna(subset=["mean"])),
                                most=4 if len(groups) > 1 else 6):
            for ax in column:
                floor_line(ax, floor)
    if len(groups) > 1:  # one label for every row: a label per row overlaps its neighbours
        fig.supylabel(ylabel)
        for ax, title in zip(columns, groups):
            ax[0].set_title(f"{title}\n{ax[0].get_title()}", fontsize="small")
    # colours name the normalizations, line styles the variants: one entry each
    handles = {display(n): Line2D([], [], color=c) for n, c in NORMALIZATION_COLORS.items()}
    # a style used in several columns names its variant in each ('full model (left), ...')
    where = ["left", "right"] if len(groups) == 2 else [f"column {i + 1}" for i in
                                                        range(len(groups))]
    drawn, by_style = set(summary["variant"]), {}
    for column, shown in zip(where, groups.values()):
        for v, style in shown.items():
            if v in drawn:
                by_style.setdefault(style, []).append(v if len(groups) == 1 else
                                                      f"{v} ({column})")
    handles |= {", ".join(vs): Line2D([], [], color="grey", linestyle=style)
                for style, vs in by_style.items()}
    if any(has_floor(ax) for ax, _, _ in cells):
        handles["rounding floor"] = Line2D([], [], color="grey", linestyle=":", linewidth=1)
    legend_off_data(fig, list(handles.values()), list(handles), spare, ncol=3,
                    fontsize="small")
    return fig


def has_floor(ax) -> bool:
    """Whether `floor_line` drew the rounding floor in `ax`."""
    return any(line.get_label() == "rounding floor" for line in ax.get_lines())
