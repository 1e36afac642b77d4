"""Chapter 2 as a function of its profile: every table, every figure's data, every value
its prose states and its claims, computed by `run` from the profile, the device and the
seed alone. The notebook shows them; it computes nothing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...claim_rows import Claim
from ...measures import rounding_floor
from ...names import math_number
from ...normalizations import sinkhorn, softmax
from ...profiles import Profile
from ...registry import COLLAPSED, PAPER_N
from ...timing import time_vs_n
from .. import rank_collapse as rc
from . import experiment as sv


@dataclass(frozen=True)
class SinkhornVsSoftmax:
    """What chapter 2 shows."""

    n_iter: int  # the profile's Sinkhorn iterations
    curves: pd.DataFrame  # marginal errors per logit scale and step
    after: pd.DataFrame  # quantiles of the row error after n_iter iterations (scale x (n, q))
    heat: dict[str, np.ndarray]  # one random matrix normalized both ways, by title
    entropies: pd.DataFrame  # mean row entropy per scale, normalization and draw
    log_n: float  # the entropy of uniform rows (nats)
    pure: pd.DataFrame  # `log_summary` of pure stacks, per normalization, scale and layer
    reach: pd.DataFrame  # first layer below the collapse threshold, scale x normalization
    timing: pd.DataFrame  # seconds per call, per implementation and n
    glue: dict[str, object]  # numbers the prose states
    text: dict[str, str]  # sentences the prose states (Markdown)
    claims: list[Claim]

    @property
    def heat_weights(self) -> pd.DataFrame:
        """The heat maps' data: one row per (normalization, query, key)."""
        return pd.concat([pd.DataFrame(p).stack().rename("weight")
                          .rename_axis(["query", "key"]).reset_index().assign(normalization=k)
                          for k, p in self.heat.items()])

    @property
    def per_n(self) -> pd.DataFrame:
        """Seconds per call, n x implementation."""
        return seconds_per_n(self.timing)


def seconds_per_n(timing: pd.DataFrame) -> pd.DataFrame:
    """`time_vs_n`'s table as seconds per call, n x implementation."""
    return timing.pivot(index="n", columns="implementation", values="seconds")


def run(settings: Profile, device: torch.device, seed: int) -> SinkhornVsSoftmax:
    """Chapter 2 under `settings` on `device`: every random logit from one generator seeded
    with `seed`, in the order the chapter shows them (the cost figure's timed inputs come
    from torch's global generator: only their times are shown)."""
    gen = torch.Generator().manual_seed(seed)
    n, scales = settings.n_tokens, settings.ch2.entropy_scales
    curves = sv.convergence_curves(scales, settings.n_samples, n, settings.ch2.convergence_steps,
                                   gen)
    after = sv.error_after(settings.n_iter, sorted({n, PAPER_N}), scales,
                           draws=settings.ch2.error_draws, generator=gen)
    side, scale = settings.ch2.heatmap
    small = torch.randn(side, side, generator=gen) * scale
    heat = {"softmax": softmax(small).numpy(),
            f"Sinkhorn ({settings.n_iter} iterations)": sinkhorn(small, settings.n_iter).numpy()}
    entropies = sv.entropy_table(scales, settings.ch2.entropy_draws, n, gen)

    floor = rounding_floor(torch.float64)
    stacks = rc.sweep([dict(normalization=nm, logit_std=s) for nm in ("softmax", "sinkhorn")
                       for s in settings.ch2.pure_scales], settings.n_samples, n, settings.d_model,
                      settings.n_heads, settings.depth, settings.n_iter, seed, device,
                      dtype=torch.float64, weight_draws=settings.weight_draws)
    pure = rc.log_summary(stacks, ["normalization", "logit_std", "layer"], floor=floor)
    reach = sv.layers_to(pure, COLLAPSED)

    timing = time_vs_n(list(settings.ch2.cost_sizes), batch=settings.ch2.cost_batch,
                       n_iter=settings.n_iter, repeats=settings.ch2.cost_repeats, device=device)
    per_n = seconds_per_n(timing)
    largest = max(settings.ch2.cost_sizes)

    glue = {"ch2_error_draws": settings.ch2.error_draws, "ch2_n_iter": settings.n_iter,
            "ch2_colsum_min": heat["softmax"].sum(0).min(),
            "ch2_colsum_max": heat["softmax"].sum(0).max(), "ch2_heat_n": side,
            "ch2_heat_scale": scale, "ch2_draws": settings.ch2.entropy_draws,
            "ch2_entropy_scale": settings.ch2.entropy_quoted_scale,
            "ch2_entropy_gain": sv.entropy_gain(entropies, settings.ch2.entropy_quoted_scale),
            "ch2_draws_w": settings.weight_draws, "ch2_inputs": settings.n_samples,
            **{f"ch2_{k}": v for k, v in sv.reach_gaps(reach).items()},
            "ch2_cost_ratio": per_n.loc[largest, "sinkhorn"] / per_n.loc[largest, "softmax"],
            "ch2_speedup": per_n.loc[largest, "log-domain reference"]
            / per_n.loc[largest, "sinkhorn"],
            "ch2_cost_n": largest, "ch2_cost_batch": settings.ch2.cost_batch,
            "ch2_cost_repeats": settings.ch2.cost_repeats}
    text = {"ch2_errors": sv.error_sentence(after, n, settings.ch2.error_quoted_scales),
            "ch2_entropy_verdict": sv.entropy_sentence(sv.entropy_comparison(entropies)),
            "ch2_reach": sv.reach_sentence(reach), "ch2_collapsed": math_number(COLLAPSED)}
    return SinkhornVsSoftmax(settings.n_iter, curves, after, heat, entropies, float(np.log(n)),
                             pure, reach, timing, glue, text,
                             sv.claims(after, entropies, settings))
