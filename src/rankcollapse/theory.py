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

import numpy as np
import pandas as pd
import torch

from .attention import normalize
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


# ----------------------------------------------------------------------------- experiments


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


def random_head(d: int, d_qk: int, qk_std: float, generator: torch.Generator) -> HeadWeights:
    """Gaussian head: W_q, W_k entries N(0, qk_std^2 / d), W_v entries N(0, 1 / d)."""
    g = lambda *s: torch.randn(*s, generator=generator, dtype=torch.float64)  # noqa: E731
    return HeadWeights(g(d, d_qk) * qk_std / math.sqrt(d), g(d, d_qk) * qk_std / math.sqrt(d),
                       g(d, d) / math.sqrt(d))


def head_logits(x: torch.Tensor, head: HeadWeights) -> torch.Tensor:
    """X W_q (X W_k)^T / sqrt(d_qk), `(..., n, n)`."""
    return x @ head.w_q @ (x @ head.w_k).transpose(-1, -2) / math.sqrt(head.d_qk)


def attention_layer(x: torch.Tensor, head: HeadWeights, normalization: str,
                    n_iter: int = 50) -> torch.Tensor:
    """One pure attention layer (no skip, FFN or LayerNorm): P X W_v, P = normalize(logits)."""
    return normalize(head_logits(x, head), normalization, n_iter) @ x @ head.w_v


def one_layer_table(x0: torch.Tensor, direction: torch.Tensor, scales, head: HeadWeights,
                    normalizations=("softmax", "sinkhorn"), n_iter: int = 50) -> pd.DataFrame:
    """Inputs X = x0 + s * direction for each scale s; per normalization, the spectral norms
    of the input residual, the true output residual, the first-order prediction and the
    bound c ||res(X)||^3, and the spectral norm of the centred logits C A C (the part of the
    logits that no constant added to a row or a column can remove)."""
    spec = lambda m: float(torch.linalg.matrix_norm(m, ord=2))  # noqa: E731
    n = x0.shape[-2]
    rows = []
    for s in scales:
        x = x0 + s * direction
        r_in = spec(residual(x))
        predicted = spec(one_layer_residual(x, head.w_qk, head.w_v, head.d_qk))
        for name in normalizations:
            rows.append({"scale": s, "normalization": name, "input_residual": r_in,
                         "output_residual": spec(residual(attention_layer(x, head, name, n_iter))),
                         "predicted": predicted, "bound": head.constant(n) * r_in**3,
                         "logit_norm": spec(residual(residual(head_logits(x, head)).mT).mT)})
    return pd.DataFrame(rows)


def depth_table(x: torch.Tensor, heads: list[HeadWeights],
                normalizations=("softmax", "sinkhorn"), n_iter: int = 50) -> pd.DataFrame:
    """Pure attention stack, one head per layer: measured log10 ||res(X_l)||_2 per layer and
    the first-order L-layer bound log10 of prod c_l^(3^(L-l)) ||res(X_0)||^(3^L)."""
    spec = lambda m: float(torch.linalg.matrix_norm(m, ord=2))  # noqa: E731
    n = x.shape[-2]
    r0 = spec(residual(x))
    bound = depth_bound_log(math.log(r0), [h.constant(n) for h in heads]) / math.log(10)
    rows = []
    for name in normalizations:
        h = x
        for layer in range(len(heads) + 1):
            if layer:
                h = attention_layer(h, heads[layer - 1], name, n_iter)
            rows.append({"normalization": name, "layer": layer,
                         "log10_residual": math.log10(max(spec(residual(h)), 1e-300)),
                         "log10_bound": float(bound[layer])})
    return pd.DataFrame(rows)


def linearization_errors(a: torch.Tensor, eps_values, n_iter: int = 50) -> pd.DataFrame:
    """Frobenius error of each first-order expansion against the real operator at logits
    eps * a, for each eps: columns eps, normalization, error."""
    exact = {"softmax": lambda m: normalize(m, "softmax"),
             "sinkhorn": lambda m: normalize(m, "sinkhorn", n_iter)}
    linear = {"softmax": linearized_softmax, "sinkhorn": linearized_sinkhorn}
    return pd.DataFrame([{"eps": e, "normalization": k,
                          "error": float((exact[k](e * a) - linear[k](e * a)).norm())}
                         for e in eps_values for k in exact])


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])
