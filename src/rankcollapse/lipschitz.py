"""Local Lipschitz constants of one self-attention layer.

The local Lipschitz constant of a map f at X is the spectral norm of its Jacobian there,
`||J_f(X)||_2` (X and f(X) flattened, Euclidean norms). For attention, X is the `(n, d)`
matrix of tokens; J is `(n d) x (n d)`. Two facts to keep apart:

- the softmax *function* (logits to probabilities) is 1/2-Lipschitz in every l_p norm;
- dot-product self-attention, as a map of the tokens, is *not* globally Lipschitz (Kim et
  al. 2021): the logits are quadratic in X, so the local constant grows without bound with
  the scale of the tokens. Only local constants, at given inputs, are measured here.

`layer_map` rebuilds one layer as a plain function of the tokens from a `SelfAttention`'s
weights, with Sinkhorn computed by its definition (`sinkhorn_reference`), so that forward-
and reverse-mode derivatives exist to any order. `jacobian_norm` is power iteration on
`J^T J` (a Jacobian-vector product, then a vector-Jacobian product, per step);
`jacobian_norm_exact` builds the whole Jacobian (small cases only, to check the former).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch.func import jvp, vjp

from .models import SelfAttention
from .normalizations import NORMALIZATIONS, sinkhorn_reference

Map = Callable[[torch.Tensor], torch.Tensor]


def layer_map(layer: SelfAttention, normalization: str | None = None,
              n_iter: int | None = None) -> Map:
    """The layer as a function of its tokens `(n, d)` -> `(n, d)`, in float64, with the
    layer's weights and its normalization (or `normalization`) and iterations (or
    `n_iter`); independent of `SelfAttention.forward`, which the tests compare it with."""
    name = normalization or layer.normalization
    if name not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {name!r}; valid: {', '.join(NORMALIZATIONS)}")
    iterations = n_iter or layer.n_iter
    heads, d_head = layer.n_heads, layer.d_head
    w = layer.qkv.weight.detach().double()
    d = w.shape[1]
    wq, wk, wv = (w[i * d:(i + 1) * d].reshape(heads, d_head, d) for i in range(3))
    wo = layer.out.weight.detach().double()
    if layer.qkv.bias is not None or layer.out.bias is not None:
        raise ValueError("layer_map supports attention layers without biases (as built here)")

    def f(x: torch.Tensor) -> torch.Tensor:
        q, k, v = (torch.einsum("hed,nd->hne", m, x) for m in (wq, wk, wv))
        logits = torch.einsum("hne,hme->hnm", q, k) / math.sqrt(d_head)
        attn = (torch.softmax(logits, -1) if name == "softmax"
                else sinkhorn_reference(logits, iterations))
        mixed = torch.einsum("hnm,hme->nhe", attn, v).reshape(x.shape[0], d)
        return mixed @ wo.T

    return f


def jacobian_norm(f: Map, x: torch.Tensor, max_iter: int = 100, rtol: float = 1e-6,
                  seed: int = 0) -> float:
    """`||J_f(x)||_2` by power iteration on `J^T J` from a random start (reproducible from
    `seed`), until the estimate changes by less than `rtol` (relative) or `max_iter` steps."""
    x = x.detach().double()
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(x.shape, generator=g, dtype=torch.float64)
    v /= v.norm()
    _, pullback = vjp(f, x)
    estimate = 0.0
    for _ in range(max_iter):
        _, u = jvp(f, (x,), (v,))  # J v
        (w,) = pullback(u)  # J^T J v
        new = math.sqrt(float(torch.dot(v.flatten(), w.flatten())))
        norm = float(w.norm())
        if norm == 0.0:
            return 0.0
        v = w / norm
        if abs(new - estimate) <= rtol * new:
            return new
        estimate = new
    return estimate


def jacobian_norm_exact(f: Map, x: torch.Tensor) -> float:
    """`||J_f(x)||_2` from the whole Jacobian (its largest singular value): small cases."""
    x = x.detach().double()
    jac = torch.autograd.functional.jacobian(f, x).reshape(x.numel(), x.numel())
    return float(torch.linalg.matrix_norm(jac, ord=2))
