"""Chapter 1's figures: residual bands of the pure stacks and of the block parts, the digits
lost in high precision, and rank against entropy collapse."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from ...plots import WIDTH, band, colors, residual_bands
from .chapter import RankCollapse


def pure_collapse(r: RankCollapse):
    """The relative residual of pure softmax stacks against depth, one band per logit scale."""
    return residual_bands(r.pure, "logit_std", "logit scale {:g}", floor=r.floor,
                          title="Pure softmax self-attention")


def block_parts(r: RankCollapse):
    """The relative residual against depth, one band per set of block parts switched on."""
    return residual_bands(r.parts, "label", floor=r.floor, title="Which parts stop the collapse")


def rank_vs_entropy(r: RankCollapse):
    """Residual (left) and row entropy (right) of the contrast's two stacks."""
    return rank_and_entropy(r.contrast, r.entropy, r.log_n)


def digits_lost(digits: pd.DataFrame, by: str = "logit_std", factor: float = 3.0):
    """-log10 r against layer on a log axis, one line per group (mean; bars from columns
    `low` to `high` where present), with a guide line growing by `factor` per layer (the cubic
    law's rate) through the groups' median at the first layer with at least one digit lost."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    palette = colors(digits[by])
    for key, group in digits.groupby(by):
        bars = None
        if {"low", "high"} <= set(group):
            bars = [group["lost"] - group["low"], group["high"] - group["lost"]]
        ax.errorbar(group["layer"], group["lost"], yerr=bars, marker="o", capsize=2,
                    color=palette[key], label=f"logit scale {key:g}")
    layers = np.arange(1, int(digits["layer"].max()) + 1)
    anchor = digits[digits["lost"] >= 1].groupby("layer")["lost"].median()
    if len(anchor):
        ax.plot(layers, anchor.iloc[0] * factor ** (layers - anchor.index[0]), color="grey",
                linestyle="--", linewidth=0.8, label=f"factor {factor:g} per layer")
    ax.set(yscale="log", xlabel="layer $l$", ylabel="digits lost, $-\\log_{10} r(X_l)$",
           ylim=(0.5 * digits["lost"].min(), 2 * digits["lost"].max()), xticks=layers,
           title="Doubly exponential collapse")
    ax.legend()
    return fig


def rank_and_entropy(residuals: pd.DataFrame, entropy: pd.DataFrame, log_n: float,
                     hue: str = "label"):
    """Left: residual bands; right: mean row entropy with a one-standard-deviation band and a
    dotted line at log n (uniform rows)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 3.6))
    residual_bands(residuals, hue, ax=left, title="Rank")
    palette = colors(residuals[hue])
    for key, e in entropy.groupby(hue, sort=False):
        band(right, e["layer"], e["mean"], e["std"], color=palette[key], label=key)
    right.axhline(log_n, color="grey", linestyle=":")
    right.xaxis.set_major_locator(MaxNLocator(integer=True))  # layers are whole numbers
    right.set(xlim=left.get_xlim(), xlabel="attention of layer $l$",
              ylabel="row entropy of attention (nats)", title="Entropy")
    return fig
