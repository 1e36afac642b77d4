"""Attention normalizations: softmax (row-stochastic) and Sinkhorn (doubly stochastic).

Shapes: logits are `(..., n, n)` with queries on rows and keys on columns; a key-padding
mask is `(..., n)` with True for real tokens (see `masks`).

Definition. Sinkhorn's algorithm alternately normalizes the rows and the columns of
`K = exp(logits)`; `sinkhorn_reference` below is that definition, written as plainly as
possible. `sinkhorn` computes the same matrix with a faster engine (`_sinkhorn_engine`):
matrices stop once converged to rounding level (within 1e-6 of running every iteration, in
float32), converged ones get the implicit gradient of the fixed point (unless its linear
system is ill-conditioned, as for plans that are permutations), the others the exact gradient
of every iteration; the backward pass keeps the logits and the result.

Convention. One *full iteration* (`n_iter`) is a row normalization followed by a column
normalization, so the matrix returned after `n_iter` full iterations is exactly
column-stochastic and its rows carry the remaining error. Prior code (Sinkformers, Sander et
al. 2022) counts *half-steps* (`n_it`), starting with rows; `half_steps=1` is exactly softmax,
and `half_steps=2 * n_iter` equals `n_iter` full iterations. Rows come first so that the first
half-step is the familiar softmax; ending on a column step is then what "full iterations" means.
"""

from __future__ import annotations

import numbers

import torch

from ._sinkhorn_engine import SinkhornFunction
from .masks import check_mask, log_normalize, pair_mask

NORMALIZATIONS = ("softmax", "sinkhorn")
MAX_HALF_STEPS = 20_000  # 10,000 full iterations: far beyond convergence, and still bounded


# ----------------------------------------------------------------------------- definitions


def sinkhorn_reference(logits: torch.Tensor, n_iter: int = 50,
                       mask: torch.Tensor | None = None) -> torch.Tensor:
    """The definition: `n_iter` times, normalize the rows of exp(logits), then the columns.

    Computed in the log domain (alternate `logsumexp` over rows and columns), autograd keeps
    every iterate. Slow; the tests and the benchmark compare `sinkhorn` against it."""
    x = logits if mask is None else logits.masked_fill(~pair_mask(mask), float("-inf"))
    for _ in range(n_iter):
        x = log_normalize(log_normalize(x, -1, mask), -2, mask)
    return x.exp()


def softmax(logits: torch.Tensor, mask: torch.Tensor | None = None, *,
            check_finite: bool = True) -> torch.Tensor:
    """Row-stochastic attention: softmax over keys (last dim).

    logits `(..., n, n)`; mask `(..., n)` (True = real token): masked keys get zero weight.
    Rows of padded queries are uniform over the real keys (their logits are ignored).
    A sample with no real token (refused unless `check_finite=False`) gives a zero matrix.
    """
    _check_logits(logits, mask, check_finite)
    x = logits.to(_compute_dtype(logits))
    if mask is None:
        return torch.softmax(x, dim=-1).to(logits.dtype)
    # padded queries: zeros first, so that inf/-inf there cannot give NaN
    x = x.masked_fill(~mask.unsqueeze(-1), 0.0).masked_fill(~mask.unsqueeze(-2), float("-inf"))
    empty = ~mask.any(-1)[..., None, None]  # no real key at all: the rows would be 0/0
    return torch.softmax(x, dim=-1).masked_fill(empty, 0.0).to(logits.dtype)


def sinkhorn(logits: torch.Tensor, n_iter: int = 50, mask: torch.Tensor | None = None, *,
             half_steps: int | None = None, check_finite: bool = True,
             early_stop: bool = True) -> torch.Tensor:
    """Doubly stochastic attention by Sinkhorn's algorithm (uniform marginals, temperature 1).

    logits `(..., n, n)`, any leading dims, CPU or CUDA, float32/float64 (half precision is
    computed in float32 and returned in the input dtype).
    n_iter: full iterations, each a row then a column normalization (default 50, the paper's);
    a positive integer, at most `MAX_HALF_STEPS` / 2.
    half_steps: Sinkformers' `n_it` convention instead of `n_iter` (row first; 1 == softmax),
    at most `MAX_HALF_STEPS`.
    mask `(..., n)`, True = real token: only the real sub-block is balanced; padded rows and
    columns of the output are zero.
    check_finite: raise ValueError on NaN/inf logits and on a mask without any real token in a
    sample (each costs a host sync; turn off in hot loops). Unchecked, a sample with no real
    token gives a zero matrix and a zero gradient, with or without `early_stop`.
    early_stop: a matrix whose marginal error has reached its dtype's rounding level stops
    iterating (its result then differs from running every iteration by rounding noise; the
    benchmark reports the largest difference) and gets the implicit gradient of the fixed
    point, or where that is ill-conditioned (sharp logits: plans that are, or nearly are,
    permutations) the exact gradient of its iterations; `early_stop=False` runs every
    iteration and differentiates each of them. Matrices that do not converge always run every
    iteration, with the exact gradient of each.

    >>> p = sinkhorn(torch.tensor([[0.0, 1.0], [2.0, 0.0]]), n_iter=50)
    >>> torch.allclose(p.sum(0), torch.ones(2)) and torch.allclose(p.sum(1), torch.ones(2))
    True
    """
    _check_logits(logits, mask, check_finite)
    steps = half_step_count(n_iter, half_steps)
    if mask is not None:
        mask = mask.expand(logits.shape[:-1])
    x = logits.to(_compute_dtype(logits))
    # Autocast would run the iterations' products in bf16/fp16: Sinkhorn stays in float32.
    with torch.autocast(device_type=logits.device.type, enabled=False):
        return SinkhornFunction.apply(x, steps, mask, early_stop).to(logits.dtype)


def normalize(logits: torch.Tensor, normalization: str, n_iter: int = 50,
              mask: torch.Tensor | None = None, check_finite: bool = True) -> torch.Tensor:
    """Dispatch on the name: 'softmax' or 'sinkhorn'."""
    if normalization == "softmax":
        return softmax(logits, mask, check_finite=check_finite)
    if normalization == "sinkhorn":
        return sinkhorn(logits, n_iter, mask, check_finite=check_finite)
    raise ValueError(f"unknown normalization {normalization!r}; valid: {', '.join(NORMALIZATIONS)}")


def marginal_errors(p: torch.Tensor, mask: torch.Tensor | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Max |row sum - 1| and max |column sum - 1| over real tokens, per matrix `(...)`."""
    rows, cols = (p.sum(-1) - 1).abs(), (p.sum(-2) - 1).abs()
    if mask is not None:
        rows, cols = rows * mask, cols * mask
    return rows.amax(-1), cols.amax(-1)


# ----------------------------------------------------------------------------- checks


def half_step_count(n_iter, half_steps=None) -> int:
    """The number of half-steps `sinkhorn` runs: 2 * n_iter, or half_steps when given; each
    a positive integer, at most `MAX_HALF_STEPS` half-steps. TypeError or ValueError
    naming the argument otherwise."""
    name, value = ("half_steps", half_steps) if half_steps is not None else ("n_iter", n_iter)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # np.int64 is one
        raise TypeError(f"{name} must be a positive integer (a count of "
                        f"{'half-steps' if name == 'half_steps' else 'full iterations'}); "
                        f"got {value!r} ({type(value).__name__})")
    value = int(value)
    steps = value if name == "half_steps" else 2 * value
    if not 1 <= steps <= MAX_HALF_STEPS:
        limit = MAX_HALF_STEPS if name == "half_steps" else MAX_HALF_STEPS // 2
        raise ValueError(f"{name} must be between 1 and {limit}; got {value}")
    return steps


def _check_logits(logits: torch.Tensor, mask: torch.Tensor | None, check_finite: bool) -> None:
    """Raise a ValueError or TypeError naming the problem with `logits` or `mask`."""
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if logits.dim() < 2:
        raise ValueError(f"logits must have shape (..., n, n); got rank {logits.dim()} "
                         f"shape {tuple(logits.shape)}")
    n, m = logits.shape[-2:]
    if n != m:
        raise ValueError(f"logits must be square in the last two dims (..., n, n); "
                         f"got shape {tuple(logits.shape)}")
    if logits.numel() == 0:
        raise ValueError(f"logits are empty: shape {tuple(logits.shape)}")
    if not logits.is_floating_point():
        raise TypeError(f"logits must be floating point, got {logits.dtype}")
    if mask is not None:
        check_mask(mask, logits.shape[:-2], n, check_values=check_finite)
    if check_finite:
        real = logits if mask is None else logits.masked_fill(~pair_mask(mask), 0.0)
        if bool(torch.isfinite(real.sum())):  # one cheap reduction; NaN and inf propagate
            return
        bad = ~torch.isfinite(real)  # the sum may also have overflowed: look closely
        if bool(bad.any()):
            n_nan = int(torch.isnan(real).sum())
            raise ValueError(f"logits contain non-finite values ({n_nan} NaN, "
                             f"{int(bad.sum()) - n_nan} inf) at real-token positions; "
                             f"pass check_finite=False to skip this check")


def _compute_dtype(logits: torch.Tensor) -> torch.dtype:
    """Half precision is computed in float32; float32/float64 stay as they are."""
    return torch.float32 if logits.dtype in (torch.float16, torch.bfloat16) else logits.dtype
