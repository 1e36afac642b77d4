"""Chapter 3's experiments: the first-order theory of one attention layer put to the test.

The measurements behind every number the chapter states (`chapter.run` puts them
together): the slopes of the linearization error and of the cubic law, the measured
constant, the depth bound, where the small-logit regime ends, and the first-order agreement
of softmax and Sinkhorn.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from ... import precise
from ...measures import matrix_norm, residual
from ...normalizations import NORMALIZATIONS, normalize
from ...names import display
from ...profiles import PreciseStack
from ...claim_rows import Claim
from ...registry import MIN_BOUND_LAYERS, REGIME, SLOPE_TOLERANCE
from ...stats import growth_factor, loglog_slope, significant
from ...verdicts import check_result
from ...theory import (HeadWeights, attention_layer, depth_bound_log, head_logits,
                      linearized_sinkhorn, linearized_softmax, one_layer_residual, random_head)


def _spectral(m: torch.Tensor) -> float:
    return float(matrix_norm(m, "spectral"))


def one_layer_table(x0: torch.Tensor, direction: torch.Tensor, scales, head: HeadWeights,
                    normalizations=NORMALIZATIONS, *, n_iter: int) -> pd.DataFrame:
    """Inputs X = x0 + s * direction for each scale s; per normalization, the spectral norms
    of the input residual, the true output residual, the first-order prediction and the
    bound c ||res(X)||^3, and the spectral norm of the centred logits C A C (the part of the
    logits that no constant added to a row or a column can remove)."""
    spec = _spectral
    n = x0.shape[-2]
    rows = []
    for s in scales:
        x = x0 + s * direction
        r_in = spec(residual(x))
        predicted = spec(one_layer_residual(x, head.w_qk, head.w_v, head.d_qk))
        for name in normalizations:
            rows.append({"scale": s, "normalization": name, "input_residual": r_in,
                         "output_residual": spec(residual(attention_layer(x, head, name, n_iter))),
                         "predicted": predicted, "bound": head.constant(n) * r_in**3,
                         "logit_norm": spec(residual(residual(head_logits(x, head)).mT).mT)})
    return pd.DataFrame(rows)


def depth_table(x: torch.Tensor, heads: list[HeadWeights],
                normalizations=NORMALIZATIONS, *, n_iter: int) -> pd.DataFrame:
    """Pure attention stack, one head per layer: measured log10 ||res(X_l)||_2 per layer and
    the first-order L-layer bound log10 of prod c_l^(3^(L-l)) ||res(X_0)||^(3^L)."""
    spec = _spectral
    n = x.shape[-2]
    r0 = spec(residual(x))
    bound = depth_bound_log(math.log(r0), [h.constant(n) for h in heads]) / math.log(10)
    rows = []
    for name in normalizations:
        h = x
        for layer in range(len(heads) + 1):
            if layer:
                h = attention_layer(h, heads[layer - 1], name, n_iter)
            rows.append({"normalization": name, "layer": layer,
                         "log10_residual": math.log10(max(spec(residual(h)), 1e-300)),
                         "log10_bound": float(bound[layer])})
    return pd.DataFrame(rows)


def linearization_errors(a: torch.Tensor, eps_values, n_iter: int) -> pd.DataFrame:
    """Frobenius error of each first-order expansion against the real operator at logits
    eps * a, for each eps: columns eps, normalization, error."""
    exact = {"softmax": lambda m: normalize(m, "softmax"),
             "sinkhorn": lambda m: normalize(m, "sinkhorn", n_iter)}
    linear = {"softmax": linearized_softmax, "sinkhorn": linearized_sinkhorn}
    return pd.DataFrame([{"eps": e, "normalization": k,
                          "error": float((exact[k](e * a) - linear[k](e * a)).norm())}
                         for e in eps_values for k in exact])


# ----------------------------------------------------------------------------- numbers

# Fit windows. The linearization error is fitted where eps^2 leads (eps <= 0.1), the cubic
# law and the first-order gap where the input residual s is small (s <= 0.01): beyond, the
# next order of the expansion shows in the slopes.
LINEARIZATION_WINDOW = 1e-1
CUBIC_WINDOW = 1e-2
# The first-order regime ends where the formula is off by more than this (relative).
REGIME_TOLERANCE = 0.1
LINEARIZATION_ORDER = 2  # the first-order expansions' error is O(eps^2)


def slopes(table: pd.DataFrame, x: str, y: str, by: str = "normalization") -> dict[str, float]:
    """Log-log slope of `y` against `x` per group of `by`."""
    return {k: loglog_slope(g[x], g[y]) for k, g in table.groupby(by)}


def linearization_slopes(lin: pd.DataFrame, max_eps: float = LINEARIZATION_WINDOW
                         ) -> dict[str, float]:
    """Per normalization, the log-log slope of `linearization_errors`' error against eps
    over eps <= `max_eps` (2 predicted)."""
    return slopes(lin[lin["eps"] <= max_eps], "eps", "error")


def cubic_slopes(layer: pd.DataFrame, max_scale: float = CUBIC_WINDOW) -> dict[str, float]:
    """Per normalization, the log-log slope of `one_layer_table`'s output residual against
    its input residual over input sizes s <= `max_scale` (3 under the cubic law): C3a."""
    return slopes(layer[layer["scale"] <= max_scale], "input_residual", "output_residual")


def measured_constants(layer: pd.DataFrame) -> dict[str, float]:
    """||res(output)||_2 / ||res(input)||_2^3 at the smallest input, per normalization: the
    constant of the cubic law as measured, to set against the norm bound's."""
    smallest = layer[layer["scale"] == layer["scale"].min()].set_index("normalization")
    return (smallest["output_residual"] / smallest["input_residual"] ** 3).to_dict()


def stack_table(x0: torch.Tensor, z: torch.Tensor, starts, heads: list[HeadWeights],
                n_iter: int) -> pd.DataFrame:
    """`depth_table` for inputs x0 + s z, one block of rows per start size s (column start)."""
    return pd.concat([depth_table(x0 + s * z, heads, n_iter=n_iter).assign(start=s)
                      for s in starts], ignore_index=True)


def checked_points(stacks: pd.DataFrame, floor_log10: float = -13.0) -> pd.DataFrame:
    """The (layer, start, normalization) points of a stack table at layers 1.. above the
    rounding floor, with whether each is at or below the depth bound (column within; the
    logs compared up to 1e-9, their rounding)."""
    held = stacks.query("layer > 0 and log10_residual > @floor_log10")
    return held.assign(within=held["log10_residual"] <= held["log10_bound"] + 1e-9)


class BoundCheck(NamedTuple):
    """`bound_check`'s answer."""

    holds: bool  # measured at or below the bound at every point checked
    points: int  # (layer, start, normalization) points checked
    deepest: int  # the deepest layer checked (0: none)
    slack: float  # the smallest bound / measured over those points (NaN: none)


def bound_check(stacks: pd.DataFrame, floor_log10: float = -13.0) -> BoundCheck:
    """Whether the measured residual is at or below the depth bound at every layer above the
    rounding floor, at how many (layer, start, normalization) points that was checked, the
    deepest layer checked, and the smallest bound / measured over those points (at least 1
    where the bound holds; NaN when no point is checked)."""
    held = checked_points(stacks, floor_log10)
    holds = bool(held["within"].all())
    slack = float(10.0 ** (held["log10_bound"] - held["log10_residual"]).min()) if len(held) \
        else float("nan")
    return BoundCheck(holds, len(held), int(held["layer"].max()) if len(held) else 0, slack)


PRECISE_HEADS = 2  # the high-precision stack's head width is its token width over this


def shared_token_input(n: int, d: int, generator: torch.Generator
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs X = 1 m^T + s Z of the one-layer and depth tests: the (n, d) matrix of one
    random token m repeated, and a random direction Z (n, d) with zero token mean (float64)."""
    x0 = torch.randn(1, d, generator=generator, dtype=torch.float64).expand(n, d)
    z = torch.randn(n, d, generator=generator, dtype=torch.float64)
    return x0, z - z.mean(0)


def precise_stack(stack: PreciseStack, starts, logit_std: float, generator: torch.Generator,
                  *, n_iter: int) -> pd.DataFrame:
    """The depth bound's stack in high precision (`precise.stack_table`): `stack.depth`
    random heads of logit scale `logit_std` on `stack.n_tokens` tokens of that width (head width over
    `PRECISE_HEADS`); input one shared random token plus s times a centred random direction,
    for each start s of `starts`."""
    n = stack.n_tokens
    heads = [random_head(n, n // PRECISE_HEADS, logit_std=logit_std, generator=generator)
             for _ in range(stack.depth)]
    x0, z = shared_token_input(n, n, generator)
    return precise.stack_table(x0, z, starts, heads, stack.digits, n_iter=n_iter)


def order_guide(table: pd.DataFrame, x: str, y: str, order: int) -> pd.DataFrame:
    """A dashed guide line of log-log slope `order` through the smallest `y` of `table`, at
    its `x` values (a figure's 'slope 2' line)."""
    xs = np.sort(table[x].unique())
    return pd.DataFrame({"x": xs, "y": table[y].min() * (xs / xs[0]) ** order,
                         "label": f"slope {order}", "style": "--"})


def regime_sweep(x0: torch.Tensor, z: torch.Tensor, logit_stds, scales, d: int, d_qk: int,
                 generator: torch.Generator, n_iter: int) -> pd.DataFrame:
    """`one_layer_table` for one random head per logit scale (column logit_std), with the
    ratio measured / first-order formula and the looseness bound / measured."""
    rows = [one_layer_table(x0, z, scales, random_head(d, d_qk, s, generator), n_iter=n_iter)
            .assign(logit_std=s) for s in logit_stds]
    sweep = pd.concat(rows, ignore_index=True)
    return sweep.assign(ratio=sweep["output_residual"] / sweep["predicted"],
                        looseness=sweep["bound"] / sweep["output_residual"])


class RegimeEdge(NamedTuple):
    """Where the first-order regime ends, as two sampled centred-logit norms ||CAC||_2."""

    within: float  # the largest below which every point is within the tolerance
    off: float  # the smallest at which one is off by more (NaN: none is)


def regime_edge(sweep: pd.DataFrame, tolerance: float = REGIME_TOLERANCE
                ) -> dict[str, RegimeEdge]:
    """Per normalization, the edge of the first-order regime as two sampled centred-logit
    norms ||CAC||_2: the largest below which every point is within `tolerance` (relative) of
    the formula, and the smallest at which one is off by more (NaN if none is)."""
    edges = {}
    for name, g in sweep.groupby("normalization"):
        off = g[(g["ratio"] - 1).abs() > tolerance]
        first = float(off["logit_norm"].min()) if len(off) else float("nan")
        within = g[g["logit_norm"] < first] if len(off) else g
        edges[name] = RegimeEdge(float(within["logit_norm"].max()) if len(within)
                                 else float("nan"), first)
    return edges


def first_order_gap(layer: pd.DataFrame) -> pd.Series:
    """|softmax - Sinkhorn| / Sinkhorn output residual per input scale s (index)."""
    pivot = layer.pivot(index="scale", columns="normalization", values="output_residual")
    return ((pivot["softmax"] - pivot["sinkhorn"]).abs() / pivot["sinkhorn"]).rename("relative_gap")


def gap_slope(gap: pd.Series, max_scale: float = CUBIC_WINDOW) -> float:
    """Log-log slope of the first-order gap against s for s <= max_scale."""
    small = gap[gap.index <= max_scale]
    return loglog_slope(small.index, small.values)


def gap_sentence(gap: pd.Series, max_scale: float = CUBIC_WINDOW) -> str:
    """Whether the first-order gap falls as s decreases (a positive log-log slope over
    s <= `max_scale`: the difference shrinks faster than the residual, the two
    normalizations agree at first order), with the slope and the gap at the smallest s."""
    slope = gap_slope(gap, max_scale)
    falls = bool(slope > 0)
    return (f"The relative gap {'falls' if falls else 'does not fall'} as *s* decreases: it "
            f"goes like *s* to the power {slope:.2f} for *s* ≤ {max_scale:g}, and is "
            f"{significant(gap.iloc[0], 2)} at the smallest input, so the two normalizations "
            + ("agree at first order." if falls else "do not agree at first order here."))


def bound_sentence(stacks: pd.DataFrame, floor_log10: float = -13.0) -> str:
    """Whether the measured residual of a `stack_table` (or `precise.stack_table`) is at or
    below the depth bound at every layer above the rounding floor (`bound_check`'s rule),
    at how many (layer, start, normalization) points, and at how many it is above."""
    held = checked_points(stacks, floor_log10)
    if not len(held):
        return "No layer is above the rounding floor, so the bound is not checked."
    above = int((~held["within"]).sum())
    where = f"(layer, start, normalization) points, layers 1 to {int(held['layer'].max())}"
    return (f"Yes, at all {len(held)} {where}." if not above else
            f"No: the measured residual is above the bound at {above} of {len(held)} {where}.")


def digit_growth(stacks: pd.DataFrame, floor_log10: float = -13.0) -> float:
    """The factor by which each layer multiplies the digits lost (-log10 of the residual):
    `growth_factor` over layers 1.. above the rounding floor of each (start, normalization)
    curve, geometric mean over the curves. 3 under the cubic law r_{l+1} ~ c r_l^3."""
    factors = [growth_factor(g["layer"], -g["log10_residual"])
               for _, g in stacks.query("layer > 0 and log10_residual > @floor_log10")
               .groupby(["start", "normalization"])]
    factors = [f for f in factors if np.isfinite(f)]
    return float(np.exp(np.mean(np.log(factors)))) if factors else float("nan")


def claims(cubic: dict[str, float], bound: tuple[bool, int, int, float], sweep: pd.DataFrame,
           growth: float | None = None, digits: int | None = None) -> list[Claim]:
    """C3a (slope 3 within `registry.SLOPE_TOLERANCE`, per normalization), C3b (the depth
    bound, `bound_check`'s result; not testable when fewer than `registry.MIN_BOUND_LAYERS`
    layers are above the rounding floor; the digits-lost `growth` factor is description) and
    C3c (the bound where the centred logits are at most `registry.REGIME`), each decided by
    its registered check."""
    bound_holds, points, deepest, slack = bound
    precision = f"computed with {digits} significant digits" if digits else "float64"
    grown = f" Each layer multiplies the digits lost by {growth:.2f} (3 under the cubic law)." \
        if growth is not None and np.isfinite(growth) else ""
    small = sweep[sweep["logit_norm"] <= REGIME]
    within = bool(len(small)) and bool((small["looseness"] >= 1).all())
    found = ", ".join(f"{display(k)} {v:.3f}" for k, v in cubic.items())
    slopes = [check_result("one random head", display(k), v, abs(v - 3) <= SLOPE_TOLERANCE)
              for k, v in cubic.items()]
    enough = deepest >= MIN_BOUND_LAYERS
    return [
        Claim.of("C3a", slopes, f"Log-log slope of output against input residual, small "
                 f"inputs: {found} (check: within {SLOPE_TOLERANCE:g} of 3). The bound "
                 "tested is this book's first-order derivation on one head; the paper's "
                 "constant is unconfirmed.", figure="fig-cubic"),
        Claim.of("C3b", [check_result("random pure stack", "every layer above the floor",
                                      slack, bound_holds if enough else None)],
                 "The measured residual stays below the first-order $L$-layer bound (this "
                 "book's derivation, one head per layer; the paper's constant is unconfirmed) "
                 f"at every layer above the rounding floor ({precision}): "
                 f"{'yes' if bound_holds else 'no'} ({points} points, layers 1–{deepest}; "
                 f"smallest bound / measured {slack:.3g})."
                 + (grown if enough else
                    f" Deciding the exponent needs at least {MIN_BOUND_LAYERS} layers above "
                    "the floor."), figure="fig-depth-bound"),
        Claim.of("C3c", [check_result(
            "one random head per logit scale", "small logits",
            float(small["looseness"].min()) if len(small) else None, within if len(small)
            else None)],
            f"Where the centred logits have spectral norm at most {REGIME:g}, the bound "
            f"$c\\,\\Vert R\\Vert^3$ is {'above' if within else 'not always above'} the "
            f"measured residual ({len(small)} points; smallest bound / measured "
            f"{float(small['looseness'].min()) if len(small) else float('nan'):.3g}).",
            figure="fig-regime"),
    ]
