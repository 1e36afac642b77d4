import re

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rankcollapse.measures import (composite_norm, matrix_norm, path_products, relative_residual,
                               residual, row_entropy, sample_paths)

matrices = st.tuples(st.integers(1, 3), st.integers(1, 7), st.integers(1, 6), st.integers(0, 999))


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@given(matrices)
def test_composite_norm_matches_loops(spec):
    b, n, d, seed = spec
    m = randn(b, n, d, seed=seed)
    for k in range(b):
        rows = [sum(abs(float(m[k, i, j])) for j in range(d)) for i in range(n)]
        cols = [sum(abs(float(m[k, i, j])) for i in range(n)) for j in range(d)]
        assert composite_norm(m)[k].item() == pytest.approx((max(rows) * max(cols)) ** 0.5)


def test_other_norms_match_numpy():
    m = randn(4, 5, seed=1)
    assert matrix_norm(m, "fro").item() == pytest.approx(np.linalg.norm(m.numpy(), "fro"))
    assert matrix_norm(m, "spectral").item() == pytest.approx(np.linalg.norm(m.numpy(), 2))
    with pytest.raises(ValueError, match="unknown norm"):
        matrix_norm(m, "nuclear")


@given(matrices)
def test_mean_residual_removes_the_token_mean(spec):
    b, n, d, seed = spec
    x = randn(b, n, d, seed=seed)
    r = residual(x, "mean")
    torch.testing.assert_close(r.sum(-2), torch.zeros(b, d, dtype=x.dtype))
    torch.testing.assert_close(x - r, x.mean(-2, keepdim=True).expand_as(x))


def test_rank1_residual_matches_numpy_svd():
    x = randn(6, 4, seed=2)
    u, s, vh = np.linalg.svd(x.numpy(), full_matrices=False)
    expected = x.numpy() - s[0] * np.outer(u[:, 0], vh[0])
    np.testing.assert_allclose(residual(x, "rank1").numpy(), expected, atol=1e-12)
    assert np.linalg.matrix_rank(x.numpy() - residual(x, "rank1").numpy()) == 1


def test_relative_residual_is_zero_for_identical_tokens_and_scale_free():
    tokens = randn(1, 5, seed=3).expand(7, 5)
    for norm in ("composite", "fro", "spectral"):
        assert relative_residual(tokens, norm).item() < 1e-12
        assert relative_residual(tokens, norm, kind="rank1").item() < 1e-12
    x = randn(7, 5, seed=4)
    assert relative_residual(3.7 * x).item() == pytest.approx(relative_residual(x).item())
    with pytest.raises(ValueError, match="unknown residual"):
        residual(x, "median")


def test_sample_paths_are_distinct_increasing_and_reproducible():
    p = sample_paths(10, 4, 6, 200, 8, torch.Generator().manual_seed(0))
    assert p.layers.shape == p.heads.shape == (200, 6) and p.samples.shape == (200,)
    assert (p.layers[:, 1:] > p.layers[:, :-1]).all()
    assert p.layers.min() >= 0 and p.layers.max() < 10
    assert p.heads.max() < 4 and p.samples.max() < 8
    q = sample_paths(10, 4, 6, 200, 8, torch.Generator().manual_seed(0))
    assert torch.equal(p.layers, q.layers) and torch.equal(p.heads, q.heads)
    assert len({tuple(row) for row in p.layers.tolist()}) > 100  # not one path repeated
    with pytest.raises(ValueError, match="depth"):
        sample_paths(3, 1, 4, 1, 1)


def test_path_products_match_a_plain_loop():
    attn = torch.softmax(randn(5, 3, 2, 4, 4, seed=5), dim=-1)
    paths = sample_paths(5, 2, 3, 20, 3, torch.Generator().manual_seed(1))
    got = path_products(attn, paths)
    for k in range(20):
        expected = torch.eye(4, dtype=attn.dtype)
        for layer, head in zip(paths.layers[k].tolist(), paths.heads[k].tolist()):
            expected = expected @ attn[layer, paths.samples[k], head]
        torch.testing.assert_close(got[k], expected)
    with pytest.raises(ValueError, match="layers, batch, heads"):
        path_products(attn[0], paths)


@pytest.mark.parametrize("kind", ["mean", "rank1"])
def test_masked_residual_equals_residual_of_the_real_tokens(kind):
    x = randn(2, 6, 4, seed=6)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    got = residual(x, kind, mask)
    torch.testing.assert_close(got[1, :4], residual(x[1, :4], kind))
    assert (got[1, 4:] == 0).all()
    torch.testing.assert_close(got[0], residual(x[0], kind))
    rel = relative_residual(x, "fro", kind, mask)
    assert rel[1].item() == pytest.approx(relative_residual(x[1, :4], "fro", kind).item())


def test_signal_order_multiplies_later_layers_on_the_left():
    attn = torch.softmax(randn(3, 1, 1, 4, 4, seed=7), -1)
    paths = sample_paths(3, 1, 3, 1, 1, torch.Generator().manual_seed(0))
    torch.testing.assert_close(path_products(attn, paths, "signal")[0],
                               attn[2, 0, 0] @ attn[1, 0, 0] @ attn[0, 0, 0])
    torch.testing.assert_close(path_products(attn, paths)[0],
                               attn[0, 0, 0] @ attn[1, 0, 0] @ attn[2, 0, 0])
    with pytest.raises(ValueError, match="order"):
        path_products(attn, paths, "random")


@pytest.mark.parametrize("norm", ["composite", "fro", "spectral"])
def test_a_norm_of_a_vector_names_the_shape_and_the_way_out(norm):
    """composite_norm of a 1-D input used to fail with "Dimension out of range"."""
    with pytest.raises(ValueError, match=rf"{norm} norm needs a matrix \(\.\.\., rows, cols\); "
                                         r"got shape \(5,\).*\[None\]"):
        matrix_norm(randn(5), norm)
    with pytest.raises(ValueError, match=r"composite norm needs a matrix"):
        composite_norm(randn(5))


@pytest.mark.parametrize("mask_shape", [(2, 4), (2, 6), (4,), (3, 5)])
def test_a_mask_of_the_wrong_shape_is_named_in_residuals_and_entropy(mask_shape):
    """It used to fail with "The size of tensor a (5) must match the size of tensor b (4)"."""
    mask = torch.ones(mask_shape, dtype=torch.bool)
    shape = re.escape(f"mask shape {mask_shape}")
    with pytest.raises(ValueError, match=rf"{shape} does not match x \(2, 5, 4\): expected "
                                         r"\(\.\.\., 5\).*one bool per token"):
        relative_residual(randn(2, 5, 4), mask=mask)
    with pytest.raises(ValueError, match=rf"{shape} does not match attn \(2, 5, 5\): expected "
                                         r"\(\.\.\., 5\)"):
        row_entropy(torch.full((2, 5, 5), 0.2), mask)


def test_a_mask_shared_by_the_batch_is_still_accepted():
    x, mask = randn(2, 5, 4), torch.tensor([True] * 4 + [False])
    torch.testing.assert_close(relative_residual(x, mask=mask),
                               relative_residual(x, mask=mask.expand(2, 5)))
    attn = torch.full((2, 5, 5), 0.2, dtype=torch.float64)
    torch.testing.assert_close(row_entropy(attn, mask), row_entropy(attn, mask.expand(2, 5)))


@pytest.mark.parametrize("sampled,problem", [
    ((3, 4, 2, 5, 2), r"paths\.heads holds head \d+, but attn has 2 heads"),
    ((3, 2, 2, 5, 7), r"paths\.samples holds sample \d+, but attn has a batch of 2"),
    ((6, 2, 2, 5, 2), r"paths\.layers holds layer \d+, but attn has 3 layers"),
])
def test_path_products_names_paths_sampled_for_another_attention(sampled, problem):
    """It used to fail with "index 2 is out of bounds for dimension 2 with size 2"."""
    attn = torch.softmax(randn(3, 2, 2, 4, 4), -1)
    paths = sample_paths(*sampled, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=rf"{problem}.*sample_paths\(n_layers=3, n_heads=2, "
                                         r"depth, n_paths, batch_size=2\)"):
        path_products(attn, paths)
