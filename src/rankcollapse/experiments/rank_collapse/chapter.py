"""Chapter 1 as a function of its profile: every table, every figure's data, every value
its prose states and its claim, computed by `run` from the profile, the device and the
seed alone. The notebook shows them; it computes nothing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...claim_rows import Claim
from ...measures import composite_norm, relative_residual, rounding_floor
from ...names import math_number, quoted
from ...precise import floor_log10
from ...profiles import Profile
from ...registry import COLLAPSED
from . import experiment as rc

# The block parts switched on one at a time, with the same weights and inputs.
PARTS = {"pure attention": {}, "+ skip": dict(skip=True), "+ FFN": dict(ffn=True),
         "+ LayerNorm": dict(layernorm=True), "+ skip + FFN": dict(skip=True, ffn=True),
         "full block": dict(skip=True, ffn=True, layernorm=True)}


@dataclass(frozen=True)
class RankCollapse:
    """What chapter 1 shows. Summaries are `log_summary` tables (log10 residual per layer)."""

    example: pd.DataFrame  # the worked example: tokens and their residual
    floor: float  # float64's rounding floor of the relative residual
    pure: pd.DataFrame  # pure softmax stacks, per logit scale and layer
    lost: pd.DataFrame  # digits lost in high precision, per logit scale and layer
    parts: pd.DataFrame  # per set of block parts and layer
    layernorm: pd.DataFrame  # the LayerNorm rank check, per affine rank
    contrast: pd.DataFrame  # residual of the rank-against-entropy contrast, per stack and layer
    entropy: pd.DataFrame  # row entropy of the same stacks
    log_n: float  # the entropy of uniform rows (nats)
    glue: dict[str, object]  # numbers the prose states
    text: dict[str, str]  # sentences the prose states (Markdown)
    claims: list[Claim]

    @property
    def rank_vs_entropy(self) -> pd.DataFrame:
        """The data of the rank-against-entropy figure, both panels in one table."""
        return pd.concat([self.contrast.assign(quantity="log10 residual"),
                          self.entropy.assign(quantity="entropy (nats)")])


def run(settings: Profile, device: torch.device, seed: int) -> RankCollapse:
    """Chapter 1 under `settings` on `device`, every draw from `seed`."""
    floor = rounding_floor(torch.float64)  # residuals at or below it are rounding
    sizes = dict(n_samples=settings.n_samples, n_tokens=settings.n_tokens,
                 d_model=settings.d_model, n_heads=settings.n_heads, depth=settings.depth,
                 n_iter=settings.n_iter, seed=seed, device=device,
                 weight_draws=settings.weight_draws, dtype=torch.float64)
    x = rc.example_tokens()
    pure = rc.log_summary(rc.sweep([dict(normalization="softmax", logit_std=s)
                                    for s in settings.ch1.collapse_scales], **sizes),
                          ["logit_std", "layer"], floor=floor)

    stack = settings.ch1.collapse_precise
    precise = rc.precise_collapse(settings.ch1.collapse_scales, stack.n_tokens, stack.n_tokens,
                                  stack.depth, settings.weight_draws, seed, stack.digits)
    lost = rc.precise_digits_lost(precise, floor_log10=floor_log10(stack.digits))
    fit = rc.growth_window(lost)
    growth, points = rc.growth_factors(fit), rc.fit_points(fit)

    parts = rc.log_summary(rc.sweep([dict(normalization="softmax",
                                          logit_std=settings.ch1.parts_scale,
                                          label=k, **v) for k, v in PARTS.items()], **sizes),
                           ["label", "layer"], floor=floor)
    last = rc.final_residuals(parts, settings.depth)

    ln_table, ln_counts = rc.layernorm_summary(rc.layernorm_rank_check(
        n_tokens=settings.n_tokens, d_model=settings.d_model, ranks=settings.ch1.layernorm_ranks,
        draws=settings.ch1.layernorm_draws, seed=seed))

    contrast = rc.sweep(rc.contrast_configs(*settings.ch1.contrast_scales), **sizes)
    entropy = rc.entropy_summary(contrast, ["label", "layer"])
    contrast_summary = rc.log_summary(contrast, ["label", "layer"], floor=floor)
    log_n = float(np.log(settings.n_tokens))

    glue = {"ch1_example_r": relative_residual(x), "ch1_example_norm": composite_norm(x),
            "ch1_n_samples": settings.n_samples, "ch1_draws": settings.weight_draws,
            "ch1_floor": quoted(floor),
            "ch1_growth_min": growth.min(), "ch1_growth_max": growth.max(),
            "ch1_fit_points": int(points.min()), "ch1_digits": stack.digits,
            "ch1_precise_n": stack.n_tokens, "ch1_precise_draws": settings.weight_draws,
            "ch1_min_lost": rc.GROWTH_MIN_LOST, "ch1_min_lost_r": rc.GROWTH_MIN_RESIDUAL,
            "ch1_float_layers": rc.layers_above_floor(pure, floor=floor),
            "ch1_depth": settings.depth, "ch1_parts_scale": settings.ch1.parts_scale,
            "ch1_last_skip": last["+ skip"],
            "ch1_last_full": last["full block"], "ch1_ln_draws": settings.ch1.layernorm_draws,
            **{f"ch1_ln_{k}": v for k, v in ln_counts.items()}, "ch1_log_n": log_n}
    text = {"ch1_parts": rc.parts_sentence(last), "ch1_collapsed": math_number(COLLAPSED),
            "ch1_ln_verdict": rc.layernorm_sentence(ln_counts),
            "ch1_contrast": rc.contrast_sentence(
                rc.final_entropies(entropy, settings.depth),
                rc.final_residuals(contrast_summary, settings.depth), log_n)}
    claims = rc.claims(rc.final_residuals(pure, settings.depth, by="logit_std"), last["+ skip"],
                       growth, points=int(points.min()), digits=stack.digits)
    return RankCollapse(rc.example_table(x), floor, pure, lost, parts, ln_table,
                        contrast_summary, entropy, log_n, glue, text, claims)
