"""Rank collapse in random-weight attention stacks: residual and entropy layer by layer.

The experiments of chapters 1 and 2: build a stack with chosen parts switched on, feed random
token matrices, record the relative residual of every hidden state and the row entropy of
every attention matrix, and return them as a tidy table (one row per layer and input); then
the numbers chapter 1 states about them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ... import precise
from ...measures import (affine_rank, layer_table, relative_residual, residual, rounding_floor,
                        row_entropy)
from ...models import Encoder, Switches, random_stack
from ...claim_rows import Claim
from ...registry import COLLAPSED
from ...stats import growth_factor, mostly_at_floor, significant
from ...verdicts import check_result
from ...theory import random_head


def random_tokens(n_samples: int, n_tokens: int, d_model: int, generator: torch.Generator,
                  device: torch.device | str = "cpu") -> torch.Tensor:
    """`n_samples` token matrices `(n_tokens, d_model)` with i.i.d. N(0, 1) entries."""
    return torch.randn(n_samples, n_tokens, d_model, generator=generator).to(device)


@torch.no_grad()
def depth_profile(encoder: Encoder, x: torch.Tensor, norm: str = "composite") -> pd.DataFrame:
    """Relative residual of each hidden state (layer 0 = input) and the mean row entropy of
    each layer's attention (NaN at layer 0), one row per (layer, input sample)."""
    out = encoder(x, record=True)
    table = layer_table(relative_residual(out.hidden.double(), norm).cpu().numpy())
    entropy = row_entropy(out.attention.double()).mean(-1).cpu().numpy()  # (L, B)
    return table.assign(entropy=np.concatenate([np.full(x.shape[0], np.nan), entropy.ravel()]))


def sweep(configs: list[dict], n_samples: int, n_tokens: int, d_model: int, n_heads: int,
          depth: int, n_iter: int, seed: int, device: torch.device, norm: str = "composite",
          dtype: torch.dtype = torch.float32, weight_draws: int = 1) -> pd.DataFrame:
    """`depth_profile` for each config (keys: normalization, logit_std, and optionally skip,
    ffn, layernorm, label), all on the same random inputs; config keys become columns.

    Configs that differ only in normalization (or label) get the same weights, so softmax and
    Sinkhorn are compared on identical networks; each config is run with `weight_draws`
    independent weight draws (column `draw`, the independent unit of a comparison). float64
    lets the residual fall to ~1e-16 before rounding stops it; float32 to ~1e-7."""
    gen = torch.Generator().manual_seed(seed)
    x = random_tokens(n_samples, n_tokens, d_model, gen, device).to(dtype)
    networks: dict[tuple, int] = {}  # architecture and weight scale -> index of its weights
    frames = []
    for cfg in configs:
        switches = Switches(**{k: cfg.get(k, False) for k in ("skip", "ffn", "layernorm")})
        index = networks.setdefault((cfg["logit_std"], *vars(switches).values()), len(networks))
        for draw in range(weight_draws):
            stack = random_stack(d_model, n_heads, depth, cfg["normalization"],
                                 cfg["logit_std"], switches, seed + 1 + index + 1000 * draw,
                                 n_iter, device).to(dtype)
            frames.append(depth_profile(stack, x, norm).assign(draw=draw, **cfg))
    return pd.concat(frames, ignore_index=True)


def log_summary(df: pd.DataFrame, by: list[str], value: str = "residual",
                floor: float = 0.0) -> pd.DataFrame:
    """Mean and standard deviation of log10(value) per group, the number of values above
    `floor` (`count`) and at or below it (`at_floor`).

    Residuals span many decades, so bands are drawn in log space: mean +- one standard
    deviation of log10, i.e. a geometric mean with a multiplicative band. A value at the
    rounding floor says only "at most the floor": it is censored, entering the mean at the
    floor (so the mean is an upper bound where values are censored), and a group where such
    values are the majority gets no mean at all (NaN: not drawn)."""
    if floor <= 0 and (df[value] <= 0).any():
        raise ValueError("values of 0 need a positive rounding floor to be censored at")
    frame = df.assign(at_floor=df[value] <= floor,
                      log10=np.log10(np.maximum(df[value], floor)))
    summary = frame.groupby(by).agg(mean=("log10", "mean"), std=("log10", "std"),
                                    values=("log10", "size"), at_floor=("at_floor", "sum"))
    summary = summary.assign(count=summary["values"] - summary["at_floor"]).drop(columns="values")
    summary.loc[mostly_at_floor(summary["at_floor"], summary["at_floor"] + summary["count"]),
                ["mean", "std"]] = np.nan
    return summary.reset_index()


def deepest_drawn(summary: pd.DataFrame) -> int:
    """The deepest layer of a `log_summary` that has a mean (is drawn: not mostly at the
    rounding floor), over all its groups; 0 when no layer has one."""
    drawn = summary.dropna(subset=["mean"])["layer"]
    return int(drawn.max()) if len(drawn) else 0


# ----------------------------------------------------------------------------- numbers

# The cubic law r_{l+1} <= c r_l^3 is about small residuals: the growth of the digits lost is
# fitted over the layers that have lost at least this many (r <= 0.1); before, while r is near
# 1, the cubic term is not yet the leading one.
GROWTH_MIN_LOST = 1.0
GROWTH_MIN_RESIDUAL = 10.0 ** -GROWTH_MIN_LOST  # the same, as a residual

# Chapter 1's worked example: four tokens in three dimensions, the last three within a tenth
# of the first in every coordinate, so the residual is small next to the tokens.
EXAMPLE_TOKENS = ((1.0, 2.0, 0.0), (1.1, 2.0, 0.1), (0.9, 2.1, 0.0), (1.0, 1.9, -0.1))
EXAMPLE_DECIMALS = 3  # decimals of the example's residual as its table shows it


def example_tokens() -> torch.Tensor:
    """The worked example's tokens `EXAMPLE_TOKENS`, (4, 3) float64."""
    return torch.tensor(EXAMPLE_TOKENS, dtype=torch.float64)


def example_table(x: torch.Tensor) -> pd.DataFrame:
    """One row per token of `x` (n, d): the token and its residual `res(X)` (rounded)."""
    return pd.DataFrame({"token": range(len(x)), "X": [row.tolist() for row in x],
                         "res(X)": [np.round(row.tolist(), EXAMPLE_DECIMALS)
                                    for row in residual(x)]})


def digits_lost(summary: pd.DataFrame, by: str = "logit_std",
                floor: float = rounding_floor(torch.float64)) -> pd.DataFrame:
    """-log10 of the geometric-mean residual per layer (column `lost`), for layers 1.. whose
    mean lies above the rounding `floor`."""
    rows = summary[(summary["layer"] > 0) & (summary["mean"] > np.log10(floor))]
    return rows.assign(lost=-rows["mean"]).sort_values([by, "layer"])


def layers_above_floor(summary: pd.DataFrame, by: str = "logit_std",
                       floor: float = rounding_floor(torch.float64)) -> int:
    """The most layers (1..) of any group of `by` whose geometric-mean residual lies above
    the rounding `floor` (`digits_lost`): how far float64 can follow the collapse."""
    return int(digits_lost(summary, by, floor).groupby(by)["layer"].count().max())


def precise_collapse(scales, n_tokens: int, d_model: int, depth: int, draws: int, seed: int,
                     digits: int = 1000) -> pd.DataFrame:
    """Pure single-head softmax attention with random weights (`theory.random_head`) at each
    logit scale, computed with `digits` significant digits (`precise.depth_table`), for
    `draws` independent draws of the tokens and the weights: columns logit_std, draw, layer,
    log10_relative (log10 of ||res(X_l)||_2 / ||X_l||_2)."""
    frames = []
    for index, scale in enumerate(scales):
        for draw in range(draws):
            gen = torch.Generator().manual_seed(seed + 7919 * index + 104729 * (draw + 1))
            x = torch.randn(n_tokens, d_model, generator=gen, dtype=torch.float64)
            heads = [random_head(d_model, d_model, scale, gen) for _ in range(depth)]
            table = precise.depth_table(x, heads, digits, normalizations=("softmax",),
                                        n_iter=None)
            frames.append(table[["layer", "log10_relative"]].assign(logit_std=scale, draw=draw))
    return pd.concat(frames, ignore_index=True)


def precise_digits_lost(table: pd.DataFrame, floor_log10: float,
                        by: str = "logit_std") -> pd.DataFrame:
    """Mean digits lost, -log10 r, over the draws per (group, layer) for layers 1.. where every
    draw lies above `floor_log10` (the working precision's rounding floor), with the spread
    over draws (`low`, `high`: smallest and largest)."""
    above = table.assign(ok=table["log10_relative"] > floor_log10, lost=-table["log10_relative"])
    grouped = above[above["layer"] > 0].groupby([by, "layer"])
    summary = grouped.agg(lost=("lost", "mean"), low=("lost", "min"), high=("lost", "max"),
                          ok=("ok", "all"), draws=("lost", "size")).reset_index()
    return summary[summary["ok"]].drop(columns="ok")


def growth_window(digits: pd.DataFrame, min_lost: float = GROWTH_MIN_LOST) -> pd.DataFrame:
    """The rows of `precise_digits_lost` that enter the growth fit: layers whose mean digits
    lost are at least `min_lost` (`GROWTH_MIN_LOST`: residual at most 0.1)."""
    return digits[digits["lost"] >= min_lost]


def growth_factors(digits: pd.DataFrame, by: str = "logit_std") -> pd.Series:
    """Per group: `stats.growth_factor` of the digits lost against the layer, the factor by
    which each layer multiplies them (3 under the cubic law). NaN for a group with fewer than
    two layers above the floor."""
    return digits.groupby(by)[["layer", "lost"]].apply(
        lambda g: growth_factor(g["layer"], g["lost"]))


def fit_points(digits: pd.DataFrame, by: str = "logit_std") -> pd.Series:
    """How many layers enter each group's growth fit."""
    return digits.groupby(by)["lost"].count()


def final_residuals(summary: pd.DataFrame, layer: int, by: str = "label") -> pd.Series:
    """Geometric-mean residual at `layer`, per group of `by`."""
    return 10 ** summary[summary["layer"] == layer].set_index(by)["mean"]


def entropy_summary(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean and standard deviation of the row entropy per group (layer 0 has none)."""
    return df.dropna(subset=["entropy"]).groupby(by)["entropy"].agg(["mean", "std"]).reset_index()


def final_entropies(entropy: pd.DataFrame, layer: int, by: str = "label") -> pd.Series:
    """Mean row entropy (nats) at `layer` per group of `by` (`entropy_summary`)."""
    return entropy[entropy["layer"] == layer].set_index(by)["mean"]


def contrast_configs(low: float, high: float) -> list[dict]:
    """Chapter 1's contrast of rank and entropy collapse: a pure softmax stack at the small
    logit scale `low` against one with skip connections at the large scale `high`."""
    return [dict(normalization="softmax", logit_std=low, label=f"pure, logit scale {low:g}"),
            dict(normalization="softmax", logit_std=high, skip=True,
                 label=f"with skip, logit scale {high:g}")]


def contrast_sentence(entropy_final: pd.Series, residual_final: pd.Series, log_n: float,
                      threshold: float = 1e-2) -> str:
    """Rank against entropy at the last layer, per configuration: its mean row entropy as a
    share of the maximum log n, and whether its residual stays above `threshold`
    (`parts_sentence`; NaN, a layer mostly at the rounding floor, counts as collapsed)."""
    shares = "; ".join(f"*{k}*: {v:.2f} nats ({v / log_n:.0%} of log *n*)"
                       for k, v in entropy_final.items())
    return (f"At the last layer the row entropy is: {shares}. The configurations "
            f"{parts_sentence(residual_final.reindex(entropy_final.index), threshold)}.")


def low_affine_rank_tokens(n_tokens: int, d_model: int, rank: int,
                           generator: torch.Generator) -> torch.Tensor:
    """Tokens `(n, d)` = a common point plus `rank` random directions: affine rank `rank`."""
    g = lambda *s: torch.randn(*s, generator=generator, dtype=torch.float64)  # noqa: E731
    return g(1, d_model) + g(n_tokens, rank) @ g(rank, d_model)


def layernorm_rank_check(n_tokens: int, d_model: int, ranks: list[int], draws: int,
                         seed: int) -> pd.DataFrame:
    """Ranks of random token sets before and after LayerNorm (without the learned scale and
    shift, which act on all tokens alike); one row per (rank, draw).

    affine rank: dimension of the tokens' affine hull (`measures.affine_rank`);
    linear rank: matrix rank of the tokens with each token's feature mean removed (what LN
    does first, before dividing each token by its own standard deviation)."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for k in ranks:
        for draw in range(draws):
            x = low_affine_rank_tokens(n_tokens, d_model, k, gen)
            y = torch.nn.functional.layer_norm(x, (d_model,), eps=0.0)
            centred = x - x.mean(-1, keepdim=True)
            rows.append({"rank_in": k, "draw": draw,
                         "affine_before": int(affine_rank(x)), "affine_after": int(affine_rank(y)),
                         "linear_before": int(torch.linalg.matrix_rank(centred, rtol=1e-9)),
                         "linear_after": int(torch.linalg.matrix_rank(y, rtol=1e-9))})
    return pd.DataFrame(rows)


def layernorm_summary(check: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The range (min–max over draws) of each rank per built-in rank, and how many draws
    changed their affine rank and their linear rank under LayerNorm."""
    columns = {"affine_before": "affine rank before", "affine_after": "affine rank after",
               "linear_before": "linear rank before", "linear_after": "linear rank after"}
    table = check.groupby("rank_in")[list(columns)].agg(lambda s: f"{s.min()}–{s.max()}")
    table = table.rename(columns=columns)
    counts = {"affine_changed": int((check.affine_after != check.affine_before).sum()),
              "linear_changed": int((check.linear_after != check.linear_before).sum()),
              "total": len(check)}
    return table.rename_axis("affine rank k built in"), counts


def parts_sentence(final: pd.Series, threshold: float = 1e-2) -> str:
    """Which configurations keep the tokens apart: a final residual above `threshold`, with
    each value (NaN, a layer mostly at the rounding floor, counts as collapsed)."""
    def named(keys) -> str:
        return ", ".join(f"*{k}* ({final[k]:.2g})" if np.isfinite(final[k])
                         else f"*{k}* (at the rounding floor)" for k in keys) or "none"
    kept = [k for k, v in final.items() if v > threshold]
    lost = [k for k, v in final.items() if not v > threshold]
    return (f"keeping a residual above {threshold:g} after the last layer: {named(kept)}; "
            f"collapsing below it: {named(lost)}")


def layernorm_sentence(counts: dict[str, int]) -> str:
    """The verdict on "LayerNorm is affine-rank-neutral" from `layernorm_summary`'s counts,
    and what happened to the linear rank of the centred tokens."""
    changed, total, linear = counts["affine_changed"], counts["total"], counts["linear_changed"]
    verdict = (f"**The statement holds in all {total} draws**: the affine rank never changed."
               if changed == 0 else
               f"**The statement, as we read it, does not hold**: in {changed} of {total} "
               f"draws the affine rank changed.")
    kept = ("in every draw" if linear == 0
            else f"in {total - linear} of {total} draws ({linear} changed)")
    return f"{verdict} The linear rank of the centred tokens was kept {kept}."


def claims(pure_final: pd.Series, skip_final: float, growth: pd.Series,
           points: int | None = None, digits: int | None = None,
           floor: float = rounding_floor(torch.float64)) -> list[Claim]:
    """C1 on this run (`registry`): pure attention drives the last layer's residual below
    `registry.COLLAPSED` at every logit scale. A last layer mostly at the rounding floor (NaN
    in `pure_final`) counts as collapsed and is censored: at most the `floor`. The number is
    the largest last-layer residual over the logit scales (censored only if all are at the
    floor); the finding adds the factor by which each layer multiplies the lost digits and
    where a skip connection leaves the residual."""
    holds = bool(((pure_final < COLLAPSED) | pure_final.isna()).all())
    measured = pure_final.dropna()
    number, bound = (float(measured.max()), "") if len(measured) else (floor, "≤")
    worst = (f"at the rounding floor (at most {significant(floor, 2)})" if bound
             else f"at most {significant(number, 2)}")
    result = check_result("random pure attention", "every logit scale", number, holds, bound)
    return [Claim.of(
        "C1", [result],
        f"Pure attention with random weights ends, at every logit scale, with a residual "
        f"{worst} at the last layer (check: below {significant(COLLAPSED)}); each layer multiplies the "
        f"number of lost digits by {growth.min():.1f}–{growth.max():.1f}"
        + (f" (fit over at least {points} layers, {digits} significant digits)"
           if points and digits else "") + ". With a skip "
        f"connection the residual ends at {skip_final:.2f}.", figure="fig-pure-collapse")]
