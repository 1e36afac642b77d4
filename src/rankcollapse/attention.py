"""Attention normalizations (softmax, Sinkhorn) and a multi-head self-attention layer.

Shapes: logits are `(..., n, n)` with queries on rows and keys on columns; a key-padding
mask is `(..., n)` with True for real tokens.

Sinkhorn convention. One *full iteration* (`n_iter`) is a row normalization followed by a
column normalization, so the matrix returned after `n_iter` full iterations is exactly
column-stochastic and its rows carry the remaining error. Prior code (Sinkformers, Sander et
al. 2022) counts *half-steps* (`n_it`), starting with rows; `half_steps=1` is exactly softmax,
and `half_steps=2 * n_iter` equals `n_iter` full iterations. Rows come first so that the first
half-step is the familiar softmax; ending on a column step is then what "full iterations" means.

Implementation. The first row and column half-steps are done in the log domain; afterwards
every row and every column of `K = exp(logits + f + g)` holds an entry of at least `1/n**2`
and no entry exceeds 1, so the remaining half-steps run in the scaling domain,
`u = 1 / (K v)`, `v = 1 / (K^T u)`: one batched matrix-vector product per half-step instead of
an `exp` over the whole matrix. `u` and `v` are rescaled by their maximum after each step
(the next half-step is invariant to that scale). When the logits span more than the scaling
domain can hold (about 40 in float32: K would underflow), the block continues in the log
domain instead: slower, but the same matrix as the log-domain loop for logits up to 1e4.
The backward pass recomputes these iterations from the saved logits instead of keeping every
iterate (the bytes saved for backward are those of the logits alone) and differentiates the
scaling steps by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

NORMALIZATIONS = ("softmax", "sinkhorn")
# Below these log-kernel values the scaling domain would lose entries to underflow (products
# of two such entries must stay representable): such blocks continue in the log domain.
_LOG_FLOOR = {torch.float32: -40.0, torch.float64: -350.0}
_CPU_BLOCK_BYTES = 4 * 2**20  # K and K^T of one block stay within a typical L2/L3 cache


# ----------------------------------------------------------------------------- checks


def _check_logits(logits: torch.Tensor, mask: torch.Tensor | None, check_finite: bool) -> None:
    """Raise a ValueError naming the problem with `logits` or `mask`."""
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
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor (True = real token), got {mask.dtype}")
        if mask.shape[-1] != n or torch.broadcast_shapes(mask.shape[:-1], logits.shape[:-2]) \
                != logits.shape[:-2]:
            raise ValueError(f"mask shape {tuple(mask.shape)} does not match logits shape "
                             f"{tuple(logits.shape)}; expected (..., {n}) broadcastable to "
                             f"{tuple(logits.shape[:-2])} + ({n},)")
        if not bool(mask.any(-1).all()):
            raise ValueError("mask has a sample with no real token (an all-False row); "
                             "attention over zero tokens is undefined")
    if check_finite:
        real = logits if mask is None else logits.masked_fill(~_pair_mask(mask), 0.0)
        if bool(torch.isfinite(real.sum())):  # one cheap reduction; NaN and inf propagate
            return
        bad = ~torch.isfinite(real)  # the sum may also have overflowed: look closely
        if bool(bad.any()):
            n_nan = int(torch.isnan(real).sum())
            raise ValueError(f"logits contain non-finite values ({n_nan} NaN, "
                             f"{int(bad.sum()) - n_nan} inf) at real-token positions; "
                             f"pass check_finite=False to skip this check")


def _pair_mask(mask: torch.Tensor) -> torch.Tensor:
    """(..., n) key-padding mask -> (..., n, n) mask of real (query, key) pairs."""
    return mask.unsqueeze(-1) & mask.unsqueeze(-2)


def _compute_dtype(logits: torch.Tensor) -> torch.dtype:
    """Half precision is computed in float32; float32/float64 stay as they are."""
    return torch.float32 if logits.dtype in (torch.float16, torch.bfloat16) else logits.dtype


# ----------------------------------------------------------------------------- softmax


def softmax(logits: torch.Tensor, mask: torch.Tensor | None = None, *,
            check_finite: bool = True) -> torch.Tensor:
    """Row-stochastic attention: softmax over keys (last dim).

    logits `(..., n, n)`; mask `(..., n)` (True = real token): masked keys get zero weight.
    Rows of padded queries are uniform over the real keys (their logits are ignored).
    """
    _check_logits(logits, mask, check_finite)
    x = logits.to(_compute_dtype(logits))
    if mask is not None:  # padded queries: zeros first, so that inf/-inf there cannot give NaN
        x = x.masked_fill(~mask.unsqueeze(-1), 0.0).masked_fill(~mask.unsqueeze(-2), float("-inf"))
    return torch.softmax(x, dim=-1).to(logits.dtype)


# ----------------------------------------------------------------------------- sinkhorn


def _log_normalize(x: torch.Tensor, dim: int, mask: torch.Tensor | None) -> torch.Tensor:
    """x - logsumexp(x, dim) over real tokens. Padded lines (all -inf) are filled with zeros
    inside the logsumexp so that neither the value nor its gradient becomes NaN."""
    if mask is None:
        return x - torch.logsumexp(x, dim=dim, keepdim=True)
    padded = ~mask.unsqueeze(-1 if dim == -1 else -2)
    return x - torch.logsumexp(x.masked_fill(padded, 0.0), dim=dim, keepdim=True)


def _blocks(logits: torch.Tensor, mask: torch.Tensor | None, *others: torch.Tensor):
    """Split `(..., n, n)` tensors (and the `(..., n)` mask) into blocks of matrices.

    Each half-step streams K (or K^T) once; when K and K^T of the whole batch exceed the CPU's
    cache, every half-step goes to main memory and is about 2.5x slower (measured here), so on
    CPU the batch is processed in cache-sized blocks. On CUDA it is one block.
    """
    n = logits.shape[-1]
    block = logits[..., 0, 0].numel() if logits.is_cuda else max(1, _CPU_BLOCK_BYTES // (n * n * 4))
    flat = [t.reshape(-1, n, n).split(block) for t in (logits, *others)]
    masks = mask.reshape(-1, n).split(block) if mask is not None else [None] * len(flat[0])
    return zip(masks, *flat)


def _sinkhorn_forward(logits: torch.Tensor, half_steps: int,
                      mask: torch.Tensor | None) -> torch.Tensor:
    """Sinkhorn on `(..., n, n)`, block by block (see `_blocks`)."""
    outs = [_block_forward(_first_steps(x, half_steps, m), half_steps, m)
            for m, x in _blocks(logits, mask)]
    return torch.cat(outs).reshape(logits.shape)


def _block_forward(log_k: torch.Tensor, half_steps: int, mask: torch.Tensor | None
                   ) -> torch.Tensor:
    """The remaining half-steps from the log-kernel of `_first_steps`: in the scaling domain,
    or in the log domain when the kernel's range would underflow (see `_underflows`)."""
    if half_steps <= 2:
        return log_k.exp()
    if _underflows(log_k, mask):
        return _log_iterations(log_k, half_steps, mask)
    k, _, u, v, _ = _iterate(_with_padding_identity(log_k.exp(), mask), half_steps)
    p = _plan(k, u, v, half_steps)[0]
    return p if mask is None else p * _pair_mask(mask)


def _underflows(log_k: torch.Tensor, mask: torch.Tensor | None) -> bool:
    """Whether the log-kernel spans more than the scaling domain can hold in this dtype
    (logits differing by more than about 40 in float32). One host sync per block, before the
    iterations; such blocks take the slower, exact log-domain path."""
    real = log_k if mask is None else log_k.masked_fill(~_pair_mask(mask), 0.0)
    return bool(real.amin() < _LOG_FLOOR.get(log_k.dtype, -40.0))


def _log_iterations(log_k: torch.Tensor, half_steps: int, mask: torch.Tensor | None
                    ) -> torch.Tensor:
    """Half-steps 3 .. half_steps in the log domain (rows on odd steps, columns on even)."""
    for step in range(3, half_steps + 1):
        log_k = _log_normalize(log_k, -1 if step % 2 else -2, mask)
    return log_k.exp()


def _with_padding_identity(k: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """K with ones on the padded tokens' diagonal. Padded rows and columns of K are zero, so
    K becomes block diagonal: the real block and an identity, which is already doubly
    stochastic. Sinkhorn treats the blocks independently, so the iterations need no mask."""
    return k if mask is None else k + torch.diag_embed((~mask).to(k.dtype))


def _first_steps(logits: torch.Tensor, half_steps: int,
                 mask: torch.Tensor | None) -> torch.Tensor:
    """Half-steps 1 (rows: exactly softmax) and 2 (columns) in the log domain: log K, with
    K in [0, 1] and every row and column holding an entry of at least 1/n^2."""
    if mask is None:  # the fused kernel is faster; it would turn masked lines into NaN
        x = torch.log_softmax(logits, -1)
        x = x if half_steps == 1 else torch.log_softmax(x, -2)
    else:
        x = _log_normalize(logits.masked_fill(~_pair_mask(mask), float("-inf")), -1, mask)
        x = x if half_steps == 1 else _log_normalize(x, -2, mask)
    return x


def _iterate(k: torch.Tensor, half_steps: int):
    """Half-steps 3 .. half_steps - 1 in the scaling domain. Returns K, K^T, the last u and
    v, and every step's (product, scaling) pair, which the backward pass reuses."""
    u = v = torch.ones(k.shape[:-1], dtype=k.dtype, device=k.device)
    kt = k.transpose(-1, -2).contiguous()  # both products as vector-times-matrix: fastest
    tiny = torch.finfo(k.dtype).tiny
    steps = []
    for step in range(3, half_steps):
        if step % 2:  # row step: u = 1 / (K v)
            a = (v.unsqueeze(-2) @ kt).squeeze(-2).clamp_min(tiny)
            u = a.amin(dim=-1, keepdim=True) / a  # 1 / a, largest entry scaled to 1
            steps.append((a, u))
        else:  # column step: v = 1 / (K^T u)
            b = (u.unsqueeze(-2) @ k).squeeze(-2).clamp_min(tiny)
            v = b.amin(dim=-1, keepdim=True) / b
            steps.append((b, v))
    return k, kt, u, v, steps


def _plan(k: torch.Tensor, u: torch.Tensor, v: torch.Tensor, half_steps: int):
    """The last half-step as an explicit normalization, so the result is exactly row- (odd
    `half_steps`) or column-stochastic (even) up to rounding. Returns (P, the sums divided by)."""
    tiny = torch.finfo(k.dtype).tiny
    if half_steps % 2:
        q = k * v.unsqueeze(-2)
        sums = q.sum(-1, keepdim=True).clamp_min(tiny)
    else:
        q = k * u.unsqueeze(-1)
        sums = q.sum(-2, keepdim=True).clamp_min(tiny)
    return q / sums, sums


def _scaling_backward(k, kt, u, v, steps, half_steps: int, grad_p: torch.Tensor
                      ) -> torch.Tensor:
    """Gradient with respect to K of the scaling-domain half-steps, by hand.

    The rescaling of u and v in `_iterate` is treated as a constant: the result is invariant to
    that scale, so its derivative contributes nothing. Each step's outer product is
    accumulated in one batched product at the end instead of n x n work per step.
    """
    p, sums = _plan(k, u, v, half_steps)
    zero = torch.zeros_like(u)
    if half_steps % 2:  # P = K diag(v) / (K v)
        g_q = (grad_p - (grad_p * p).sum(-1, keepdim=True)) / sums
        g_k, g_u, g_v = g_q * v.unsqueeze(-2), zero, (g_q * k).sum(-2)
    else:  # P = diag(u) K / (u^T K)
        g_q = (grad_p - (grad_p * p).sum(-2, keepdim=True)) / sums
        g_k, g_u, g_v = g_q * u.unsqueeze(-1), (g_q * k).sum(-1), zero
    ones = torch.ones_like(u)
    lefts, rights = [], []  # g_K += sum_t lefts[t] (outer) rights[t]
    for index in reversed(range(len(steps))):
        product, scaling = steps[index]
        before = steps[index - 1][1] if index else ones
        if index % 2 == 0:  # row step: u = c / (K v_before)
            g_a = -g_u * scaling / product
            g_v, g_u = (g_a.unsqueeze(-2) @ k).squeeze(-2), zero
            lefts.append(g_a), rights.append(before)
        else:  # column step: v = c / (K^T u_before)
            g_b = -g_v * scaling / product
            g_u, g_v = (g_b.unsqueeze(-2) @ kt).squeeze(-2), zero
            lefts.append(before), rights.append(g_b)
    if lefts:
        g_k = g_k + torch.stack(lefts, -1) @ torch.stack(rights, -2)
    return g_k


class _Sinkhorn(torch.autograd.Function):
    """Sinkhorn whose backward recomputes the iterations from the saved logits (nothing else
    is saved) and differentiates the scaling steps by hand."""

    @staticmethod
    def forward(ctx, logits, half_steps, mask):
        ctx.half_steps = half_steps
        ctx.mask = mask
        ctx.save_for_backward(logits)
        return _sinkhorn_forward(logits, half_steps, mask)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        (logits,) = ctx.saved_tensors
        h = ctx.half_steps
        grads = []
        for m, x, g in _blocks(logits, ctx.mask, grad_out):
            with torch.enable_grad():
                x = x.detach().requires_grad_(True)
                log_k = _first_steps(x, h, m)
                if h <= 2 or _underflows(log_k.detach(), m):  # plain autograd of the steps
                    grads.append(torch.autograd.grad(_block_forward(log_k, h, m), x, g)[0])
                    continue
                k = log_k.exp()
            g = g if m is None else g * _pair_mask(m)
            g = _scaling_backward(*_iterate(_with_padding_identity(k.detach(), m), h), h, g)
            grads.append(torch.autograd.grad(k, x, g)[0])
        return torch.cat(grads).reshape(logits.shape), None, None


def sinkhorn(logits: torch.Tensor, n_iter: int = 50, mask: torch.Tensor | None = None, *,
             half_steps: int | None = None, check_finite: bool = True) -> torch.Tensor:
    """Doubly stochastic attention by Sinkhorn's algorithm (uniform marginals, temperature 1).

    logits `(..., n, n)`, any leading dims, CPU or CUDA, float32/float64 (half precision is
    computed in float32 and returned in the input dtype).
    n_iter: full iterations, each a row then a column normalization (default 50, the paper's).
    half_steps: Sinkformers' `n_it` convention instead of `n_iter` (row first; 1 == softmax).
    mask `(..., n)`, True = real token: only the real sub-block is balanced; padded rows and
    columns of the output are zero.
    check_finite: raise ValueError on NaN/inf logits (costs one host sync; turn off in hot loops).
    """
    _check_logits(logits, mask, check_finite)
    steps = 2 * n_iter if half_steps is None else half_steps
    if steps < 1:
        raise ValueError(f"Sinkhorn needs at least one half-step; got n_iter={n_iter}, "
                         f"half_steps={half_steps}")
    if mask is not None:
        mask = mask.expand(logits.shape[:-1])
    x = logits.to(_compute_dtype(logits))
    # Autocast would run the iterations' products in bf16/fp16: Sinkhorn stays in float32.
    with torch.autocast(device_type=logits.device.type, enabled=False):
        return _Sinkhorn.apply(x, steps, mask).to(logits.dtype)


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


# ----------------------------------------------------------------------------- module


@dataclass
class AttentionInfo:
    """Intermediates of one attention call: `logits` and `attention`, `(batch, heads, n, n)`."""

    logits: torch.Tensor
    attention: torch.Tensor


class SelfAttention(nn.Module):
    """Multi-head self-attention with softmax or Sinkhorn normalization.

    x `(batch, n, d_model)` -> `(batch, n, d_model)`. Logits are `Q K^T / sqrt(d_head)`.
    With `return_info=True` the call also returns an `AttentionInfo`; otherwise nothing is kept.
    """

    def __init__(self, d_model: int, n_heads: int, normalization: str = "softmax",
                 n_iter: int = 50, bias: bool = False, check_finite: bool = False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"unknown normalization {normalization!r}; "
                             f"valid: {', '.join(NORMALIZATIONS)}")
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.normalization, self.n_iter, self.check_finite = normalization, n_iter, check_finite
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                return_info: bool = False):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        head_mask = None if mask is None else mask[:, None, :]
        attn = normalize(logits, self.normalization, self.n_iter, head_mask, self.check_finite)
        y = self.out((attn @ v).transpose(1, 2).reshape(b, n, d))
        if return_info:
            return y, AttentionInfo(logits=logits, attention=attn)
        return y


def convergence(logits: torch.Tensor, max_half_steps: int) -> pd.DataFrame:
    """Marginal errors after each number of half-steps 1..max_half_steps (row first).

    Returns a table with columns half_steps, full_iterations (half_steps / 2), row_error and
    column_error (max over rows/columns, mean over the batch of matrices)."""
    rows = []
    for h in range(1, max_half_steps + 1):
        r, c = marginal_errors(sinkhorn(logits, half_steps=h))
        rows.append({"half_steps": h, "full_iterations": h / 2,
                     "row_error": r.mean().item(), "column_error": c.mean().item()})
    return pd.DataFrame(rows)
