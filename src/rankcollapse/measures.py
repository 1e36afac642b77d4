"""Rank-collapse measures: norms, residuals, entropy, and products of attention along paths.

Token representations are `(..., n, d)`: tokens on rows. The residual removes what all tokens
share; its size relative to the matrix says how far the tokens are from all being equal
(Dong, Cordonnier and Loukas 2021). The row entropy measures a different failure, entropy
collapse (peaked attention rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .masks import check_mask

NORMS = ("composite", "fro", "spectral")
RESIDUALS = ("mean", "rank1")


def composite_norm(m: torch.Tensor) -> torch.Tensor:
    """sqrt(||M||_1 ||M||_inf) over the last two dims: max column abs sum times max row abs sum."""
    _check_matrix(m, "composite")
    a = m.abs()
    return torch.sqrt(a.sum(-2).amax(-1) * a.sum(-1).amax(-1))


def matrix_norm(m: torch.Tensor, norm: str = "composite") -> torch.Tensor:
    """'composite' (Dong et al.'s l1,inf), 'fro' (Frobenius) or 'spectral' (largest singular value)."""
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}; valid: {', '.join(NORMS)}")
    if norm == "composite":
        return composite_norm(m)
    _check_matrix(m, norm)
    return torch.linalg.matrix_norm(m, ord="fro" if norm == "fro" else 2)


def _check_matrix(m: torch.Tensor, norm: str) -> None:
    if m.dim() < 2:
        raise ValueError(f"the {norm} norm needs a matrix (..., rows, cols); got shape "
                         f"{tuple(m.shape)}. A vector v is the matrix v[None] (one row) or "
                         f"v[:, None] (one column)")


def residual(x: torch.Tensor, kind: str = "mean", mask: torch.Tensor | None = None
             ) -> torch.Tensor:
    """What is left of `x (..., n, d)` after removing the component shared by all tokens.

    'mean' : X - 1 mean(X)^T (the token mean, as in prior plotting code).
    'rank1': X minus its best rank-1 approximation (truncated SVD).
    mask `(..., n)`, True = real token: padded tokens are ignored (their rows are zero).
    """
    if x.dim() < 2:
        raise ValueError(f"residual needs a matrix (..., n, d); got shape {tuple(x.shape)}")
    if kind not in RESIDUALS:
        raise ValueError(f"unknown residual kind {kind!r}; valid: {', '.join(RESIDUALS)}")
    if mask is not None:
        check_mask(mask, x.shape[:-2], x.shape[-2], check_values=False, of=f"x {tuple(x.shape)}")
    weight = None if mask is None else mask.unsqueeze(-1).to(x.dtype)
    if weight is not None:
        x = x * weight
    if kind == "mean":
        if weight is None:
            return x - x.mean(dim=-2, keepdim=True)
        return (x - x.sum(-2, keepdim=True) / weight.sum(-2, keepdim=True)) * weight
    u, s, vh = torch.linalg.svd(x, full_matrices=False)  # zero rows stay zero
    return x - s[..., :1, None] * u[..., :, :1] @ vh[..., :1, :]


def rounding_floor(dtype: torch.dtype, factor: float = 10.0) -> float:
    """The relative residual below which a value is rounding noise, not collapse: `factor`
    times the machine epsilon of `dtype` (float64: 2.2e-15, float32: 1.2e-6). Averages of
    log residuals leave out values at or below it, and say so."""
    return factor * torch.finfo(dtype).eps


FLOOR = rounding_floor(torch.float64)  # the floor of every analysis that runs in float64


def relative_residual(x: torch.Tensor, norm: str = "composite", kind: str = "mean",
                      mask: torch.Tensor | None = None) -> torch.Tensor:
    """||res(X)|| / ||X|| per matrix, shape `(...)`. Zero matrices give NaN, not a silent 0.
    With `mask`, both norms are over the real tokens only."""
    res = residual(x, kind, mask)  # checks the mask first
    real = x if mask is None else x * mask.unsqueeze(-1).to(x.dtype)
    return matrix_norm(res, norm) / matrix_norm(real, norm)


# ----------------------------------------------------------------------------- paths


@dataclass(frozen=True)
class Paths:
    """Sampled paths through the layers: `layers`, `heads` `(n_paths, depth)`; `samples`
    `(n_paths,)` (one input per path) or `(n_paths, depth)` (an input per factor)."""

    layers: torch.Tensor
    heads: torch.Tensor
    samples: torch.Tensor


def sample_paths(n_layers: int, n_heads: int, depth: int, n_paths: int, batch_size: int,
                 generator: torch.Generator | None = None) -> Paths:
    """`n_paths` paths of `depth` distinct layers in increasing order, one random head per
    chosen layer and one random batch sample per path; reproducible from `generator`."""
    if not 1 <= depth <= n_layers:
        raise ValueError(f"path depth must be in 1..n_layers={n_layers}; got {depth}")
    if n_paths < 1 or n_heads < 1 or batch_size < 1:
        raise ValueError(f"n_paths, n_heads and batch_size must be >= 1; "
                         f"got {n_paths}, {n_heads}, {batch_size}")
    keys = torch.rand(n_paths, n_layers, generator=generator)
    layers = keys.argsort(dim=-1)[:, :depth].sort(dim=-1).values
    heads = torch.randint(n_heads, (n_paths, depth), generator=generator)
    samples = torch.randint(batch_size, (n_paths,), generator=generator)
    return Paths(layers, heads, samples)


def path_products(attn: torch.Tensor, paths: Paths, order: str = "layer") -> torch.Tensor:
    """Products along each path. attn `(layers, batch, heads, n, n)` -> `(n_paths, n, n)`.

    order "layer": `A[l1, h1] A[l2, h2] ... A[lk, hk]`, earlier layers on the left, as in
    prior code; "signal": `A[lk, hk] ... A[l1, h1]`, the order in which the layers act on the
    tokens (X_l = A_l X_{l-1}).
    """
    if order not in ("layer", "signal"):
        raise ValueError(f"unknown order {order!r}; valid: layer, signal")
    if attn.dim() != 5 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"attn must have shape (layers, batch, heads, n, n); "
                         f"got {tuple(attn.shape)}")
    _check_paths(paths, attn.shape)
    dev = attn.device
    layers, heads = paths.layers.to(dev), paths.heads.to(dev)
    samples = paths.samples.to(dev)
    samples = samples if samples.dim() == 2 else samples[:, None].expand_as(layers)
    factors = attn[layers, samples, heads]  # (n_paths, depth, n, n)
    product = factors[:, 0]
    for k in range(1, factors.shape[1]):
        product = product @ factors[:, k] if order == "layer" else factors[:, k] @ product
    return product


def _check_paths(paths: Paths, shape: torch.Size) -> None:
    """ValueError unless every index of `paths` falls inside attn of `shape` (layers, batch,
    heads, n, n), naming the first that does not and the call that samples fitting paths.
    One host sync per index tensor when `paths` live on an accelerator (`sample_paths`
    makes them on the CPU)."""
    n_layers, batch, n_heads = shape[:3]
    if paths.heads.shape != paths.layers.shape or paths.samples.shape not in (
            paths.layers.shape[:1], paths.layers.shape):
        raise ValueError(f"paths.layers {tuple(paths.layers.shape)}, paths.heads "
                         f"{tuple(paths.heads.shape)} and paths.samples "
                         f"{tuple(paths.samples.shape)} do not fit together: expected "
                         f"(n_paths, depth) twice and (n_paths,) or (n_paths, depth)")
    for field, what, size in (("layers", "layer", n_layers), ("samples", "sample", batch),
                              ("heads", "head", n_heads)):
        index = getattr(paths, field)
        low, high = (int(index.min()), int(index.max())) if index.numel() else (0, 0)
        if low < 0 or high >= size:
            bad = high if high >= size else low
            counted = f"a batch of {size}" if field == "samples" else f"{size} {field}"
            raise ValueError(f"paths.{field} holds {what} {bad}, but attn has {counted} "
                             f"(attn shape {tuple(shape)}). Sample paths for this attn: "
                             f"sample_paths(n_layers={n_layers}, n_heads={n_heads}, depth, "
                             f"n_paths, batch_size={batch})")


def affine_rank(x: torch.Tensor, rtol: float = 1e-9) -> torch.Tensor:
    """Dimension of the affine hull of the tokens (rows of `x (..., n, d)`): the number of
    singular values of the mean residual above `rtol` times the largest singular value of x."""
    s = torch.linalg.svdvals(residual(x, "mean"))
    scale = torch.linalg.svdvals(x)[..., :1]
    return (s > rtol * scale).sum(-1)


def row_entropy(attn: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over rows of -sum_j p_ij log p_ij (nats), per matrix: `(..., n, n)` -> `(...)`.
    Between 0 (every row one-hot) and log n (uniform rows). With `mask` `(..., n)`, the mean
    is over the rows of real tokens only."""
    if mask is not None:
        check_mask(mask, attn.shape[:-2], attn.shape[-2], check_values=False,
                   of=f"attn {tuple(attn.shape)}")
    p = attn.clamp_min(0)
    rows = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
    if mask is None:
        return rows.mean(-1)
    real = mask.to(rows.dtype)
    return (rows * real).sum(-1) / real.sum(-1)


def layer_table(values, value: str = "residual") -> pd.DataFrame:
    """A `(layers, samples)` array as a long table: one row per (layer, sample)."""
    values = np.asarray(values)
    layers, samples = np.meshgrid(np.arange(values.shape[0]), np.arange(values.shape[1]),
                                  indexing="ij")
    return pd.DataFrame({"layer": layers.ravel(), "sample": samples.ravel(),
                         value: values.ravel()})
