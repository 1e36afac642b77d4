"""Local Lipschitz constants: the rebuilt layer is the module's layer, power iteration finds
the largest singular value of the whole Jacobian, and attention is not globally Lipschitz."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rankcollapse.lipschitz import jacobian_norm, jacobian_norm_exact, layer_map
from rankcollapse.models import SelfAttention


def layer(name: str, d=16, heads=4, seed=0, n_iter=50) -> SelfAttention:
    torch.manual_seed(seed)
    return SelfAttention(d, heads, name, n_iter).double()


@pytest.mark.parametrize("name", ["softmax", "sinkhorn"])
def test_the_rebuilt_layer_is_the_module(name):
    attn = layer(name)
    x = torch.randn(7, 16, dtype=torch.float64)
    with torch.no_grad():
        expected = attn(x[None])[0]
    torch.testing.assert_close(layer_map(attn)(x), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["softmax", "sinkhorn"])
def test_power_iteration_matches_the_whole_jacobian(name):
    attn = layer(name, seed=1)
    x = 2 * torch.randn(5, 16, dtype=torch.float64)
    f = layer_map(attn)
    assert jacobian_norm(f, x, rtol=1e-10, max_iter=2000) == pytest.approx(
        jacobian_norm_exact(f, x), rel=1e-6)


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 6), st.integers(2, 6), st.integers(0, 10_000))
def test_a_linear_map_gives_its_largest_singular_value(rows, cols, seed):
    """An independent reference: numpy's SVD of the matrix of a linear map."""
    a = torch.randn(rows * cols, rows * cols, generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64)
    f = lambda x: (a @ x.reshape(-1)).reshape(rows, cols)  # noqa: E731
    expected = np.linalg.svd(a.numpy(), compute_uv=False)[0]
    assert jacobian_norm_exact(f, torch.zeros(rows, cols)) == pytest.approx(expected, rel=1e-10)
    assert jacobian_norm(f, torch.zeros(rows, cols), rtol=1e-12, max_iter=5000) == \
        pytest.approx(expected, rel=1e-5)


def test_attention_is_not_globally_lipschitz():
    """The logits are quadratic in the tokens: the local constant grows with their scale."""
    f = layer_map(layer("softmax", seed=2))
    x = torch.randn(6, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    constants = [jacobian_norm(f, s * x, rtol=1e-8) for s in (1.0, 4.0, 16.0)]
    assert constants[0] < constants[1] < constants[2]


def test_bad_input_is_refused():
    attn = layer("softmax")
    with pytest.raises(ValueError, match="unknown normalization"):
        layer_map(attn, "sparsemax")
    biased = SelfAttention(16, 4, bias=True)
    with pytest.raises(ValueError, match="without biases"):
        layer_map(biased)
