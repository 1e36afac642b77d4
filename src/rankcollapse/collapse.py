"""Rank collapse in random-weight attention stacks: residual and entropy layer by layer.

The experiments of chapters 1-3: build a stack with chosen parts switched on, feed random
token matrices, record the relative residual of every hidden state and the row entropy of
every attention matrix, and return them as a tidy table (one row per layer and input).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .models import Encoder, EncoderConfig, Switches, init_random_
from .rank import affine_rank, relative_residual


def row_entropy(attn: torch.Tensor) -> torch.Tensor:
    """Mean over rows of -sum_j p_ij log p_ij (nats), per matrix: `(..., n, n)` -> `(...)`.
    Between 0 (every row one-hot) and log n (uniform rows)."""
    p = attn.clamp_min(0)
    return -(p * torch.log(p.clamp_min(1e-30))).sum(-1).mean(-1)


def random_tokens(n_samples: int, n_tokens: int, d_model: int, generator: torch.Generator,
                  device: torch.device) -> torch.Tensor:
    """`n_samples` token matrices `(n_tokens, d_model)` with i.i.d. N(0, 1) entries."""
    return torch.randn(n_samples, n_tokens, d_model, generator=generator).to(device)


def random_stack(d_model: int, n_heads: int, depth: int, normalization: str,
                 logit_std: float, switches: Switches, seed: int, n_iter: int = 50,
                 device: torch.device | str = "cpu") -> Encoder:
    """An `Encoder` with Gaussian weights (see `models.init_random_`) and the given switches."""
    cfg = EncoderConfig(d_model=d_model, n_heads=n_heads, depth=depth, d_ff=2 * d_model,
                        normalization=normalization, n_iter=n_iter, switches=switches)
    encoder = init_random_(Encoder(cfg), logit_std, torch.Generator().manual_seed(seed))
    return encoder.to(device).eval()


@torch.no_grad()
def depth_profile(encoder: Encoder, x: torch.Tensor, norm: str = "composite") -> pd.DataFrame:
    """Relative residual of each hidden state (layer 0 = input) and the mean row entropy of
    each layer's attention (NaN at layer 0), one row per (layer, input sample)."""
    out = encoder(x, record=True)
    residual = relative_residual(out.hidden.double(), norm).cpu().numpy()  # (L+1, B)
    entropy = row_entropy(out.attention.double()).mean(-1).cpu().numpy()  # (L, B)
    entropy = np.concatenate([np.full((1, x.shape[0]), np.nan), entropy])
    layers, samples = np.meshgrid(np.arange(residual.shape[0]), np.arange(x.shape[0]),
                                  indexing="ij")
    return pd.DataFrame({"layer": layers.ravel(), "sample": samples.ravel(),
                         "residual": residual.ravel(), "entropy": entropy.ravel()})


def sweep(configs: list[dict], n_samples: int, n_tokens: int, d_model: int, n_heads: int,
          depth: int, n_iter: int, seed: int, device: torch.device, norm: str = "composite",
          dtype: torch.dtype = torch.float32, weight_draws: int = 1) -> pd.DataFrame:
    """`depth_profile` for each config (keys: normalization, logit_std, and optionally skip,
    ffn, layernorm, label), all on the same random inputs; config keys become columns.

    Configs that differ only in normalization (or label) get the same weights, so softmax and
    Sinkhorn are compared on identical networks; each config is run with `weight_draws`
    independent weight draws (column `draw`). float64 lets the residual fall to ~1e-16
    before rounding stops it; float32 to ~1e-7."""
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


def log_summary(df: pd.DataFrame, by: list[str], value: str = "residual") -> pd.DataFrame:
    """Mean and standard deviation of log10(value) per group, plus the sample count.

    Residuals span many decades, so bands are drawn in log space: mean +- one standard
    deviation of log10, i.e. a geometric mean with a multiplicative band."""
    logs = df.assign(log10=np.log10(df[value].clip(lower=1e-300)))
    return logs.groupby(by)["log10"].agg(["mean", "std", "count"]).reset_index()


def low_affine_rank_tokens(n_tokens: int, d_model: int, rank: int,
                           generator: torch.Generator) -> torch.Tensor:
    """Tokens `(n, d)` = a common point plus `rank` random directions: affine rank `rank`."""
    g = lambda *s: torch.randn(*s, generator=generator, dtype=torch.float64)  # noqa: E731
    return g(1, d_model) + g(n_tokens, rank) @ g(rank, d_model)


def layernorm_rank_check(n_tokens: int, d_model: int, ranks: list[int], draws: int,
                         seed: int) -> pd.DataFrame:
    """Ranks of random token sets before and after LayerNorm (without the learned scale and
    shift, which act on all tokens alike); one row per (rank, draw).

    affine rank: dimension of the tokens' affine hull (`rank.affine_rank`);
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
