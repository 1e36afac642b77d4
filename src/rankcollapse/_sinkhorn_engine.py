"""The fast Sinkhorn engine behind `rankcollapse.sinkhorn` (private: call `sinkhorn`).

What it computes is defined by `normalizations.sinkhorn_reference`, the plain log-domain
loop; the tests hold the two together (forward within 1e-6 in float32, gradients within 1e-4).
In float32 on the CPU the loops below run in C (`_sinkhorn_native`, compiled on first use),
matrix by matrix; this module's torch code is their reference and runs everywhere else
(float64, CUDA, or where no C compiler works).

Forward. The first row and column half-steps are a softmax over rows and a division by the
column sums (`_kernel`); afterwards every row and every column of `K` holds an entry of at
least `1/n**2` and no entry exceeds 1, so the remaining half-steps run in the scaling domain, `u = 1 / (K v)`,
`v = 1 / (K^T u)`: one batched matrix-vector product per half-step instead of an `exp` over
the whole matrix. Every few iterations (`CHECK_EVERY`; the C loops: before every row step)
each matrix's row error is checked; a matrix whose error has fallen to the rounding level of
its dtype (`tolerance`) is *converged*: further iterations would only move rounding noise, so
it stops there and the others go on alone. A matrix that does not converge runs exactly the
requested number of half-steps. When the logits span more than the scaling domain can hold
(about 40 in float32: K would underflow), the block (the C loops: the matrix) continues in the
log domain instead: slower, but the same matrix as the log-domain loop for logits up to 1e4.
Without gradients nothing per step is kept.

Backward. For a converged matrix P the gradient is that of the fixed point (implicit
differentiation): with G the incoming gradient, `r = (P*G) 1`, `c = (P*G)^T 1` and beta the
solution of `(I - P^T P + 11^T/n) beta = c - P^T r`, `alpha = r - P beta`, the gradient with
respect to the logits is `P * (G - alpha 1^T - 1 beta^T)`: one small linear solve per matrix
instead of differentiating every half-step. Where the matrix converged this equals the
gradient through the unrolled iterations up to the remaining marginal error divided by the
system's smallest eigenvalue (the plan's spectral gap). A matrix that did not converge gets
the exact gradient of the iterations it ran: they are recomputed from the saved logits and
differentiated by hand (kernels that would underflow: autograd through the log-domain
iterations). In the C loops that costs the few such matrices alone. In torch it costs the
whole block, so there a matrix whose marginal error after its iterations is at most `NEAR`
(float32: 1e-5) takes the implicit gradient too, which differs from the unrolled one by about
that much times the incoming gradient divided by the matrix's spectral gap (measured: at most
2e-5 on trained models' logits, up to 3e-4 on random logits of scale 3 to 4; relative to the
gradient itself more where that is small, as for sharp plans). Sharp logits make
plans that are, or nearly are, permutations (most often in short masked blocks): there the
gap is 0 or nearly, the system singular or ill-conditioned, and the implicit gradient fails
or loses its digits, so every matrix whose gap is below `GAP` (estimated after the
factorization) takes the unrolled gradient instead, whether it converged or nearly did, on
both engines. Saved for backward: the logits and P.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch

from . import _sinkhorn_native as native
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
    per_matrix = n * n * logits.element_size()
    block = logits[..., 0, 0].numel() if logits.is_cuda else max(1, _CPU_BLOCK_BYTES // per_matrix)
    flat = [t.reshape(-1, n, n).split(block) for t in (logits, *others)]
    masks = mask.reshape(-1, n).split(block) if mask is not None else [None] * len(flat[0])
    return zip(masks, *flat)


CHECK_EVERY = 4  # full iterations between two convergence checks, after the first EARLY
EARLY = 3  # the first iterations are checked one by one: small logits converge in a few


def tolerance(dtype: torch.dtype, n: int) -> float:
    """The row error below which a matrix counts as converged: about the level at which
    rounding stops Sinkhorn's iteration in this dtype, which grows with the row length
    (measured in float32, largest over random logits: 2.4e-7 at n = 17, 4.8e-7 at n = 50,
    8e-7 at n = 128). Stopping there changes the result by less than 1e-6 in float32
    (largest difference to running every iteration, measured up to n = 128)."""
    return torch.finfo(dtype).eps * max(2.0, n ** 0.5)


def sinkhorn_forward(logits: torch.Tensor, half_steps: int, mask: torch.Tensor | None,
                     early_stop: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Sinkhorn on `(..., n, n)`, block by block (see `_blocks`): the matrices and, per
    matrix (flattened batch), whether it converged before the last half-step. Without
    `early_stop` every matrix runs all half-steps. The C loops take the whole batch at once
    (they work matrix by matrix)."""
    n = logits.shape[-1]
    if half_steps > 2 and native.applies(logits):
        flat_mask = None if mask is None else mask.reshape(-1, n)
        p, done = _native_forward(logits.reshape(-1, n, n), half_steps, flat_mask, early_stop)
        return p.reshape(logits.shape), done
    out = torch.empty_like(logits, memory_format=torch.contiguous_format).reshape(-1, n, n)
    done = torch.empty(out.shape[0], dtype=torch.bool, device=logits.device)
    start = 0
    for m, x in _blocks(logits, mask):  # each block's result goes straight into `out`
        stop = start + len(x)
        done[start:stop] = _block_forward(x, half_steps, m, early_stop, out[start:stop])[1]
        start = stop
    return out.reshape(logits.shape), done


def _block_forward(x: torch.Tensor, half_steps: int, mask: torch.Tensor | None,
                   early_stop: bool = True, out: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Sinkhorn of a block `(B, n, n)`: half-steps 1 and 2 (`_kernel`), then the rest in the
    scaling domain with early stopping, or in the log domain when the kernel's range would
    underflow (see `_underflows`; such matrices count as not converged). Returns P (written
    into `out` when given: no gradient flows then) and which matrices converged."""
    unconverged = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
    k = _kernel(_with_padding_identity(x, mask), half_steps)
    if half_steps <= 2:
        return _into(out, _without_padding(k, mask)), unconverged
    if _underflows(k, mask):
        p = _log_iterations(_first_steps(x, half_steps, mask), half_steps, mask)
        return _into(out, p), unconverged
    tol = tolerance(k.dtype, k.shape[-1]) if early_stop else -1.0
    n = k.shape[-1]
    u, v, converged = _scale(_padded(k), half_steps, tol)
    u, v = u[:, :n], v[:, :n]
    return _without_padding(_plan(k, u, v, half_steps, out)[0], mask), converged


def _native_forward(logits: torch.Tensor, half_steps: int, mask: torch.Tensor | None,
                    early_stop: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sinkhorn of float32 logits `(B, n, n)` on the CPU by the C loops
    (`_sinkhorn_native.forward`), each matrix stopping on its own: P and which matrices
    converged. A matrix whose kernel would underflow takes the log domain alone (and counts
    as not converged)."""
    p, converged, _, underflow = native.forward(
        logits, mask, half_steps, tolerance(logits.dtype, logits.shape[-1]) if early_stop else -1.0,
        math.exp(_LOG_FLOOR[logits.dtype]))
    if bool(underflow.any()):
        index = underflow.nonzero().squeeze(-1)
        sub = None if mask is None else mask[index]
        p.index_copy_(0, index, _log_iterations(_first_steps(logits[index], half_steps, sub),
                                                half_steps, sub))
        converged[index] = False
    return _without_padding(p, mask), converged


# Batched vector-times-matrix products below this size take a CPU BLAS path about 3-4x
# slower than at this size (measured with 512 matrices, one thread: 344 us at n = 17 against
# 88 us at n = 20; `benchmarks/sinkhorn.py --small`): smaller kernels are iterated padded.
SMALL_N = 20


def _padded(k: torch.Tensor) -> torch.Tensor:
    """K `(B, n, n)` with n < SMALL_N on the CPU, extended to SMALL_N by an identity block
    (zero off the diagonal): the same as padding tokens (`_with_padding_identity`), the real
    block's scalings are those of K alone (the products only add exact zeros) and the padded
    ones stay exactly 1, so its convergence check sees only the real block. Else K itself."""
    n = k.shape[-1]
    if k.is_cuda or n >= SMALL_N:
        return k
    padded = torch.zeros(k.shape[0], SMALL_N, SMALL_N, dtype=k.dtype, device=k.device)
    padded[:, :n, :n] = k
    padded[:, n:, n:] = torch.eye(SMALL_N - n, dtype=k.dtype, device=k.device)
    return padded


def _into(out: torch.Tensor | None, p: torch.Tensor) -> torch.Tensor:
    return p if out is None else out.copy_(p)


def _kernel(x: torch.Tensor, half_steps: int) -> torch.Tensor:
    """Half-steps 1 (rows: exactly softmax) and 2 (columns): K, column-stochastic, with
    every row and column holding an entry of at least 1/n^2 and none above 1."""
    k = torch.softmax(x, -1)  # a column can underflow to zeros: `_underflows` then sees it
    return k if half_steps == 1 else k / k.sum(-2, keepdim=True).clamp_min(torch.finfo(k.dtype).tiny)


def _scale(k: torch.Tensor, half_steps: int, tol: float):
    """Half-steps 3 .. half_steps - 1 in the scaling domain, each matrix stopping once its
    row error is at most `tol` (checked after each of the first `EARLY` iterations, then every
    `CHECK_EVERY`, before a row step: the error of the plan after the previous column step).
    Converged matrices leave the batch once they are at least half of it (a copy is not worth
    less); until then they iterate on, which keeps them converged. Returns u, v (the last
    scalings) and which matrices converged. Keeps no per-step state."""
    ua = torch.ones(k.shape[:-1], dtype=k.dtype, device=k.device)  # of the active matrices
    va = ua.clone()
    u, v = torch.empty_like(ua), torch.empty_like(va)  # of all matrices, filled on stopping
    converged = torch.zeros(k.shape[0], dtype=torch.bool, device=k.device)
    active = torch.arange(k.shape[0], device=k.device)
    ka, kta = k, k.transpose(-1, -2).contiguous()
    tiny = torch.finfo(k.dtype).tiny
    for step in range(3, half_steps):
        if step % 2:  # row step: u = 1 / (K v)
            a = (va.unsqueeze(-2) @ kta).squeeze(-2)
            iteration = (step - 3) // 2  # full iterations done in the scaling domain
            if iteration <= EARLY or (iteration - EARLY) % CHECK_EVERY == 0:
                done = (ua * a - 1).abs().amax(-1) <= tol
                converged[active] |= done
                finished = int(done.sum())  # the one host sync of a check
                if finished == len(done):
                    u[active], v[active] = ua, va
                    return u, v, converged
                if 2 * finished >= len(done):  # worth a copy: go on with the others
                    u[active[done]], v[active[done]] = ua[done], va[done]
                    keep = ~done
                    active, ka, kta = active[keep], ka[keep], kta[keep]
                    ua, va, a = ua[keep], va[keep], a[keep]
            ua = a.clamp_min(tiny).reciprocal()
        else:  # column step: v = 1 / (K^T u)
            va = (ua.unsqueeze(-2) @ ka).squeeze(-2).clamp_min(tiny).reciprocal()
    u[active], v[active] = ua, va
    return u, v, converged


def _underflows(k: torch.Tensor, mask: torch.Tensor | None) -> bool:
    """Whether the kernel spans more than the scaling domain can hold in this dtype (an
    entry of a real pair below exp(-40) in float32: logits differing by more than about 40).
    One host sync per block, before the iterations; such blocks take the slower, exact
    log-domain path."""
    real = k if mask is None else k.masked_fill(~pair_mask(mask), 1.0)
    return bool(real.amin() < math.exp(_LOG_FLOOR.get(k.dtype, -40.0)))


def _log_iterations(log_k: torch.Tensor, half_steps: int, mask: torch.Tensor | None
                    ) -> torch.Tensor:
    """Half-steps 3 .. half_steps in the log domain (rows on odd steps, columns on even)."""
    for step in range(3, half_steps + 1):
        log_k = log_normalize(log_k, -1 if step % 2 else -2, mask)
    return log_k.exp()


def _with_padding_identity(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Logits whose padding is an identity block: -inf on every pair involving a padded
    token except 0 on a padded token's own diagonal entry. Sinkhorn then balances the real
    block and keeps the padded block the identity (already doubly stochastic, and left
    exactly so by every half-step), so the iterations need no mask."""
    if mask is None:
        return x
    return x.masked_fill(~pair_mask(mask), float("-inf")).masked_fill(torch.diag_embed(~mask), 0.0)


def _without_padding(p: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """P with the padded block's identity removed: padded rows and columns are zero. In
    place when P does not need a gradient (the forward pass), else a new tensor."""
    if mask is None:
        return p
    eye = torch.diag_embed(~mask)
    return p.masked_fill(eye, 0.0) if p.requires_grad else p.masked_fill_(eye, 0.0)


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
    """Half-steps 3 .. half_steps - 1 in the scaling domain, all of them (the same
    arithmetic as `_scale` without stopping), for the backward pass of matrices that did not
    converge. Returns K, K^T, the last u and v, and every step's (product, scaling) pair."""
    u = v = torch.ones(k.shape[:-1], dtype=k.dtype, device=k.device)
    kt = k.transpose(-1, -2).contiguous()  # both products as vector-times-matrix: fastest
    tiny = torch.finfo(k.dtype).tiny
    steps = []
    for step in range(3, half_steps):
        if step % 2:  # row step: u = 1 / (K v)
            a = (v.unsqueeze(-2) @ kt).squeeze(-2).clamp_min(tiny)
            u = a.reciprocal()
            steps.append((a, u))
        else:  # column step: v = 1 / (K^T u)
            b = (u.unsqueeze(-2) @ k).squeeze(-2).clamp_min(tiny)
            v = b.reciprocal()
            steps.append((b, v))
    return k, kt, u, v, steps


def _plan(k: torch.Tensor, u: torch.Tensor, v: torch.Tensor, half_steps: int,
          out: torch.Tensor | None = None):
    """The last half-step as an explicit normalization, so the result is exactly row- (odd
    `half_steps`) or column-stochastic (even) up to rounding. Returns (P, the sums divided
    by); P is written into `out` when given."""
    tiny = torch.finfo(k.dtype).tiny
    if half_steps % 2:
        q = k * v.unsqueeze(-2)
        sums = q.sum(-1, keepdim=True).clamp_min(tiny)
    else:
        q = k * u.unsqueeze(-1)
        sums = q.sum(-2, keepdim=True).clamp_min(tiny)
    return torch.div(q, sums, out=out), sums


def _scaling_backward(k, kt, u, v, steps, half_steps: int, grad_p: torch.Tensor
                      ) -> torch.Tensor:
    """Gradient with respect to K of the scaling-domain half-steps, by hand.

    Each scaling step is `s = 1 / product`, so d s / d product = -s / product. Each step's
    outer product is accumulated in one batched product at the end instead of n x n work per
    step.
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
        if index % 2 == 0:  # row step: u = 1 / (K v_before)
            g_a = -g_u * scaling / product
            g_v, g_u = (g_a.unsqueeze(-2) @ k).squeeze(-2), zero
            lefts.append(g_a), rights.append(before)
        else:  # column step: v = 1 / (K^T u_before)
            g_b = -g_v * scaling / product
            g_u, g_v = (g_b.unsqueeze(-2) @ kt).squeeze(-2), zero
            lefts.append(before), rights.append(g_b)
    if lefts:
        g_k = g_k + torch.stack(lefts, -1) @ torch.stack(rights, -2)
    return g_k


# Smallest eigenvalue of the implicit system `I + m m^T / |m| - P^T P` (the spectral gap
# 1 - sigma_2(P)^2 of the plan's real block) at which the implicit gradient is still used. It
# differs from the gradient of the iterations by about the plan's marginal error divided by
# the gap, times the incoming gradient: at most NEAR / GAP = 2e-4 in float32, tolerance / GAP
# ~ 1e-11 in float64. Measured gaps of the matrices that converged or nearly did: all above
# 0.16 on random logits of scale up to 6 (n = 17 to 128); on masked random logits of scale 1
# to 500 (n = 6) either above 0.05 or below 1e-3, none between. Below are plans that are, or
# nearly are, (block) permutations, up to half of them from scale 20 on: the solve fails there
# or loses its digits.
GAP = {torch.float32: 0.05, torch.float64: 1e-4}


def implicit_backward(p: torch.Tensor, grad_p: torch.Tensor, mask: torch.Tensor | None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient with respect to the logits at the Sinkhorn fixed point P `(B, n, n)` (see the
    module docstring), and per matrix whether it was solved: the system positive definite
    with a smallest eigenvalue (`_smallest_eigenvalue`) of at least `GAP`. The gradient of a
    matrix not solved is meaningless (the caller takes the unrolled one). With a mask, P's
    padded rows and columns are zero; the system's `11^T / n` becomes `m m^T / n_real` and its
    padded block the identity, so the padded part of beta is zero and the real part solves the
    real block's system. A sample with no real token has P = 0 and gets a zero gradient, as
    from the unrolled iterations."""
    n = p.shape[-1]
    if mask is None:
        ones = torch.ones(1, n, 1, dtype=p.dtype, device=p.device)
        shift = torch.eye(n, dtype=p.dtype, device=p.device) + ones @ ones.transpose(-1, -2) / n
    else:
        grad_p = grad_p * pair_mask(mask)
        real = mask.to(p.dtype).unsqueeze(-1)  # (B, n, 1)
        count = real.sum(-2, keepdim=True).clamp_min(1.0)  # a sample with no token: P = 0
        shift = torch.eye(n, dtype=p.dtype, device=p.device) + real @ real.transpose(-1, -2) / count
    pg = p * grad_p
    r, c = pg.sum(-1, keepdim=True), pg.sum(-2).unsqueeze(-1)  # (B, n, 1)
    pt = p.transpose(-1, -2)
    system = torch.baddbmm(shift.expand_as(p), pt, p, alpha=-1.0)  # symmetric positive definite
    rhs = torch.baddbmm(c, pt, r, alpha=-1.0)
    factor, info = torch.linalg.cholesky_ex(system)
    beta = torch.cholesky_solve(rhs, factor)
    solved = (info == 0) & (_smallest_eigenvalue(factor) >= GAP[p.dtype])
    alpha = torch.baddbmm(r, p, beta, alpha=-1.0)
    return p * (grad_p - alpha - beta.transpose(-1, -2)), solved


def _smallest_eigenvalue(factor: torch.Tensor) -> torch.Tensor:
    """An estimate from above of the smallest eigenvalue of each system A `(B, n, n)` with
    Cholesky factor `factor`: the Rayleigh quotient z^T A z / z^T z = s^T z / z^T z of
    z = A^-1 s, one step of inverse iteration from a fixed start s (a Weyl sequence: no
    structure in common with any plan's). A gap below `GAP` by orders of magnitude, the case
    that matters, dominates z; where the solve breaks down the estimate is 0, negative or NaN.
    One pair of triangular solves: O(n^2) against the factorization's O(n^3)."""
    n = factor.shape[-1]
    start = (torch.arange(1, n + 1, dtype=torch.float64, device=factor.device)
             * 0.6180339887498949).frac().sub(0.5).to(factor.dtype)
    z = torch.cholesky_solve(start.expand(factor.shape[0], n).unsqueeze(-1), factor).squeeze(-1)
    return (z @ start) / (z * z).sum(-1)


def unrolled_backward(logits: torch.Tensor, grad_p: torch.Tensor, half_steps: int,
                      mask: torch.Tensor | None) -> torch.Tensor:
    """The exact gradient of every half-step, recomputed from the logits `(B, n, n)`: by the
    C loops in float32 on the CPU (matrices whose kernel would underflow excepted), else
    block by block."""
    if half_steps <= 2 or not native.applies(logits):
        return _unrolled_blocks(logits, grad_p, half_steps, mask)
    grad, underflow = native.unrolled_backward(logits, grad_p, mask, half_steps,
                                               math.exp(_LOG_FLOOR[logits.dtype]))
    if bool(underflow.any()):
        index = underflow.nonzero().squeeze(-1)
        sub = None if mask is None else mask[index]
        grad.index_copy_(0, index, _unrolled_blocks(logits[index], grad_p[index], half_steps, sub))
    return grad


def _unrolled_blocks(logits: torch.Tensor, grad_p: torch.Tensor, half_steps: int,
                     mask: torch.Tensor | None) -> torch.Tensor:
    """`unrolled_backward` in torch, block by block: the scaling-domain half-steps by hand,
    the first two (and the log-domain iterations of kernels that would underflow) by
    autograd."""
    grads = []
    for m, x, g in _blocks(logits, mask, grad_p):
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            k = _kernel(_with_padding_identity(x, m), half_steps)
            if half_steps <= 2 or _underflows(k.detach(), m):  # autograd of the steps
                p = (_without_padding(k, m) if half_steps <= 2 else
                     _log_iterations(_first_steps(x, half_steps, m), half_steps, m))
                grads.append(torch.autograd.grad(p, x, g)[0])
                continue
        g = g if m is None else g * pair_mask(m)  # the padded block is constant
        g = _scaling_backward(*_iterate(k.detach(), half_steps), half_steps, g)
        grads.append(torch.autograd.grad(k, x, g)[0])
    return torch.cat(grads)


# Largest marginal error after the last half-step at which a matrix that did not converge
# still takes the implicit backward (see the module docstring); other dtypes: `tolerance`.
NEAR = {torch.float32: 1e-5}


def nearly_converged(p: torch.Tensor, half_steps: int, mask: torch.Tensor | None
                     ) -> torch.Tensor:
    """Per matrix of `(B, n, n)` P, whether its marginal error (rows after a column step,
    columns after a row step; real lines only) is at most `NEAR` for its dtype. A plan that is
    a permutation passes (its error is 0); the backward pass sends it, like every matrix
    whose implicit system is ill-conditioned, to the unrolled gradient (`GAP`)."""
    n = p.shape[-1]
    sums = p.sum(-1) if half_steps % 2 == 0 else p.sum(-2)
    error = (sums - 1).abs()
    if mask is not None:
        error = error.masked_fill(~mask, 0.0)
    return error.amax(-1) <= NEAR.get(p.dtype, tolerance(p.dtype, n))


class SinkhornFunction(torch.autograd.Function):
    """Sinkhorn with early stopping; the backward pass is implicit for the matrices that
    converged with a well-conditioned system and the exact unrolled one for the others (see
    the module docstring)."""

    @staticmethod
    def forward(ctx, logits, half_steps, mask, early_stop):
        n = logits.shape[-1]
        flat_mask = None if mask is None else mask.reshape(-1, n)
        if half_steps > 2 and native.applies(logits):  # the C loops differentiate every
            p, converged = _native_forward(logits.reshape(-1, n, n), half_steps,  # iteration
                                           flat_mask, early_stop)  # of the others, cheaply
            p = p.reshape(logits.shape)
        else:
            p, converged = sinkhorn_forward(logits, half_steps, mask, early_stop)
            if early_stop and half_steps > 2 and not bool(converged.all()):
                slow = (~converged).nonzero().squeeze(-1)  # usually few: look at those alone
                sub = None if flat_mask is None else flat_mask[slow]
                converged[slow] = nearly_converged(p.reshape(-1, n, n)[slow], half_steps, sub)
        ctx.half_steps, ctx.mask, ctx.converged = half_steps, mask, converged
        ctx.save_for_backward(logits, p)
        return p

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        (logits, p), converged = ctx.saved_tensors, ctx.converged
        n = logits.shape[-1]
        logits, p, grad_p = (t.reshape(-1, n, n) for t in (logits, p, grad_out))
        mask = None if ctx.mask is None else ctx.mask.reshape(-1, n)
        grad = _gradient(logits, p, grad_p, mask, converged, ctx.half_steps)
        return grad.reshape(grad_out.shape), None, None, None


def _gradient(logits: torch.Tensor, p: torch.Tensor, grad_p: torch.Tensor,
              mask: torch.Tensor | None, converged: torch.Tensor, half_steps: int
              ) -> torch.Tensor:
    """The gradient with respect to logits `(B, n, n)`: implicit where the matrix converged
    and its system was solved (well conditioned), the unrolled one elsewhere. Two host syncs
    where every matrix converged and was solved (the usual case)."""
    with _named_errors("implicit", p, half_steps):
        grad, solved = _implicit_part(p, grad_p, mask, None if bool(converged.all()) else converged)
    exact = converged & solved
    if bool(exact.all()):
        return grad
    slow = (~exact).nonzero().squeeze(-1)  # usually few: recompute those alone
    sub = None if mask is None else mask[slow]
    with _named_errors("unrolled", p[slow], half_steps):
        return grad.index_copy_(0, slow, unrolled_backward(logits[slow], grad_p[slow],
                                                           half_steps, sub))


@contextmanager
def _named_errors(step: str, p: torch.Tensor, half_steps: int):
    """Errors out of a step of the backward pass name Sinkhorn, the step and the matrices: in a
    training run they surface far from any call to `sinkhorn`. Out of memory keeps its type."""
    where = (f"Sinkhorn backward, {step} gradient of {p.shape[0]} matrices {tuple(p.shape[1:])} "
             f"({p.dtype}, {p.device}, {half_steps} half-steps)")
    try:
        yield
    except torch.OutOfMemoryError as error:
        error.add_note(where)
        raise
    except RuntimeError as error:
        raise RuntimeError(f"{where} failed: {error}") from error


def _implicit_part(p: torch.Tensor, grad_p: torch.Tensor, mask: torch.Tensor | None,
                   chosen: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`implicit_backward` of the `chosen` matrices (all when None), by the C loops where they
    apply: the gradient (left unwritten for the others) and which matrices were solved (the
    others count as solved)."""
    if native.applies(p):
        return native.implicit_backward(p, grad_p, mask, GAP[p.dtype], chosen)
    if chosen is None:
        return implicit_backward(p, grad_p, mask)
    grad, solved = torch.empty_like(p), torch.ones_like(chosen)
    index = chosen.nonzero().squeeze(-1)
    if len(index):
        sub = None if mask is None else mask[index]
        part, solved[index] = implicit_backward(p[index], grad_p[index], sub)
        grad.index_copy_(0, index, part)
    return grad, solved
