"""The forest plot of every primary test of the build: one row per statistical test (checks
have no interval and are left out; B4's sequence shows one test per task, as on the
ledger: `outcomes.shown_results`), grouped by claim in the registry's order, the estimate
and its interval on a log axis, each row's parity band shaded (the margin of its part: most
use `stats.MARGIN`, accuracies and entropies a narrower one).

Top panel: the paper's claims, each test coloured by what it did to its claim (agrees,
against, opposite, undecided; a test this run could not carry out is a hollow marker).
Bottom panel: the book's own questions (`registry.FINDINGS`), coloured by what they found.
Colours come from `plots.OTHER_COLORS`: blue and red belong to softmax and Sinkhorn.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from rankcollapse import registry
from rankcollapse.plots import OTHER_COLORS
from rankcollapse.stats import MARGIN, WORDS
from rankcollapse_book.outcomes import (OUTCOME_WORDS, is_test, shown_number, short_task,
                                        shown_results)

ORANGE, GREEN, PURPLE, BROWN, PINK, GREY, OLIVE, CYAN = OTHER_COLORS
OUTCOME_COLORS = {"agrees": GREEN, "against": ORANGE, "opposite": PURPLE, "undecided": GREY}
FOUND_COLORS = {"more": BROWN, "less": PINK, "parity": OLIVE, "not more": CYAN,
                "not less": CYAN, "undecided": GREY}
FOUND_MARKERS = {"not more": "<", "not less": ">"}  # what each excludes, pointing its way
DEFAULT_ESTIMATE = "Sinkhorn / softmax"
LIMIT = 20.0  # the axis spans at most 1/LIMIT to LIMIT; intervals beyond end in arrows
ROW_INCH, PANEL_INCH, WIDTH_INCH, DPI = 0.21, 1.1, 8.0, 120  # 960 px: legible at 800
TICKS = (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20)
COLUMNS = ["panel", "claim", "part", "task", "estimate", "number", "low", "high", "margin",
           "found", "outcome"]


def forest_rows(rows: list[dict]) -> pd.DataFrame:
    """The plotted tests, in the ledger's order: one row per statistical test with an
    estimate and an interval (`COLUMNS`; panel 'claims' or 'questions', estimate the words
    of its part, margin its part's parity margin); a test without an interval (its values mostly tied at the rounding floor,
    too few units) is in the ledger's tables only, where its words say why."""
    table = []
    for row in rows:
        panel = "questions" if row["id"] in registry.FINDINGS else "claims"
        for r in shown_results(row["id"], row["results"]):
            if not is_test(r) or r["number"] is None or not math.isfinite(r["number"]) \
                    or r["low"] is None or not math.isfinite(r["low"]):
                continue
            part = registry.CLAIMS[row["id"]].part(r["part"])
            at = f", k = {r['at']:g}" if r.get("at") is not None else ""
            table.append({"panel": panel, "claim": row["id"], "part": r["part"],
                          "task": short_task(r["task"]) + at, "estimate": part.estimate(),
                          "number": r["number"], "low": r["low"], "high": r["high"],
                          "margin": part.margin, "found": r["found"], "outcome": r["outcome"]})
    return pd.DataFrame(table, columns=COLUMNS)


def _limits(data: pd.DataFrame) -> tuple[float, float]:
    """An axis around every estimate and parity band, within 1/LIMIT to LIMIT."""
    values = np.concatenate([data["number"], data["low"].dropna(), data["high"].dropna(),
                             [1 / (1 + 3 * MARGIN), 1 + 3 * MARGIN]])
    values = values[np.isfinite(values) & (values > 0)]
    return max(values.min() / 1.3, 1 / LIMIT), min(values.max() * 1.3, LIMIT)


def _side_label(data: pd.DataFrame, i: int) -> str:
    """The right-hand label of a part, on its first row: the part where the claim has
    several, and the estimate where it is not Sinkhorn / softmax."""
    row = data.iloc[i]
    if i > 0 and (data.iloc[i - 1]["claim"], data.iloc[i - 1]["part"]) == (row["claim"],
                                                                            row["part"]):
        return ""
    said = [row["part"]] if len(registry.CLAIMS[row["claim"]].parts) > 1 else []
    said += [row["estimate"]] if row["estimate"] != DEFAULT_ESTIMATE else []
    return textwrap.fill("; ".join(said), 44)


LABEL_ROWS = 7 * 1.25 / (ROW_INCH * 72)  # the rows one line of a 7-point side label takes


def _extra(data: pd.DataFrame, i: int) -> float:
    """The space (in rows) to leave after row `i` where it is its part's last and the part's
    side label needs more lines than the part has rows."""
    key = tuple(data.iloc[i][["claim", "part"]])
    if i + 1 < len(data) and tuple(data.iloc[i + 1][["claim", "part"]]) == key:
        return 0.0
    start = next(j for j in range(i, -1, -1)
                 if j == 0 or tuple(data.iloc[j - 1][["claim", "part"]]) != key)
    label = _side_label(data, start)
    lines = label.count("\n") + 1 if label else 0
    return max(0.0, lines * LABEL_ROWS - (i - start + 1))


def _block(data: pd.DataFrame, i: int) -> int:
    """How many rows from row `i` on belong to its part."""
    key = tuple(data.iloc[i][["claim", "part"]])
    return next((j - i for j in range(i, len(data))
                 if tuple(data.iloc[j][["claim", "part"]]) != key), len(data) - i)


def _panel(ax, data: pd.DataFrame, colors: dict[str, str], key: str, limits) -> None:
    low_edge, high_edge = limits
    y, ticks, labels, gaps = 0.0, [], [], []
    for i, (_, r) in enumerate(data.iterrows()):
        if i and r["claim"] != data.iloc[i - 1]["claim"]:
            y += 0.6
            gaps.append(y - 0.8)
        color = colors.get(r[key], GREY)  # untested: hollow, grey
        # this row's parity band: its part's margin (C8's accuracies: 1.01, not 1.1)
        ax.fill_betweenx([y - 0.5, y + 0.5], 1 / (1 + r["margin"]), 1 + r["margin"],
                         color="0.85", zorder=0, linewidth=0)
        hollow = r["outcome"] == "untested"
        low = r["low"] if r["low"] is not None and math.isfinite(r["low"]) else r["number"]
        high = r["high"] if r["high"] is not None and math.isfinite(r["high"]) else r["number"]
        ax.plot([max(low, low_edge), min(high, high_edge)], [y, y], color=color, linewidth=1.8)
        for end, edge, marker in ((low, low_edge, "<"), (high, high_edge, ">")):
            if (end < edge) if marker == "<" else (end > edge):
                ax.plot([edge], [y], marker=marker, color=color, markersize=5)
        shown = min(max(r["number"], low_edge), high_edge)
        ax.plot([shown], [y], marker=FOUND_MARKERS.get(r["found"], "o") if key == "found"
                else "o", markersize=5.5, color=color,
                markerfacecolor="white" if hollow else color)
        if shown != r["number"]:  # an estimate beyond the axis: its value beside the arrow
            right = shown == high_edge
            ax.annotate(shown_number(r["number"]), (shown, y), xytext=(-6 if right else 6, 0),
                        textcoords="offset points", ha="right" if right else "left",
                        va="center", fontsize=7, color=color)
        side = _side_label(data, i)
        if side:  # centred on its part's rows
            block = _block(data, i)
            ax.annotate(side, (1.01, y + (block - 1 + _extra(data, i + block - 1)) / 2),
                        xycoords=("axes fraction", "data"), fontsize=7, va="center",
                        color="0.3", annotation_clip=False)
        ticks.append(y)
        labels.append(f"{r['claim']} · {r['task']}")
        y += 1 + _extra(data, i)
    ax.axvline(1, color="0.5", linewidth=0.8, zorder=0)
    for g in gaps:
        ax.axhline(g, color="0.8", linewidth=0.6)
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.set_ylim(y - 0.5, -0.7)
    ax.set_xscale("log")
    ax.set_xlim(low_edge, high_edge)
    ax.xaxis.set_major_locator(FixedLocator([t for t in TICKS if low_edge <= t <= high_edge]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.grid(axis="y", visible=False)


def _legend(ax, entries: dict[str, str], markers: dict[str, str], title: str,
            columns: int) -> None:
    handles = [Line2D([], [], color=c, marker=markers.get(k, "o"), linewidth=1.8, label=label)
               for k, (c, label) in entries.items()]
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=columns,
              frameon=False, fontsize=8, title=title, title_fontsize=9,
              alignment="left", handlelength=2)


def forest(rows: list[dict]) -> tuple[Figure, pd.DataFrame]:
    """The forest plot of `rows` (the ledger's) and the numbers it plots."""
    data = forest_rows(rows)
    panels = [(p, data[data["panel"] == p].reset_index(drop=True))
              for p in ("claims", "questions")]
    panels = [(p, d) for p, d in panels if len(d)]
    heights = [len(d) + 0.6 * d["claim"].nunique() + 4
               + sum(_extra(d, i) for i in range(len(d))) for _, d in panels] or [1]
    fig = Figure(figsize=(WIDTH_INCH, ROW_INCH * sum(heights) + PANEL_INCH), dpi=DPI,
                 layout="constrained")
    axes = fig.subplots(len(heights), 1, gridspec_kw={"height_ratios": heights}, squeeze=False)
    limits = _limits(data) if len(data) else (1 / LIMIT, LIMIT)
    for ax, (panel, d) in zip(axes[:, 0], panels):
        if panel == "claims":
            _panel(ax, d, OUTCOME_COLORS, "outcome", limits)
            _legend(ax, {k: (c, OUTCOME_WORDS[k]) for k, c in OUTCOME_COLORS.items()}, {},
                    "The paper's claims: what each test did to its claim", 3)
        else:
            _panel(ax, d, FOUND_COLORS, "found", limits)
            entries = {k: (c, WORDS[k]) for k, c in FOUND_COLORS.items()}
            _legend(ax, entries, FOUND_MARKERS, "The book's own questions: what each test "
                    "found", 2)
        ax.set_xlabel("estimate, log scale: Sinkhorn / softmax unless labelled on the right "
                      "(grey band behind each row: its parity margin)", fontsize=8.5)
    return fig, data
