"""Chapter 4's figures: the control's path products, their ratio Sinkhorn / softmax against
depth, over logit scales and sizes, for correlated logits, for random networks, and for the
hidden states of random networks."""

from __future__ import annotations

import pandas as pd
from matplotlib.ticker import NullLocator

from ...plots import (WIDTH, boxes_by, legend_off_data, log_ticks, panel_grid, ratio_figure,
                      ratio_panels, ratio_plot, wrap_title)
from .chapter import RandomMatrixControl
from .experiment import HIDDEN_TASKS


def control_boxes(r: RandomMatrixControl):
    """The control's rank-1 residuals per depth, one panel per setting."""
    return boxes_by(r.control, "setting", "depth", ylabel="rank-1 residual of the product")


def control_ratio(r: RandomMatrixControl):
    """The control's ratio Sinkhorn / softmax against path depth."""
    return ratio_figure(r.advantage)


def control_sweep(r: RandomMatrixControl):
    """The control's ratio over logit scales and sizes, one panel per path depth."""
    return sweep_figure(r.sweep)


def correlated(r: RandomMatrixControl):
    """Test (a): the ratio against path depth for correlated logits."""
    return ratio_figure(r.correlated)


def network_chains(r: RandomMatrixControl):
    """Test (b): the ratio for random networks and their controls (depths with an interval)."""
    return ratio_figure(r.chains.dropna(subset=["low"]), r.chain_settings)


def hidden_test(r: RandomMatrixControl):
    """Test (c): the hidden states' ratio against the layer, with and without LayerNorm."""
    return ratio_panels(r.hidden, {t: t for t in HIDDEN_TASKS.values()}, x="layer",
                        xlabel="layer $l$")


def sweep_figure(adv: pd.DataFrame, panel: str = "depth", x: str = "logit_std",
                 line: str = "n", panel_title: str = "paths of depth {}",
                 line_label: str = "n = {}", xlabel: str = "logit scale $\\sigma$"):
    """`ratio_plot` against `x` (log axis), one line per value of `line`, one panel per value
    of `panel`, shared y."""
    panels = list(dict.fromkeys(adv[panel]))
    fig, axes, spare = panel_grid(len(panels), height=3.1, sharey=True)
    for ax, key in zip(axes, panels):
        part = adv[adv[panel] == key]
        ratio_plot(ax, part.assign(setting=part[line].map(line_label.format)), x=x,
                   xlabel=xlabel, legend=False)
        ax.set(xscale="log", title=wrap_title(panel_title.format(key), WIDTH / 2))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(sorted(part[x].unique()), [f"{v:g}" for v in sorted(part[x].unique())])
        if ax.get_subplotspec().colspan.start:
            ax.set_ylabel("")
    log_ticks(axes[0])
    legend_off_data(fig, *axes[0].get_legend_handles_labels(), spare, ncol=4)
    return fig
