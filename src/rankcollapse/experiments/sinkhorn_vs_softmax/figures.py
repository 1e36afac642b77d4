"""Chapter 2's figures: convergence of Sinkhorn's iteration, the two normalizations of one
matrix, row entropies, pure stacks of both, and the cost of a call."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...names import display
from ...plots import NORMALIZATION_COLORS, WIDTH, colors, paired_boxes, residual_bands
from .chapter import SinkhornVsSoftmax


def convergence(r: SinkhornVsSoftmax):
    """Marginal errors against steps, under both conventions (`convergence_lines`)."""
    return convergence_lines(r.curves, r.n_iter)


def heatmaps(r: SinkhornVsSoftmax):
    """Softmax and Sinkhorn attention of the same random logits (`heatmap_pair`)."""
    return heatmap_pair(r.heat)


def entropy(r: SinkhornVsSoftmax):
    """Mean row entropy per logit scale, softmax and Sinkhorn side by side; dotted: log n."""
    fig = paired_boxes(r.entropies, "scale", "entropy", xlabel="logit scale $\\sigma$",
                       ylabel="mean row entropy (nats)")
    fig.axes[0].axhline(r.log_n, color="grey", linestyle=":")
    return fig


def pure_both(r: SinkhornVsSoftmax):
    """Residual against depth of pure stacks, both normalizations, one style per scale."""
    return residual_bands(r.pure, "normalization", "{}, logit scale {:g}", style="logit_std")


def cost(r: SinkhornVsSoftmax):
    """Time per call against n (`cost_lines`)."""
    return cost_lines(r.per_n)


def convergence_lines(curves: pd.DataFrame, n_iter: int):
    """Marginal errors against half-steps (left) and full iterations (right, row error),
    one line per logit scale; dashed lines at `n_iter` full iterations."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 3.6), sharey=True)
    palette = colors(curves["scale"])
    for s, c in curves.groupby("scale"):
        left.plot(c["half_steps"], np.maximum(c["row_error"], c["column_error"]),
                  color=palette[s], label=f"$\\sigma$ = {s:g}")
        full = c[c["half_steps"] % 2 == 0]
        right.plot(full["full_iterations"], full["row_error"], color=palette[s])
    left.axvline(2 * n_iter, color="grey", linestyle="--")
    right.axvline(n_iter, color="grey", linestyle="--")
    left.set(yscale="log", xlabel="half-steps (Sinkformers' n_it)",
             ylabel="max |marginal sum − 1|", title="Half-step convention")
    right.set(xlabel="full iterations (this book's n_iter)", title="Full-iteration convention")
    left.legend()
    return fig


def heatmap_pair(pair: dict[str, np.ndarray]):
    """Attention maps side by side, each with its column sums as bars above it."""
    fig, axes = plt.subplots(2, len(pair), figsize=(8, 4.8), height_ratios=[1, 4],
                             sharex="col")
    vmax = max(float(p.max()) for p in pair.values())
    for (name, p), top, ax in zip(pair.items(), axes[0], axes[1]):
        top.bar(range(p.shape[1]), p.sum(0), color="grey")
        top.set(ylabel="column sum", ylim=(0, 2.2), title=display(name))
        image = ax.imshow(p, cmap="viridis", vmin=0, vmax=vmax)
        ax.set(xlabel="key", ylabel="query")
        ax.grid(False)
    fig.colorbar(image, ax=axes[1], label="attention weight", shrink=0.8)
    return fig


def cost_lines(per_n: pd.DataFrame, ours: str = "sinkhorn", fast: str = "softmax"):
    """Time per call against n (log-log): softmax blue, our Sinkhorn red, others grey."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name in per_n.columns:
        color = {fast: NORMALIZATION_COLORS["softmax"],
                 ours: NORMALIZATION_COLORS["sinkhorn"]}.get(name, "grey")
        ax.plot(per_n.index, per_n[name] * 1e3, marker="o", color=color, label=display(name),
                linestyle="-" if name in (ours, fast) else "--")
    ax.set(xscale="log", yscale="log", xlabel="sequence length $n$", ylabel="time per call (ms)")
    ax.set_xticks(per_n.index, per_n.index, minor=False)
    ax.minorticks_off()
    ax.legend()
    return fig
