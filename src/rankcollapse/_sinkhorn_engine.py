"""The fast Sinkhorn engine behind `rankcollapse.sinkhorn` (private: call `sinkhorn`).

What it computes is defined by `normalizations.sinkhorn_reference`, the plain log-domain
loop; the tests hold the two together (forward within 1e-6 in float32, gradients within 1e-4).

How. The first row and column half-steps are done in the log domain; afterwards every row and
every column of `K = exp(logits + f + g)` holds an entry of at least `1/n**2` and no entry
exceeds 1, so the remaining half-steps run in the scaling domain, `u = 1 / (K v)`,
`v = 1 / (K^T u)`: one batched matrix-vector product per half-step instead of an `exp` over
the whole matrix. `u` and `v` are rescaled by their maximum after each step (the next
half-step is invariant to that scale). When the logits span more than the scaling domain can
hold (about 40 in float32: K would underflow), the block continues in the log domain instead:
slower, but the same matrix as the log-domain loop for logits up to 1e4. The backward pass
recomputes these iterations from the saved logits instead of keeping every iterate (the bytes
saved for backward are those of the logits alone) and differentiates the scaling steps by hand.
"""

from __future__ import annotations

import torch

from .masks import log_normalize, pair_mask

# Below these log-kernel values the scaling domain would lose entries to underflow (products
# of two such entries must stay representable): such blocks continue in the log domain.
_LOG_FLOOR = {torch.float32: -40.0, torch.float64: -350.0}
_CPU_BLOCK_BYTES = 4 * 2**20  # K and K^T of one block stay within a typical L2/L3 cache


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
    return p if mask is None else p * pair_mask(mask)


def _underflows(log_k: torch.Tensor, mask: torch.Tensor | None) -> bool:
    """Whether the log-kernel spans more than the scaling domain can hold in this dtype
    (logits differing by more than about 40 in float32). One host sync per block, before the
    iterations; such blocks take the slower, exact log-domain path."""
    real = log_k if mask is None else log_k.masked_fill(~pair_mask(mask), 0.0)
    return bool(real.amin() < _LOG_FLOOR.get(log_k.dtype, -40.0))


def _log_iterations(log_k: torch.Tensor, half_steps: int, mask: torch.Tensor | None
                    ) -> torch.Tensor:
    """Half-steps 3 .. half_steps in the log domain (rows on odd steps, columns on even)."""
    for step in range(3, half_steps + 1):
        log_k = log_normalize(log_k, -1 if step % 2 else -2, mask)
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
        x = log_normalize(logits.masked_fill(~pair_mask(mask), float("-inf")), -1, mask)
        x = x if half_steps == 1 else log_normalize(x, -2, mask)
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


class SinkhornFunction(torch.autograd.Function):
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
            g = g if m is None else g * pair_mask(m)
            g = _scaling_backward(*_iterate(_with_padding_identity(k.detach(), m), h), h, g)
            grads.append(torch.autograd.grad(k, x, g)[0])
        return torch.cat(grads).reshape(logits.shape), None, None
