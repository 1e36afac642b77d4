"""Chapter 3's figures: the linearization error, the cubic law of one layer, the depth bound,
where the small-logit regime ends, and the first-order agreement of the two normalizations."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import MaxNLocator

from ...names import display
from ...plots import LINESTYLES, NORMALIZATION_COLORS, OTHER_COLORS, WIDTH, log_ticks
from .chapter import LinearizedBound
from .experiment import LINEARIZATION_ORDER, LINEARIZATION_WINDOW, order_guide


def linearization(r: LinearizedBound):
    """The expansions' error against eps, with the second-order guide line."""
    return loglog_points(r.linearization, "eps", "error", guide=order_guide(
        r.linearization, "eps", "error", LINEARIZATION_ORDER), xlabel="logit scale $\\varepsilon$",
        ylabel="$\\|P(\\varepsilon A) - P_{\\mathrm{lin}}(\\varepsilon A)\\|_F$",
        labels={k: f"{k} (slope {v:.2f} for ε ≤ {LINEARIZATION_WINDOW:g})"
                for k, v in r.slopes.items()})


def cubic(r: LinearizedBound):
    """One layer's output residual against its input residual, with the first-order formula
    and the bound c ||R||^3 (Sinkhorn's, the two agree at first order) as guide lines."""
    ref = r.layer[r.layer["normalization"] == "sinkhorn"]
    guide = pd.concat([pd.DataFrame({"x": ref["input_residual"], "y": ref[col], "label": label,
                                     "style": style}) for col, label, style in
                       [("predicted", "first-order formula", "-"),
                        ("bound", "bound $c\\|R\\|^3$", "--")]])
    return loglog_points(r.layer, "input_residual", "output_residual", {}, guide=guide,
                         xlabel="input residual $\\|R\\|_2$",
                         ylabel="output residual $\\|\\mathrm{res}(PXW_V)\\|_2$")


def depth_bound(r: LinearizedBound):
    """The high-precision stack against its depth bound (`depth_bound_lines`)."""
    return depth_bound_lines(r.precise)


def regime(r: LinearizedBound):
    """Where the first-order formula holds and how loose the bound is (`regime_points`)."""
    return regime_points(r.regime)


def first_order_gap(r: LinearizedBound):
    """The softmax/Sinkhorn gap against the input residual size (`gap_line`)."""
    return gap_line(r.gap)


def loglog_points(table: pd.DataFrame, x: str, y: str, labels: dict[str, str], xlabel: str,
                  ylabel: str, guide: pd.DataFrame | None = None, figsize=(5.5, 3.8)):
    """`y` against `x` (log-log) per normalization, as markers in its colour; `guide`: extra
    lines, columns x, y, label, style."""
    fig, ax = plt.subplots(figsize=figsize)
    for name, g in table.groupby("normalization"):  # softmax hollow and larger: both visible
        ax.plot(g[x], g[y], "o-" if guide is None else "o", color=NORMALIZATION_COLORS[name],
                label=labels.get(name, display(name)), markersize=7 if name == "softmax" else 3,
                markerfacecolor="none" if name == "softmax" else NORMALIZATION_COLORS[name])
    for label, g in ([] if guide is None else guide.groupby("label", sort=False)):
        ax.plot(g["x"], g["y"], g["style"].iloc[0], color="grey" if g["style"].iloc[0] == "-"
                else "black", linewidth=0.8, label=label)
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel)
    ax.legend()
    return fig


def depth_bound_lines(stacks: pd.DataFrame):
    """Measured residual against layer, softmax (blue, hollow) and Sinkhorn (red), with the
    first-order L-layer bound (grey), one line style per starting residual size s; the
    legend sits outside the axes so that it hides no curve."""
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    styles = {s: LINESTYLES[i % 4] for i, s in enumerate(sorted(stacks["start"].unique()))}
    for (s, name), g in stacks.groupby(["start", "normalization"]):
        ax.plot(g["layer"], 10 ** g["log10_residual"], styles[s], marker="o",
                color=NORMALIZATION_COLORS[name], markersize=7 if name == "softmax" else 3,
                markerfacecolor="none" if name == "softmax" else NORMALIZATION_COLORS[name],
                label=f"{display(name)}, s = {s:g}")
        if name == "softmax":
            ax.plot(g["layer"], 10 ** g["log10_bound"], styles[s], color="grey", linewidth=0.8,
                    label=f"bound, s = {s:g}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(yscale="log", xlabel="layer $l$", ylabel="$\\|\\mathrm{res}(X_l)\\|_2$")
    log_ticks(ax)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def regime_points(sweep: pd.DataFrame):
    """Left: measured / first-order formula; right: bound / measured; both against the
    centred logit norm, normalizations in their colours, one marker per logit scale."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 3.6), sharex=True)
    markers = dict(zip(sorted(sweep["logit_std"].unique()), "os^v"))
    for (name, s), g in sweep.groupby(["normalization", "logit_std"]):
        kw = dict(color=NORMALIZATION_COLORS[name], marker=markers[s], linestyle="none",
                  markersize=4, label=f"{display(name)}, logit scale {s:g}")
        left.plot(g["logit_norm"], g["ratio"], **kw)
        right.plot(g["logit_norm"], g["looseness"], **kw)
    left.axhline(1, color="grey", linewidth=0.8)
    for ax, ylabel, title in ((left, "measured / first-order formula", "Accuracy of the expansion"),
                              (right, "bound / measured", "Looseness of the bound")):
        ax.set(xscale="log", yscale="log", xlabel="$\\|CAC\\|_2$ (centred logits)",
               ylabel=ylabel, title=title)
    left.legend(fontsize="x-small")
    return fig


def gap_line(gap: pd.Series):
    """The relative softmax/Sinkhorn gap against the input residual size, log-log."""
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.plot(gap.index, gap.values, "o-", color=OTHER_COLORS[2])
    ax.set(xscale="log", yscale="log", xlabel="input residual size $s$",
           ylabel="|softmax − Sinkhorn| / Sinkhorn")
    return fig
