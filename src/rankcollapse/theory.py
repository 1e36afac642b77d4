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
from dataclasses import dataclass

import torch

from .measures import residual
from .normalizations import normalize


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


# ----------------------------------------------------------------------------- heads


@dataclass(frozen=True)
class HeadWeights:
    """One attention head: w_q, w_k `(d, d_qk)` and w_v `(d, d)`."""

    w_q: torch.Tensor
    w_k: torch.Tensor
    w_v: torch.Tensor

    @property
    def d_qk(self) -> int:
        return self.w_q.shape[-1]

    @property
    def w_qk(self) -> torch.Tensor:
        return self.w_q @ self.w_k.T

    def constant(self, n: int) -> float:
        """`cubic_constant` of this head for n tokens."""
        return cubic_constant(self.w_qk, self.w_v, n, self.d_qk)


def random_head(d: int, d_qk: int, logit_std: float, generator: torch.Generator) -> HeadWeights:
    """Gaussian head whose logits have standard deviation `logit_std` for unit-variance
    tokens (the book's one *logit scale*, as in `models.init_random_`): W_q, W_k entries
    N(0, logit_std / d), so q.k / sqrt(d_qk) has variance logit_std^2; W_v entries N(0, 1/d)."""
    g = lambda *s: torch.randn(*s, generator=generator, dtype=torch.float64)  # noqa: E731
    qk = math.sqrt(logit_std / d)
    return HeadWeights(g(d, d_qk) * qk, g(d, d_qk) * qk, g(d, d) / math.sqrt(d))


def head_logits(x: torch.Tensor, head: HeadWeights) -> torch.Tensor:
    """X W_q (X W_k)^T / sqrt(d_qk), `(..., n, n)`."""
    return x @ head.w_q @ (x @ head.w_k).transpose(-1, -2) / math.sqrt(head.d_qk)


def attention_layer(x: torch.Tensor, head: HeadWeights, normalization: str,
                    n_iter: int) -> torch.Tensor:
    """One pure attention layer (no skip, FFN or LayerNorm): P X W_v, P = normalize(logits)."""
    return normalize(head_logits(x, head), normalization, n_iter) @ x @ head.w_v
