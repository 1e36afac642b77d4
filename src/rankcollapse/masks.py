"""Key-padding masks: `(..., n)` bool, True on real tokens.

Both normalizations, their fast engine and the measures use these, so that a padded token
means the same thing everywhere: no attention goes to it, and it takes no part in a residual
(what a padded query's own row holds differs: zero under Sinkhorn, uniform under softmax).
"""

from __future__ import annotations

import torch


def pair_mask(mask: torch.Tensor) -> torch.Tensor:
    """(..., n) key-padding mask -> (..., n, n) mask of real (query, key) pairs."""
    return mask.unsqueeze(-1) & mask.unsqueeze(-2)


def log_normalize(x: torch.Tensor, dim: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """One Sinkhorn half-step in the log domain: x - logsumexp(x, dim), over real tokens.

    dim -1 normalizes rows, -2 columns. Padded lines (all -inf) are filled with zeros inside
    the logsumexp so that neither the value nor its gradient becomes NaN."""
    if mask is None:
        return x - torch.logsumexp(x, dim=dim, keepdim=True)
    padded = ~mask.unsqueeze(-1 if dim == -1 else -2)
    return x - torch.logsumexp(x.masked_fill(padded, 0.0), dim=dim, keepdim=True)


def check_mask(mask: torch.Tensor, batch_shape: torch.Size, n: int,
               check_values: bool = True, of: str = "the input") -> None:
    """Raise naming the problem unless `mask` is a bool `(..., n)` tensor broadcastable to
    `batch_shape + (n,)` with (when `check_values`: one host sync) at least one real token
    per sample. `of` names the input the mask belongs to, for the message."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a bool torch.Tensor of shape (..., {n}); "
                        f"got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True = real token), got {mask.dtype}")
    if mask.dim() == 0 or mask.shape[-1] != n:
        raise _mismatch(mask, batch_shape, n, of)
    try:
        broadcast = torch.broadcast_shapes(mask.shape[:-1], batch_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != batch_shape:
        raise _mismatch(mask, batch_shape, n, of)
    if check_values and not bool(mask.any(-1).all()):
        raise ValueError("mask has a sample with no real token (an all-False row); "
                         "attention over zero tokens is undefined")


def _mismatch(mask: torch.Tensor, batch_shape: torch.Size, n: int, of: str) -> ValueError:
    return ValueError(f"mask shape {tuple(mask.shape)} does not match {of}: expected (..., {n}) "
                      f"broadcastable to {tuple(batch_shape)} + ({n},). Pass the mask of these "
                      f"very inputs: one bool per token, True on real tokens")
