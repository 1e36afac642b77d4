"""Independent, deliberately plain references for the tests: Python loops, log domain, float64."""

import torch


def sinkhorn_loop(a: torch.Tensor, half_steps: int) -> torch.Tensor:
    """Log-domain Sinkhorn of one matrix `(n, n)`, row first, in float64, no vectorisation."""
    x = a.double().clone()
    for step in range(half_steps):
        dim = 1 if step % 2 == 0 else 0
        x = x - torch.logsumexp(x, dim=dim, keepdim=True)
    return x.exp()


def sinkhorn_batched_reference(a: torch.Tensor, n_iter: int) -> torch.Tensor:
    """The plain log-domain loop over full iterations, batched (also the benchmark's reference)."""
    x = a.clone()
    for _ in range(n_iter):
        x = x - torch.logsumexp(x, dim=-1, keepdim=True)
        x = x - torch.logsumexp(x, dim=-2, keepdim=True)
    return x.exp()


def per_matrix(fn, a: torch.Tensor) -> torch.Tensor:
    """Apply `fn` to every `(n, n)` matrix of `a (..., n, n)` in a Python loop."""
    flat = a.reshape(-1, *a.shape[-2:])
    return torch.stack([fn(m) for m in flat]).reshape(a.shape)
