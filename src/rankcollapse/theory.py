"""First-order (small-logit) theory of one attention layer, and the depth bound built on it.

This book's derivation (checked numerically in the tests and in chapter 3), not the paper's
text. With J = 11^T / n and C = I - J, for logits eps * A and eps -> 0:

    sinkhorn(eps A) = J + (eps / n) C A C + O(eps^2)
    softmax(eps A)  = J + (eps / n) A C   + O(eps^2)

For one layer P X W_v with logits X W_qk X^T / sqrt(d_qk) and R = C X (the mean residual),
both give the same first-order residual (1 / (n sqrt(d_qk))) R W_qk R^T R W_v: cubic in R.
"""

from __future__ import annotations

import math

import torch

from .rank import residual


def _centering(n: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(J, C) = (11^T / n, I - J) with the dtype and device of `like`."""
    j = torch.full((n, n), 1.0 / n, dtype=like.dtype, device=like.device)
    return j, torch.eye(n, dtype=like.dtype, device=like.device) - j


def linearized_sinkhorn(a: torch.Tensor) -> torch.Tensor:
    """J + C A C / n: Sinkhorn's first-order expansion around zero logits. a `(..., n, n)`."""
    j, c = _centering(a.shape[-1], a)
    return j + c @ a @ c / a.shape[-1]


def linearized_softmax(a: torch.Tensor) -> torch.Tensor:
    """J + A C / n: softmax's first-order expansion around zero logits. a `(..., n, n)`."""
    j, c = _centering(a.shape[-1], a)
    return j + a @ c / a.shape[-1]


def one_layer_residual(x: torch.Tensor, w_qk: torch.Tensor, w_v: torch.Tensor,
                       d_qk: int) -> torch.Tensor:
    """First-order residual of one attention layer: (1 / (n sqrt(d_qk))) R W_qk R^T R W_v.

    x `(..., n, d)`; w_qk `(d, d)` = W_q W_k^T; w_v `(d, d_v)`; d_qk the query/key width in
    the logit scaling X W_qk X^T / sqrt(d_qk). The same prediction for softmax and Sinkhorn.
    """
    r = residual(x, "mean")
    return r @ w_qk @ r.transpose(-1, -2) @ r @ w_v / (x.shape[-2] * math.sqrt(d_qk))


def cubic_constant(w_qk: torch.Tensor, w_v: torch.Tensor, n: int, d_qk: int) -> float:
    """c in ||res(SA(X))||_2 <= c ||res(X)||_2^3 at first order: ||W_qk||_2 ||W_v||_2 / (n sqrt(d_qk)).

    Follows from `one_layer_residual` by sub-multiplicativity of the spectral norm.
    """
    spec = torch.linalg.matrix_norm
    return float(spec(w_qk, ord=2) * spec(w_v, ord=2)) / (n * math.sqrt(d_qk))


def depth_bound_log(log_r0: float | torch.Tensor, constants: list[float]) -> torch.Tensor:
    """log of the L-layer bound r_L <= prod_l c_l^(3^(L-l)) r_0^(3^L), from r_l <= c_l r_{l-1}^3.

    Returned as a log (natural) because the bound over- or underflows after a few layers.
    Element l of the result is the bound after l layers (l = 0..L).
    """
    logs = [torch.as_tensor(log_r0, dtype=torch.float64)]
    for c in constants:
        logs.append(math.log(c) + 3 * logs[-1])
    return torch.stack(logs)
