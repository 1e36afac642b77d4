"""Chapter 6's depth sweep, this book's own experiment (B5): how the Sinkhorn advantage in
trained models changes with depth.

One task of the profile (`Profile.depth_sweep`: its data, width, heads and schedule) is
trained at several depths L, with the same seeds for both normalizations at every depth;
the hidden-state residual is read layer by layer at the *relative* depth layer / L, with
and without skip connections, so that "early" and "late" mean the same part of every
stack. The registered finding (B5) is a trend over depths, not a vote over them: per
training seed, the slope of its Sinkhorn / softmax log ratio over the second half of the
layers against log2 L, with the t interval of the mean slope over seeds.

`run(settings, device)` trains or loads the models and returns every table, the figure's
data, the glued values and the claim in one record (`Sweep`); `ratio_by_depth` draws it.
"""

from .experiment import FIGURE, SWEPT_VARIANTS, Sweep, run
from .figure import ratio_by_depth

__all__ = ["FIGURE", "SWEPT_VARIANTS", "Sweep", "ratio_by_depth", "run"]
