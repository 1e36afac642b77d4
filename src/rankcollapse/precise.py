"""Pure attention stacks in arbitrary precision (mpmath), to follow the residual far below
the float64 rounding floor.

Rank collapse is doubly exponential: each layer roughly triples the number of digits the
residual loses, so float64 (about 16 digits) runs out after two or three layers. With `digits`
significant digits the same computation stays exact for about log3(digits) more layers. The
inputs and weights are the float64 ones; only the arithmetic is more precise. Every operation
runs in Python, so this is for small cases only (n about 8 tokens, a handful of layers).
"""

from __future__ import annotations

import math

import mpmath
import pandas as pd
import torch

from .measures import residual
from .normalizations import NORMALIZATIONS
from .theory import HeadWeights, depth_bound_log

# The digits a computation with `digits` significant digits loses to its own rounding over a
# stack's few dozen operations: what it resolves goes down to about 10^-(digits - GUARD_DIGITS).
GUARD_DIGITS = 20


def floor_log10(digits: int) -> float:
    """log10 of the smallest residual a `digits`-digit stack resolves (`depth_table`): values
    below are its rounding, as values below about 1e-16 are float64's."""
    return -(digits - GUARD_DIGITS)


def _context(digits: int):
    mp = mpmath.mp.clone()
    mp.dps = digits
    return mp


def _matrix(tensor: torch.Tensor, mp):
    """`tensor` as an mpmath matrix of the context `mp`."""
    return mp.matrix(tensor.double().tolist())


def _normalize(logits, normalization: str, n_iter: int, mp):
    """Softmax of each row, or `n_iter` full Sinkhorn iterations (rows then columns), of an
    mpmath matrix, at the working precision."""
    n = logits.rows
    top = max(logits[i, j] for i in range(n) for j in range(n))
    k = mp.matrix([[mp.exp(logits[i, j] - top) for j in range(n)] for i in range(n)])
    for _ in range(1 if normalization == "softmax" else n_iter):
        for i in range(n):  # rows
            total = mp.fsum(k[i, j] for j in range(n))
            for j in range(n):
                k[i, j] /= total
        if normalization == "softmax":
            break
        for j in range(n):  # columns
            total = mp.fsum(k[i, j] for i in range(n))
            for i in range(n):
                k[i, j] /= total
    return k


def _log10(value, mp) -> float:
    return float(mp.log10(value)) if value > 0 else -math.inf


def depth_table(x: torch.Tensor, heads: list[HeadWeights], digits: int = 400,
                normalizations=NORMALIZATIONS, *, n_iter: int | None) -> pd.DataFrame:
    """A pure attention stack (one head per layer, no skip, FFN or LayerNorm) computed with
    `digits` significant digits: one row per (normalization, layer) with log10 of the spectral
    norm of the residual (`log10_residual`), of the residual relative to the spectral norm of
    the layer (`log10_relative`), and of the first-order L-layer bound (`log10_bound`).
    Values below 10^`floor_log10(digits)` are rounding at this precision. `n_iter`: full
    Sinkhorn iterations; None only where `normalizations` leave Sinkhorn out."""
    if n_iter is None and "sinkhorn" in normalizations:
        raise ValueError("a Sinkhorn stack needs its iteration count: pass n_iter")
    if digits < GUARD_DIGITS:
        raise ValueError(f"digits must be at least {GUARD_DIGITS} (float64 has 16), got {digits}")
    mp = _context(digits)
    n = x.shape[-2]
    r0 = float(torch.linalg.matrix_norm(residual(x.double()), 2))
    bound = depth_bound_log(math.log(r0), [h.constant(n) for h in heads]) / math.log(10)
    centre = mp.eye(n) - mp.matrix([[mp.mpf(1) / n] * n for _ in range(n)])
    weights = [(_matrix(h.w_q, mp), _matrix(h.w_k, mp), _matrix(h.w_v, mp), h.d_qk)
               for h in heads]
    rows = []
    for name in normalizations:
        h = _matrix(x, mp)
        for layer in range(len(heads) + 1):
            if layer:
                w_q, w_k, w_v, d_qk = weights[layer - 1]
                logits = (h * w_q) * (h * w_k).T / mp.sqrt(d_qk)
                h = _normalize(logits, name, n_iter, mp) * h * w_v
            norm = max(mp.svd_r(centre * h, compute_uv=False))
            whole = max(mp.svd_r(h, compute_uv=False))
            rows.append({"normalization": name, "layer": layer,
                         "log10_residual": _log10(norm, mp),
                         "log10_relative": _log10(norm / whole, mp) if whole > 0 else -math.inf,
                         "log10_bound": float(bound[layer])})
    return pd.DataFrame(rows)


def stack_table(x0: torch.Tensor, z: torch.Tensor, starts, heads: list[HeadWeights],
                digits: int = 400, normalizations=NORMALIZATIONS,
                *, n_iter: int) -> pd.DataFrame:
    """`depth_table` for inputs x0 + s z, one block of rows per start size s (column start)."""
    return pd.concat([depth_table(x0 + s * z, heads, digits, normalizations, n_iter=n_iter)
                      .assign(start=s) for s in starts], ignore_index=True)
