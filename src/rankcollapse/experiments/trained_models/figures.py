"""Chapter 5's figures: the learning curves, the hidden states' residual (absolute and
relative to layer 0) and its ratio Sinkhorn / softmax, the attention output's residual, path
products, random products against trained ones, and the trained attention itself."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from ...measures import FLOOR
from ...names import LINE_LABELS, display, math_number
from ...plots import (LINESTYLES, NORMALIZATION_COLORS, OTHER_COLORS, WIDTH, boxes_by,
                      legend_off_data, log_ticks, panel_grid, ratio_panels, task_panels,
                      wrap_title)
from ...registry import NO_SKIPS, SKIPS
from ...verdicts import TOLERANCE
from .chapter import TrainedModels
from .rank_claims import RESIDUAL_GROUPS


def learning(r: TrainedModels):
    """Every model's learning curves, one row per task."""
    return learning_curves(r.curves, r.titles)


def residual(r: TrainedModels):
    """The hidden states' residual per layer, with and without skip connections."""
    return task_panels(r.residual, r.titles, "relative residual $r(X_l)$", floor=FLOOR,
                       groups=RESIDUAL_GROUPS)


def relative(r: TrainedModels):
    """The residual relative to layer 0, complete models and without skips."""
    return task_panels(r.relative, r.titles, "residual relative to layer 0", floor=FLOOR,
                       groups={"complete model": {"full model": "-"},
                               "without skip connections": {"without skip": "--"}})


def ratio_skips(r: TrainedModels):
    """Sinkhorn / softmax per layer, the variants with skip connections."""
    return ratio_panels(r.skips.assign(setting=r.skips["variant"]), r.titles, x="layer",
                        xlabel="layer", order=list(SKIPS))


def ratio_no_skips(r: TrainedModels):
    """Sinkhorn / softmax per layer, the variants without skip connections."""
    return ratio_panels(r.no_skips.assign(setting=r.no_skips["variant"]), r.titles, x="layer",
                        xlabel="layer", order=list(NO_SKIPS))


def attention_output(r: TrainedModels):
    """The attention sub-layer's own output per layer, complete models."""
    return task_panels(r.outputs, r.titles, "relative residual of SA output",
                       {"full model": "-"}, xlabel="layer")


def paths(r: TrainedModels):
    """Rank-1 residual of path products per depth, complete models."""
    return boxes_by(r.paths, "setting", "depth", ylabel="rank-1 residual of the product",
                    floor=FLOOR)


def random_vs_trained(r: TrainedModels):
    """Random / trained residual of path products per depth and normalization."""
    return ratio_panels(r.random.assign(setting=r.random["normalization"]), r.titles,
                        ylabel="residual ratio, random / trained",
                        order=list(NORMALIZATION_COLORS))


def trained_attention(r: TrainedModels):
    """The complete models' attention per layer."""
    return trained_attention_figure(r.attention, r.titles, r.glue["ch5_n_iter"])


def trained_attention_figure(stats: pd.DataFrame, titles: dict[str, str], n_iter: int):
    """The complete trained models' attention per layer: the logit scale (left), the
    Sinkhorn models' row error after exactly `n_iter` iterations, median and largest over
    inputs (middle), and the mean row entropy (right); normalizations in their colours, one
    line style per task."""
    fig, (scale, error, entropy), spare = panel_grid(3, height=3.2)
    styles = {t: LINESTYLES[i % 4] for i, t in enumerate(titles)}
    for (task, name), g in stats.groupby(["task", "normalization"], sort=False):
        per_layer = g.groupby("layer")
        color, style = NORMALIZATION_COLORS[name], styles[task]
        label = f"{display(name)}, {titles[task]}"
        scale.plot(per_layer["logit_std"].median(), style, color=color, marker="o",
                   markersize=3, label=label)
        entropy.plot(per_layer["entropy"].mean(), style, color=color, marker="o", markersize=3)
        if name == "sinkhorn":
            error.plot(per_layer["marginal_error"].median(), style, color=color, marker="o",
                       markersize=3, label=f"median, {titles[task]}")
            error.plot(per_layer["marginal_error"].max(), style, color=color, marker="^",
                       markersize=4, alpha=0.5, label=f"largest, {titles[task]}")
    tolerance = error.axhline(TOLERANCE, color="grey", linestyle=":", linewidth=1,
                              label=f"tolerance {math_number(TOLERANCE)}")
    for ax in (scale, error, entropy):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(xlabel="layer")
    scale.set(ylabel="logit standard deviation", title="Logit scale")
    error.set(yscale="log", ylabel="max |row sum − 1|",
              title=f"Sinkhorn after {n_iter} iterations")
    entropy.set(ylabel="mean row entropy (nats)", title="Row entropy")
    handles, labels = scale.get_legend_handles_labels()
    markers = [Line2D([], [], color="grey", marker=m, linestyle="none", markersize=s)
               for m, s in (("o", 3), ("^", 4))]  # the row-error panel's two statistics
    legend_off_data(fig, handles + markers + [tolerance],
                    labels + ["row error: median over inputs", "row error: largest",
                              tolerance.get_label()], spare, fontsize="small")
    return fig


def learning_curves(curves: pd.DataFrame, titles: dict[str, str]):
    """Per task (rows): the held-out loss (left, log scale) and accuracy (right) after
    every epoch, one thin line per training seed, softmax blue and Sinkhorn red; `curves`
    has columns task, normalization, seed, epoch, heldout_loss, heldout_accuracy and, for
    the dashed lines, chance and baseline (a value per task)."""
    tasks = [t for t in titles if t in set(curves["task"])]
    fig, axes = plt.subplots(len(tasks), 2, figsize=(WIDTH, 2.2 * len(tasks)), squeeze=False,
                             sharex="row")
    for row, task in enumerate(tasks):  # a row per task: loss left, accuracy right
        loss, accuracy = axes[row]
        g = curves[curves["task"] == task]
        for (name, _), run in g.groupby(["normalization", "seed"], sort=False):
            style = dict(color=NORMALIZATION_COLORS[name], linewidth=1, alpha=0.7)
            loss.plot(run["epoch"], run["heldout_loss"], **style)
            accuracy.plot(run["epoch"], run["heldout_accuracy"], **style)
        for key, style in (("chance", ":"), ("baseline", "--")):
            accuracy.axhline(g[key].iloc[0], color=OTHER_COLORS[5], linestyle=style,
                             linewidth=1, label=LINE_LABELS[key] if row == 0 else None)
        loss.set(yscale="log", ylabel="loss (nats)")
        log_ticks(loss)
        accuracy.set(ylim=(0, 1.02), ylabel="accuracy")
        loss.set_title(wrap_title(titles[task], WIDTH), fontsize="small", loc="left")
        for ax in (loss, accuracy):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("epoch" if row == len(tasks) - 1 else "")  # the bottom row names it
    for name in NORMALIZATION_COLORS:
        axes[0, 1].plot([], [], color=NORMALIZATION_COLORS[name], label=display(name))
    fig.legend(*axes[0, 1].get_legend_handles_labels(), loc="outside lower center", ncol=4,
               fontsize="small")
    return fig
