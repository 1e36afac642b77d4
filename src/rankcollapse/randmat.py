"""The random-matrix control of the paper, and the variants that test its hypothesis.

The paper multiplies random softmax- or Sinkhorn-normalized matrices along paths through the
layers and finds no Sinkhorn advantage. Its hypothesis: in a real network the attention
matrices along a path are correlated, because each layer's input is the previous layer's
output. Here: independent logits (the control), correlated logits
`A_{l+1} = rho A_l + sqrt(1 - rho^2) G_l`, and attention computed by a random-weight network.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from .attention import normalize
from .rank import path_products, relative_residual, sample_paths


def random_logits(n_layers: int, batch: int, n_heads: int, n: int, scale: float,
                  rho: float, generator: torch.Generator) -> torch.Tensor:
    """Gaussian logits `(layers, batch, heads, n, n)` with entries N(0, scale^2) at every
    layer and correlation `rho` between consecutive layers (rho = 0: independent)."""
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"rho must be in [0, 1); got {rho}")
    g = torch.randn(n_layers, batch, n_heads, n, n, generator=generator, dtype=torch.float64)
    layers = [g[0]]
    for noise in g[1:]:
        layers.append(rho * layers[-1] + math.sqrt(1 - rho**2) * noise)
    return torch.stack(layers) * scale


def with_identity_layers(attn: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Replace a random half of the layers' attention matrices by the identity, as the paper
    does to mimic skip connections. attn `(layers, batch, heads, n, n)`."""
    n_layers, n = attn.shape[0], attn.shape[-1]
    chosen = torch.randperm(n_layers, generator=generator)[: n_layers // 2]
    out = attn.clone()
    out[chosen] = torch.eye(n, dtype=attn.dtype, device=attn.device)
    return out


def path_residuals(attn: torch.Tensor, depths, n_paths: int, generator: torch.Generator,
                   norm: str = "composite", order: str = "layer") -> pd.DataFrame:
    """Relative residual of path products (in `order`, see `rank.path_products`) against
    their best rank-1 approximation, for `n_paths` random paths at each depth.
    attn `(layers, batch, heads, n, n)`."""
    n_layers, batch, n_heads = attn.shape[:3]
    frames = []
    for depth in depths:
        paths = sample_paths(n_layers, n_heads, depth, n_paths, batch, generator)
        res = relative_residual(path_products(attn, paths, order).double(), norm, kind="rank1")
        frames.append(pd.DataFrame({"depth": depth, "path": np.arange(n_paths),
                                    "residual": res.cpu().numpy()}))
    return pd.concat(frames, ignore_index=True)


def compare_attention(attn: dict[str, dict[str, torch.Tensor]], depths, n_paths: int,
                      seed: int, order: str = "layer") -> pd.DataFrame:
    """`path_residuals` for every setting -> {normalization -> attention}, with the same
    sampled paths everywhere (one generator seed), so comparisons are paired."""
    return pd.concat([path_residuals(a, depths, n_paths, torch.Generator().manual_seed(seed),
                                     order=order)
                      .assign(normalization=name, setting=setting)
                      for setting, by_name in attn.items() for name, a in by_name.items()],
                     ignore_index=True)


def compare_paths(logits_by_setting: dict[str, torch.Tensor], depths, n_paths: int, seed: int,
                  n_iter: int = 50, identity_seed: int | None = None,
                  order: str = "layer") -> pd.DataFrame:
    """`compare_attention` for softmax and Sinkhorn built from the same logits. With
    `identity_seed`, the same random half of the layers is replaced by the identity after
    normalization (the identity is not the normalization of any finite logits)."""
    def build(logits, name):
        a = normalize(logits, name, n_iter)
        if identity_seed is None:
            return a
        return with_identity_layers(a, torch.Generator().manual_seed(identity_seed))

    attn = {setting: {name: build(logits, name) for name in ("softmax", "sinkhorn")}
            for setting, logits in logits_by_setting.items()}
    return compare_attention(attn, depths, n_paths, seed, order)


def median_ratio_ci(a: np.ndarray, b: np.ndarray, n_boot: int, seed: int,
                    level: float = 0.95, paired: bool = False) -> tuple[float, float, float]:
    """median(a) / median(b) with a percentile bootstrap interval. `paired`: a[i] and b[i]
    belong together (same path), so both are resampled with the same indices. NaN when the
    median of b is zero (both products rank one to machine precision, say)."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(a, float), np.asarray(b, float)
    if paired and len(a) != len(b):
        raise ValueError(f"paired samples need equal lengths; got {len(a)} and {len(b)}")
    ia = rng.integers(0, len(a), (n_boot, len(a)))
    ib = ia if paired else rng.integers(0, len(b), (n_boot, len(b)))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.median(a) / np.median(b)
        boot = np.median(a[ia], axis=1) / np.median(b[ib], axis=1)
    if not np.isfinite(ratio):
        return float("nan"), float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    return float(ratio), *np.percentile(boot, [tail, 100 - tail])


def sinkhorn_advantage(table: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per setting and depth: median Sinkhorn residual / median softmax residual with a 95%
    bootstrap interval, resampling paths in pairs (both normalizations are measured on the
    same paths). Above 1: Sinkhorn keeps more rank; an interval containing 1: parity."""
    rows = []
    for (setting, depth), g in table.groupby(["setting", "depth"]):
        by_path = g.pivot(index="path", columns="normalization", values="residual")
        ratio, lo, hi = median_ratio_ci(by_path["sinkhorn"], by_path["softmax"], n_boot, seed,
                                        paired=True)
        rows.append({"setting": setting, "depth": depth, "ratio": ratio, "low": lo, "high": hi})
    return pd.DataFrame(rows)


def _ranges(depths: list[int]) -> str:
    """[1, 2, 3, 7] -> 'depths 1-3, 7'; [4] -> 'depth 4'."""
    parts, start = [], None
    for i, d in enumerate(depths):
        start = d if start is None else start
        if i + 1 == len(depths) or depths[i + 1] != d + 1:
            parts.append(f"{start}" if start == d else f"{start}–{d}")
            start = None
    return ("depth " if len(depths) == 1 else "depths ") + ", ".join(parts)


def verdict(adv: pd.DataFrame) -> str:
    """One factual sentence per `sinkhorn_advantage` table of one setting: at which depths
    the interval lies above 1, below 1, or contains 1."""
    above = adv.loc[adv["low"] > 1, "depth"].tolist()
    below = adv.loc[adv["high"] < 1, "depth"].tolist()
    parity = adv.loc[(adv["low"] <= 1) & (adv["high"] >= 1), "depth"].tolist()
    undefined = adv.loc[adv["ratio"].isna(), "depth"].tolist()
    parts = [f"Sinkhorn keeps more rank at {_ranges(above)}" if above else
             "Sinkhorn keeps more rank at no depth",
             f"less at {_ranges(below)}" if below else "less at no depth",
             f"parity at {_ranges(parity)}" if parity else "parity at no depth"]
    if undefined:
        parts.append(f"no ratio at {_ranges(undefined)} (softmax products exactly rank one)")
    return "; ".join(parts) + "."
