"""Chapter 3 as a function of its profile: every table, every figure's data, every value
its prose states and its claims, computed by `run` from the profile, the device and the
seed alone. The notebook shows them; it computes nothing."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from ... import precise as hp
from ...claim_rows import Claim
from ...names import quoted
from ...profiles import Profile
from ...theory import random_head
from . import experiment as lb


@dataclass(frozen=True)
class LinearizedBound:
    """What chapter 3 shows."""

    linearization: pd.DataFrame  # the expansions' error per normalization and eps
    slopes: dict[str, float]  # its log-log slope per normalization
    layer: pd.DataFrame  # one layer's residuals per normalization and input size
    precise: pd.DataFrame  # the high-precision stack against its bound, per layer and start
    regime: pd.DataFrame  # measured / formula and bound / measured per logit scale and size
    gap: pd.Series  # the relative softmax/Sinkhorn gap per input size s
    glue: dict[str, object]  # numbers the prose states
    text: dict[str, str]  # sentences the prose states (Markdown)
    claims: list[Claim]


def run(settings: Profile, device: torch.device, seed: int) -> LinearizedBound:
    """Chapter 3 under `settings`, every draw from one generator seeded with `seed`, in the
    order the chapter shows them (float64 and high precision on the CPU: `device` is not
    used)."""
    gen = torch.Generator().manual_seed(seed)
    n, d = settings.n_tokens, settings.d_model
    d_qk = d // settings.n_heads

    a = torch.randn(n, n, generator=gen, dtype=torch.float64)
    lin = lb.linearization_errors(a, settings.ch3.linearization_eps.values, n_iter=settings.n_iter)
    slopes = lb.linearization_slopes(lin)

    head = random_head(d, d_qk, logit_std=settings.ch3.head_scale, generator=gen)
    x0, z = lb.shared_token_input(n, d, gen)
    layer = lb.one_layer_table(x0, z, settings.ch3.layer_scales.values, head,
                               n_iter=settings.n_iter)
    cubic, measured = lb.cubic_slopes(layer), lb.measured_constants(layer)

    stack = settings.ch3.bound_precise
    heads = [random_head(d, d_qk, logit_std=settings.ch3.head_scale, generator=gen)
             for _ in range(stack.depth)]
    stacks = lb.stack_table(x0, z, settings.ch3.stack_starts, heads, n_iter=settings.n_iter)
    floor_log10 = hp.floor_log10(stack.digits)
    precise = lb.precise_stack(stack, settings.ch3.bound_starts, settings.ch3.head_scale, gen,
                               n_iter=settings.n_iter)
    growth = lb.digit_growth(precise, floor_log10)

    sweep = lb.regime_sweep(x0, z, settings.ch3.regime_logit_stds,
                            settings.ch3.regime_scales.values, d,
                            d_qk, gen, n_iter=settings.n_iter)
    edges = lb.regime_edge(sweep)
    gap = lb.first_order_gap(layer)

    glue = {"ch3_slope_softmax": slopes["softmax"], "ch3_slope_sinkhorn": slopes["sinkhorn"],
            "ch3_lin_window": lb.LINEARIZATION_WINDOW, "ch3_cubic_window": lb.CUBIC_WINDOW,
            "ch3_cubic_softmax": cubic["softmax"], "ch3_cubic_sinkhorn": cubic["sinkhorn"],
            "ch3_c_pred": head.constant(n), "ch3_c_meas_sinkhorn": measured["sinkhorn"],
            "ch3_c_meas_softmax": measured["softmax"],
            "ch3_looseness": head.constant(n) / measured["sinkhorn"],
            "ch3_depth": stack.depth, "ch3_small_n": stack.n_tokens, "ch3_digits": stack.digits,
            "ch3_n_iter": settings.n_iter,
            "ch3_growth": growth, "ch3_float_deepest": lb.bound_check(stacks).deepest,
            "ch3_regime_stds": ", ".join(f"{s:g}" for s in settings.ch3.regime_logit_stds),
            "ch3_tolerance": lb.REGIME_TOLERANCE,
            "ch3_edge_softmax": quoted(edges["softmax"].within),
            "ch3_edge_sinkhorn": quoted(edges["sinkhorn"].within),
            "ch3_off_softmax": quoted(edges["softmax"].off),
            "ch3_off_sinkhorn": quoted(edges["sinkhorn"].off),
            "ch3_loose_min": sweep["looseness"].min(), "ch3_loose_max": sweep["looseness"].max()}
    text = {"ch3_bound_verdict": lb.bound_sentence(precise, floor_log10),
            "ch3_gap_verdict": lb.gap_sentence(gap)}
    claims = lb.claims(cubic, lb.bound_check(precise, floor_log10=floor_log10), sweep,
                       growth=growth, digits=stack.digits)
    return LinearizedBound(lin, slopes, layer, precise, sweep, gap, glue, text, claims)
