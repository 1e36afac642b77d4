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

from ..measures import affine_rank, layer_table, relative_residual, rounding_floor, row_entropy
from ..models import Encoder, Switches, random_stack
from ..stats import Claim, check_verdict


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
    """Mean and standard deviation of log10(value) per group, the number of values used
    (`count`) and the number left out at or below `floor` (`at_floor`).

    Residuals span many decades, so bands are drawn in log space: mean +- one standard
    deviation of log10, i.e. a geometric mean with a multiplicative band. Values at the
    rounding floor say only "zero to machine precision": they are left out of the mean, and a
    group where they are the majority gets no mean at all (NaN: not drawn)."""
    frame = df.assign(at_floor=df[value] <= floor,
                      log10=np.log10(df[value].where(df[value] > floor)))
    summary = frame.groupby(by).agg(mean=("log10", "mean"), std=("log10", "std"),
                                    count=("log10", "count"), at_floor=("at_floor", "sum"))
    summary.loc[summary["at_floor"] > summary["count"], ["mean", "std"]] = np.nan
    return summary.reset_index()


# ----------------------------------------------------------------------------- numbers


def digits_lost(summary: pd.DataFrame, by: str = "logit_std",
                floor: float = rounding_floor(torch.float64)) -> pd.DataFrame:
    """-log10 of the geometric-mean residual per layer (column `lost`), for layers 1.. whose
    mean lies above the rounding `floor`."""
    rows = summary[(summary["layer"] > 0) & (summary["mean"] > np.log10(floor))]
    return rows.assign(lost=-rows["mean"]).sort_values([by, "layer"])


def growth_factors(digits: pd.DataFrame, by: str = "logit_std") -> pd.Series:
    """Per group: the geometric mean of lost[l+1] / lost[l] over consecutive layers, the
    factor by which each layer multiplies the number of lost digits (3 under the cubic law).
    NaN for a group with fewer than two layers above the floor."""
    def factor(lost: pd.Series) -> float:
        values = lost.to_numpy()
        return float(np.exp(np.mean(np.diff(np.log(values))))) if len(values) > 1 else np.nan
    return digits.groupby(by)["lost"].apply(factor)


def final_residuals(summary: pd.DataFrame, layer: int, by: str = "label") -> pd.Series:
    """Geometric-mean residual at `layer`, per group of `by`."""
    return 10 ** summary[summary["layer"] == layer].set_index(by)["mean"]


def entropy_summary(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean and standard deviation of the row entropy per group (layer 0 has none)."""
    return df.dropna(subset=["entropy"]).groupby(by)["entropy"].agg(["mean", "std"]).reset_index()


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
           collapsed: float = 1e-8) -> list[Claim]:
    """C1 on this run: pure attention drives the residual below `collapsed` at every logit
    scale (NaN: a last layer mostly at the rounding floor, which counts as collapsed), with
    the factor by which each layer multiplies the lost digits, and where a skip connection
    leaves it."""
    holds = bool(((pure_final < collapsed) | pure_final.isna()).all())
    worst = ("at the rounding floor" if pure_final.isna().all()
             else f"at most {pure_final.max():.1e}")
    return [Claim(
        "C1", "repeated attention mixing drives all tokens to one vector (rank collapse)",
        check_verdict(holds),
        f"Pure attention with random weights ends, at every logit scale, with a residual "
        f"{worst} at the last layer (check: below {collapsed:g}); each layer multiplies the "
        f"number of lost digits by {growth.min():.1f}–{growth.max():.1f}. With a skip "
        f"connection the residual ends at {skip_final:.2f}.")]
