import math

import numpy as np
import pytest
import torch

from rankcollapse.measures import residual
from rankcollapse.normalizations import sinkhorn, softmax
from rankcollapse.theory import (cubic_constant, depth_bound_log, linearized_sinkhorn,
                                 linearized_softmax, one_layer_residual)

EPS = np.logspace(-4, -1, 7)


def slope(xs, ys):
    return np.polyfit(np.log(xs), np.log(ys), 1)[0]


@pytest.mark.parametrize("exact, linear", [(lambda a: sinkhorn(a, 200), linearized_sinkhorn),
                                           (softmax, linearized_softmax)])
def test_linearization_error_shrinks_like_eps_squared(exact, linear):
    a = torch.randn(16, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    errors = [(exact(e * a) - linear(e * a)).norm().item() for e in EPS]
    assert slope(EPS, errors) == pytest.approx(2.0, abs=0.05)


def test_linearizations_are_stochastic_like_their_operators():
    a = torch.randn(6, 6, dtype=torch.float64)
    ones = torch.ones(6, dtype=torch.float64)
    torch.testing.assert_close(linearized_sinkhorn(a).sum(0), ones)
    torch.testing.assert_close(linearized_sinkhorn(a).sum(1), ones)
    torch.testing.assert_close(linearized_softmax(a).sum(1), ones)


def one_layer(x, w_q, w_k, w_v, normalize):
    """The real layer: normalize(X W_q (X W_k)^T / sqrt(d_qk)) X W_v."""
    logits = x @ w_q @ (x @ w_k).T / math.sqrt(w_q.shape[1])
    return normalize(logits) @ x @ w_v


@pytest.mark.parametrize("normalize", [lambda a: sinkhorn(a, 200), softmax])
def test_one_layer_residual_prediction_is_first_order_exact(normalize):
    """Scaling X by s: the true residual and the prediction agree up to O(s^5), i.e. the
    relative error shrinks like s^2, and the residual itself is cubic (slope 3)."""
    g = torch.Generator().manual_seed(1)
    n, d, dqk = 12, 8, 4
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    w_q, w_k = (torch.randn(d, dqk, generator=g, dtype=torch.float64) for _ in range(2))
    w_v = torch.randn(d, d, generator=g, dtype=torch.float64)
    scales = np.logspace(-3, -1, 5)
    true = [residual(one_layer(s * x, w_q, w_k, w_v, normalize)) for s in scales]
    pred = [one_layer_residual(s * x, w_q @ w_k.T, w_v, dqk) for s in scales]
    rel = [((t - p).norm() / p.norm()).item() for t, p in zip(true, pred)]
    assert slope(scales, rel) == pytest.approx(2.0, abs=0.1)
    assert slope(scales, [t.norm().item() for t in true]) == pytest.approx(3.0, abs=0.05)
    c = cubic_constant(w_q @ w_k.T, w_v, n, dqk)
    r = residual(scales[0] * x)
    spec = torch.linalg.matrix_norm
    assert spec(pred[0], ord=2) <= c * spec(r, ord=2) ** 3 * (1 + 1e-9)


def test_depth_bound_log_recursion():
    logs = depth_bound_log(math.log(0.1), [2.0, 0.5])
    expected = [math.log(0.1), math.log(2.0 * 0.1**3), math.log(0.5 * (2.0 * 0.1**3) ** 3)]
    np.testing.assert_allclose(logs.numpy(), expected)
