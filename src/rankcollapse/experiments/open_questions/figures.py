"""Chapter 6's figures: B1's residual of pure attention trained from scratch, C6d's path
products with the correlation broken, B3's swapped normalization, B4's iteration sweep,
C10's Lipschitz constants and B5's depth sweep."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import MaxNLocator, NullFormatter

from ...measures import FLOOR
from ...names import display
from ...plots import (LINESTYLES, NORMALIZATION_COLORS, WIDTH, colors, legend_off_data,
                      log_ticks, panel_grid, ratio_panels, task_panels)
from ...verdicts import TOLERANCE
from ..depth_sweep.figure import ratio_by_depth
from .chapter import OpenQuestions
from .correlation import MODES


def scratch_residual(r: OpenQuestions):
    """B1: the residual of pure attention trained from scratch and switched off at
    inference, one panel per task and variant."""
    return task_panels(r.scratch_residual, r.scratch_panels, "relative residual $r(X_l)$",
                       {"from scratch": "-", "switched off at inference": "--"}, floor=FLOOR)


def mechanism(r: OpenQuestions):
    """C6d: Sinkhorn / softmax of path products per mode and depth, image tasks."""
    return ratio_panels(r.mechanism.assign(setting=r.mechanism["mode"]), r.image_titles,
                        order=list(MODES))


def swapped(r: OpenQuestions):
    """B3: residual with Sinkhorn / with softmax at inference, the same weights."""
    return ratio_panels(r.swap.assign(setting=r.swap["variant"].str.replace(
        "sinkhorn", display("sinkhorn"))), r.titles, x="layer", xlabel="layer",
        ylabel="Sinkhorn / softmax at inference")


def iterations(r: OpenQuestions):
    """B4: accuracy, marginal error and time against the number of iterations."""
    return iterations_figure(r.iterations, r.titles)


def lipschitz(r: OpenQuestions):
    """C10: local Lipschitz constants of random and trained layers."""
    return lipschitz_figure(r.measured.random_lipschitz, r.measured.trained_lipschitz,
                            r.titles)


def depth_sweep(r: OpenQuestions):
    """B5: Sinkhorn / softmax against relative depth, one curve per depth."""
    return ratio_by_depth(r.depth.ratios)


def iterations_figure(sweep: pd.DataFrame, titles: dict[str, str]):
    """The Sinkhorn-trained models run with fewer iterations: test accuracy, largest row
    error and time of a forward pass against the number of iterations (log axis; 0.5 is one
    half-step, i.e. softmax), mean over seeds, one colour per task (these are all Sinkhorn
    models: the colours name tasks, not normalizations)."""
    fig, axes, spare = panel_grid(3, height=3.2)
    palette = colors(list(titles))
    for task, g in sweep.groupby("task", sort=False):
        mean = g.groupby("iterations")[["accuracy", "row_error", "ms"]].mean()
        for ax, column in zip(axes, mean.columns):
            ax.plot(mean.index, mean[column], marker="o", markersize=3, color=palette[task],
                    label=titles[task])
    axes[1].axhline(TOLERANCE, color="grey", linestyle=":", linewidth=1)
    ticks = sorted(sweep["iterations"].unique())
    for ax, ylabel in zip(axes, ("test accuracy", "largest marginal error",
                                 "forward pass (ms)")):
        ax.set(xscale="log", xlabel="iterations (0.5 = softmax)", ylabel=ylabel)
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
    axes[1].set_yscale("log")
    legend_off_data(fig, *axes[0].get_legend_handles_labels(), spare, fontsize="small")
    return fig


def lipschitz_figure(random: pd.DataFrame, trained: pd.DataFrame, titles: dict[str, str]):
    """Local Lipschitz constants, softmax blue and Sinkhorn red. Left: random layers against
    the logit scale, median over weight draws with a quartile band, one line style per n.
    Right: trained layers against the layer, median over inputs and seeds, one line style
    per task."""
    fig, (left, right) = plt.subplots(2, 1, figsize=(WIDTH, 6.4))
    for i, (n, g) in enumerate(random.groupby("n")):
        for name, h in g.groupby("normalization", sort=False):
            q = h.groupby("logit_std")["lipschitz"].quantile([0.25, 0.5, 0.75]).unstack()
            left.plot(q.index, q[0.5], LINESTYLES[i % 4], marker="o", markersize=3,
                      color=NORMALIZATION_COLORS[name], label=f"{display(name)}, n = {n}")
            left.fill_between(q.index, q[0.25], q[0.75], color=NORMALIZATION_COLORS[name],
                              alpha=0.15, linewidth=0)
    scales = sorted(random["logit_std"].unique())
    left.set(xscale="log", yscale="log", xlabel="logit scale σ",
             ylabel="local Lipschitz constant", title="Random layers")
    left.set_xticks(scales, [f"{s:g}" for s in scales])
    left.xaxis.set_minor_formatter(NullFormatter())
    for i, task in enumerate(titles):
        for name, h in trained[trained["task"] == task].groupby("normalization", sort=False):
            med = h.groupby("layer")["lipschitz"].median()
            right.plot(med.index, med.values, LINESTYLES[i % 4], marker="o", markersize=3,
                       color=NORMALIZATION_COLORS[name], label=f"{display(name)}, {titles[task]}")
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.set(yscale="log", xlabel="layer (only these layers are measured)",
              ylabel="local Lipschitz constant", title="Trained layers")
    right.set_xticks(sorted(trained["layer"].unique()))
    for ax in (left, right):
        log_ticks(ax)  # short ranges: plain numbers, at least two of them
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig
