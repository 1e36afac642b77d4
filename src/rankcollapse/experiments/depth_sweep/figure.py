"""The depth sweep's figure: Sinkhorn / softmax against relative depth, one curve per depth."""

from __future__ import annotations

import pandas as pd

from ...plots import WIDTH, log_ticks, panel_grid, ratio_plot, wrap_title

from .experiment import SWEPT_VARIANTS


def ratio_by_depth(ratios: pd.DataFrame):
    """One panel per inference variant (`SWEPT_VARIANTS`: with skips, without), each on its
    own scale (without skips the ratios spread over decades): the ratio Sinkhorn / softmax
    with its interval against the relative depth layer / L, one curve per depth L."""
    fig, axes, _ = panel_grid(len(SWEPT_VARIANTS), height=3.4)
    for ax, (variant, title) in zip(axes, SWEPT_VARIANTS.items()):
        part = ratios[ratios["variant"] == variant]
        ratio_plot(ax, part.assign(setting=part["depth"].map("L = {}".format)),
                   x="relative", xlabel="relative depth, layer / L", legend=False)
        ax.set_title(wrap_title(title, WIDTH / 2))
        ax.set_xlim(0, 1.02)
        log_ticks(ax)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    return fig
