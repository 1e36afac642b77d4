import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rankcollapse.normalizations import (marginal_errors, normalize, sinkhorn,
                                         sinkhorn_reference, softmax)
from rankcollapse._sinkhorn_engine import sinkhorn_forward
from rankcollapse.timing import saved_bytes

from references import per_matrix, sinkhorn_loop


shapes = st.tuples(st.integers(1, 3), st.integers(1, 9))  # (batch, n)
scales = st.sampled_from([0.1, 1.0, 3.0])
seeds = st.integers(0, 2**16)


def logits(batch, n, scale, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, n, generator=g, dtype=dtype) * scale


# ----------------------------------------------------------------------------- references


def test_one_row_half_step_is_softmax():
    a = logits(4, 7, 2.0, 0)
    torch.testing.assert_close(sinkhorn(a, half_steps=1), softmax(a), rtol=0, atol=1e-15)
    torch.testing.assert_close(sinkhorn(a.float(), half_steps=1), softmax(a.float()))


def test_full_iterations_equal_twice_the_half_steps():
    a = logits(2, 6, 1.0, 1)
    torch.testing.assert_close(sinkhorn(a, n_iter=7), sinkhorn(a, half_steps=14))


@given(shapes, scales, seeds, st.integers(1, 12))
def test_batched_equals_plain_loop_float64(shape, scale, seed, half_steps):
    a = logits(*shape, scale, seed)
    expected = per_matrix(lambda m: sinkhorn_loop(m, half_steps), a)
    torch.testing.assert_close(sinkhorn(a, half_steps=half_steps), expected,
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("std", [0.5, 2.0, 3.0])
def test_float32_matches_float64_reference(std):
    a = logits(16, 128, std, 2)
    p64 = sinkhorn_reference(a, 50)
    p32 = sinkhorn(a.float(), n_iter=50)
    assert (p32.double() - p64).abs().max() < 1e-5
    for e32, e64 in zip(marginal_errors(p32.double()), marginal_errors(p64)):
        assert ((e32 - e64).abs() <= 1e-5).all()


def test_paper_regime_is_doubly_stochastic_in_float32():
    """n = 128, logit std up to 2, 50 iterations: both marginals within 1e-5 of one."""
    p = sinkhorn(logits(16, 128, 2.0, 3, torch.float32), n_iter=50)
    rows, cols = marginal_errors(p)
    assert rows.max() < 1e-5 and cols.max() < 1e-5


# ----------------------------------------------------------------------------- properties


@given(shapes, scales, seeds, st.integers(0, 8), st.floats(-50, 50))
def test_invariant_to_constant_added_to_a_row_or_column(shape, scale, seed, idx, c):
    """Row constants cancel exactly in every iterate (rows are normalized first); column
    constants only in the limit, so that case is checked after many iterations."""
    a = logits(*shape, scale, seed)
    i = idx % shape[1]
    row, col = a.clone(), a.clone()
    row[:, i, :] += c
    col[:, :, i] += c
    torch.testing.assert_close(sinkhorn(row, 5), sinkhorn(a, 5), rtol=1e-9, atol=1e-11)
    if scale <= 1.0:
        torch.testing.assert_close(sinkhorn(col, 300), sinkhorn(a, 300), rtol=0, atol=1e-6)


@given(shapes, scales, seeds)
def test_permutation_equivariance(shape, scale, seed):
    a = logits(*shape, scale, seed)
    g = torch.Generator().manual_seed(seed)
    pr, pc = torch.randperm(shape[1], generator=g), torch.randperm(shape[1], generator=g)
    permuted = a[:, pr][:, :, pc]
    torch.testing.assert_close(sinkhorn(permuted, 8), sinkhorn(a, 8)[:, pr][:, :, pc])
    torch.testing.assert_close(softmax(permuted), softmax(a)[:, pr][:, :, pc])


@given(shapes, st.sampled_from([10.0, 100.0, 300.0, 1e4]), seeds, st.booleans())
def test_extreme_logits_match_the_log_domain_reference(shape, scale, seed, masked):
    """Large logits take the log-domain path: finite, non-negative, and the same matrix as the
    float64 log-domain loop (so the marginals too), not merely some finite output."""
    a = logits(*shape, scale, seed, torch.float32)
    a[:, 0, :] += 400.0  # one row far above the others
    mask = None
    if masked and shape[1] > 1:
        mask = torch.ones(shape, dtype=torch.bool)
        mask[:, -1] = False
    p = sinkhorn(a, 50, mask=mask)
    assert torch.isfinite(p).all() and (p >= 0).all()
    k = shape[1] - 1 if mask is not None else shape[1]
    expected = per_matrix(lambda m: sinkhorn_loop(m, 100), a[:, :k, :k].double())
    assert (p[:, :k, :k].double() - expected).abs().max() < 1e-4


def test_marginal_error_shrinks_with_iterations():
    a = logits(8, 32, 1.0, 4)
    errors = [marginal_errors(sinkhorn(a, k))[0].max().item() for k in (1, 3, 10)]
    assert errors[0] > errors[1] > errors[2]


# ----------------------------------------------------------------------------- masks


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sinkhorn_mask_balances_the_real_block_only(dtype):
    a = logits(3, 8, 1.0, 5, dtype)
    lengths = [8, 5, 1]
    mask = torch.arange(8)[None, :] < torch.tensor(lengths)[:, None]
    p = sinkhorn(a, 20, mask=mask)
    for b, k in enumerate(lengths):
        torch.testing.assert_close(p[b, :k, :k], sinkhorn(a[b, :k, :k], 20))
        assert (p[b, k:, :] == 0).all() and (p[b, :, k:] == 0).all()


def test_softmax_mask_ignores_padded_keys():
    a = logits(2, 6, 1.0, 6)
    mask = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])
    p = softmax(a, mask)
    torch.testing.assert_close(p[0, :4, :4], torch.softmax(a[0, :4, :4], dim=-1))
    torch.testing.assert_close(p[0, 4:, :4], torch.full((2, 4), 0.25, dtype=a.dtype))
    assert (p[0, :, 4:] == 0).all()
    torch.testing.assert_close(p[1], torch.softmax(a[1], dim=-1))


def test_masked_logits_may_hold_inf():
    a = logits(1, 5, 1.0, 7)
    mask = torch.tensor([[True, True, True, False, False]])
    a[0, 3:, :] = float("-inf")
    a[0, :, 3:] = float("inf")
    assert torch.isfinite(sinkhorn(a, 10, mask=mask)).all()
    p = softmax(a, mask)
    assert torch.isfinite(p).all()
    torch.testing.assert_close(p[0, :3, :3], torch.softmax(a[0, :3, :3], dim=-1))


# ----------------------------------------------------------------------------- dtypes, errors


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_returns_input_dtype(dtype):
    a = logits(2, 8, 1.0, 8, torch.float32)
    p = sinkhorn(a.to(dtype), 10)
    assert p.dtype == dtype
    torch.testing.assert_close(p.float(), sinkhorn(a, 10), atol=1e-2, rtol=1e-2)
    assert softmax(a.to(dtype)).dtype == dtype


@pytest.mark.parametrize("bad, match", [
    (torch.zeros(4), "shape"),
    (torch.zeros(2, 3, 4), "square"),
    (torch.zeros(2, 0, 0), "empty"),
    (torch.tensor([[0.0, float("nan")], [0.0, 0.0]]), "NaN"),
    (torch.tensor([[0.0, float("inf")], [0.0, 0.0]]), "inf"),
])
@pytest.mark.parametrize("fn", [softmax, sinkhorn])
def test_bad_logits_raise_clear_errors(fn, bad, match):
    with pytest.raises(ValueError, match=match):
        fn(bad)


def test_bad_masks_and_arguments_raise():
    a = torch.zeros(2, 4, 4)
    with pytest.raises(ValueError, match="mask shape"):
        sinkhorn(a, mask=torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="no real token"):
        sinkhorn(a, mask=torch.tensor([[True] * 4, [False] * 4]))
    with pytest.raises(TypeError, match="bool"):
        softmax(a, mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="n_iter must be between 1 and 10000; got 0"):
        sinkhorn(a, n_iter=0)
    with pytest.raises(ValueError, match="unknown normalization"):
        normalize(a, "sparsemax")


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(n_iter=1.5), TypeError, r"n_iter must be a positive integer .* got 1.5 \(float\)"),
    (dict(n_iter=0.5), TypeError, "n_iter must be a positive integer"),
    (dict(n_iter="50"), TypeError, r"got '50' \(str\)"),
    (dict(n_iter=True), TypeError, "n_iter must be a positive integer"),
    (dict(n_iter=10**12), ValueError, "n_iter must be between 1 and 10000"),
    (dict(half_steps=0), ValueError, "half_steps must be between 1 and 20000"),
    (dict(half_steps=2.0), TypeError, "half_steps must be a positive integer"),
    (dict(mask=[True, True, True, True]), TypeError, "mask must be a bool torch.Tensor"),
    (dict(mask=torch.tensor(True)), ValueError, r"mask shape \(\) does not match"),
    (dict(mask=torch.ones(3, 4, dtype=torch.bool)), ValueError, r"broadcastable to \(2,\)"),
])
def test_every_bad_argument_gets_a_clear_error(kwargs, error, message):
    with pytest.raises(error, match=message):
        sinkhorn(torch.zeros(2, 4, 4), **kwargs)


def test_the_forward_without_gradients_keeps_no_state_per_step():
    """Memory flat in n_iter: the peak of the allocations made during a no-grad call does not
    grow with the number of iterations."""
    import tracemalloc

    a = torch.randn(4, 16, 16)

    def peak(n_iter):
        # tracemalloc sees the Python objects that a history of u and v would hold (one
        # tensor per step); their storage, outside it, would come with them
        tracemalloc.start()
        with torch.no_grad():
            sinkhorn(a, n_iter, early_stop=False)
        used = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return used
    assert peak(2000) < 2 * peak(20) + 50_000


def test_finite_check_can_be_turned_off():
    a = torch.tensor([[0.0, float("nan")], [0.0, 0.0]])
    assert torch.isnan(sinkhorn(a, 3, check_finite=False)).any()


# ----------------------------------------------------------------------------- gradients, memory


def test_gradcheck_float64():
    a = logits(2, 5, 1.0, 9).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: sinkhorn(x, 6), (a,))
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    assert torch.autograd.gradcheck(lambda x: sinkhorn(x, 6, mask=mask), (a,))


def test_gradients_match_unrolled_autograd():
    a = logits(3, 16, 1.5, 10)
    w = torch.randn(3, 16, 16, dtype=torch.float64)
    x1, x2 = a.clone().requires_grad_(True), a.clone().requires_grad_(True)
    (sinkhorn(x1, 50) * w).sum().backward()
    (sinkhorn_reference(x2, 50) * w).sum().backward()
    rel = (x1.grad - x2.grad).norm() / x2.grad.norm()
    assert rel < 1e-4


@pytest.mark.parametrize("n, scale", [(17, 0.3), (17, 3.0), (50, 1.0), (50, 3.0), (128, 2.0),
                                      (128, 3.0)])
def test_early_stopping_stays_within_1e6_of_exactly_50_iterations(n, scale):
    """float32, max abs: the stopped matrices differ from running every iteration only by
    rounding noise; a mask changes nothing to that."""
    a = logits(64, n, scale, 11, torch.float32)
    assert (sinkhorn(a, 50) - sinkhorn(a, 50, early_stop=False)).abs().max() < 1e-6
    mask = torch.arange(n)[None, :] < torch.randint(1, n + 1, (64, 1), generator=torch.Generator().manual_seed(0))
    assert (sinkhorn(a, 50, mask) - sinkhorn(a, 50, mask, early_stop=False)).abs().max() < 1e-6


@pytest.mark.parametrize("masked", [False, True])
def test_gradients_where_converged_match_50_unrolled_iterations_in_float32(masked):
    """Where the 50-iteration marginal error is below 1e-6 the implicit gradient of the
    fixed point equals autograd through 50 unrolled iterations within 1e-4 (relative)."""
    a = logits(32, 24, 1.0, 12, torch.float32)
    mask = None
    if masked:
        mask = torch.arange(24)[None, :] < torch.randint(2, 25, (32, 1), generator=torch.Generator().manual_seed(1))
    ref = sinkhorn_reference(a.double(), 50, mask)
    converged = torch.maximum(*marginal_errors(ref, mask)) < 1e-6
    assert converged.float().mean() > 0.8
    w = torch.randn(32, 24, 24, dtype=torch.float32)
    x1, x2 = a.clone().requires_grad_(True), a.double().requires_grad_(True)
    (sinkhorn(x1, 50, mask) * w).sum().backward()
    (sinkhorn_reference(x2, 50, mask) * w.double()).sum().backward()
    g1, g2 = x1.grad[converged].double(), x2.grad[converged]
    assert ((g1 - g2).norm() / g2.norm()) < 1e-4


def test_unconverged_matrices_get_the_exact_gradient_of_their_iterations():
    """Large logits: 50 iterations are not enough, and the gradient is autograd's through
    exactly those iterations (float64, to 1e-8)."""
    a = logits(8, 32, 4.0, 13)
    assert not sinkhorn_forward(a, 100, None)[1].any()  # none converged
    w = torch.randn(8, 32, 32, dtype=torch.float64)
    x1, x2 = a.clone().requires_grad_(True), a.clone().requires_grad_(True)
    (sinkhorn(x1, 50) * w).sum().backward()
    (sinkhorn_reference(x2, 50) * w).sum().backward()
    assert ((x1.grad - x2.grad).norm() / x2.grad.norm()) < 1e-8


def test_implicit_gradient_is_the_fixed_points_in_float64():
    a = logits(6, 12, 1.0, 14)
    w = torch.randn(6, 12, 12, dtype=torch.float64)
    x1, x2 = a.clone().requires_grad_(True), a.clone().requires_grad_(True)
    (sinkhorn(x1, 500) * w).sum().backward()  # converges: implicit
    (sinkhorn(x2, 500, early_stop=False) * w).sum().backward()  # every iteration, unrolled
    assert ((x1.grad - x2.grad).norm() / x2.grad.norm()) < 1e-10


def test_backward_memory_at_most_twice_softmax():
    x = torch.randn(8, 64, 64, requires_grad=True)
    ratio = saved_bytes(lambda t: sinkhorn(t, 50), x) / saved_bytes(softmax, x)
    assert ratio <= 2.0


def test_nearly_converged_reads_the_marginal_error_against_its_bound():
    from rankcollapse._sinkhorn_engine import NEAR, nearly_converged

    p = torch.full((3, 4, 4), 0.25)
    p[1, 0, :] *= 1 + 0.5 * NEAR[torch.float32]  # row error half the bound
    p[2, 0, :] *= 1 + 4 * NEAR[torch.float32]  # four times the bound
    assert nearly_converged(p, 100, None).tolist() == [True, True, False]
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[2, 0] = False  # the offending row is padding: it does not count
    assert nearly_converged(p, 100, mask).tolist() == [True, True, True]
    assert nearly_converged(p.transpose(-1, -2), 99, None).tolist() == [True, True, False]


def test_slow_matrices_near_the_fixed_point_keep_gradients_close_to_the_unrolled_ones():
    """Logits of scale 3 leave some float32 matrices short of the rounding level after 50
    iterations; those within `NEAR` take the implicit gradient, the rest the unrolled one:
    either way within 1e-4 of autograd through 50 float64 iterations."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(256, 12, 12, generator=g) * 3
    w = torch.randn(x.shape, generator=g)
    ours = x.clone().requires_grad_(True)
    (sinkhorn(ours, 50) * w).sum().backward()
    ref = x.double().requires_grad_(True)
    (sinkhorn_reference(ref, 50) * w.double()).sum().backward()
    diff = (ours.grad.double() - ref.grad).flatten(1).norm(dim=1) / ref.grad.flatten(1).norm(dim=1)
    assert float(diff.max()) < 1e-4


@pytest.mark.parametrize("n", [2, 9, 17, 19])
def test_kernels_iterated_padded_give_the_scalings_and_stops_of_the_kernel_alone(n):
    """Below SMALL_N the CPU iterates K extended by an identity block: the real block's u, v
    and which matrices converged are those of K itself (to rounding), the padded ones stay 1."""
    from rankcollapse._sinkhorn_engine import SMALL_N, _kernel, _padded, _scale, tolerance

    x = logits(64, n, 1.5, 21, torch.float32)
    x[:8] *= 6  # some matrices need every iteration
    k = _kernel(x, 101)
    padded = _padded(k)
    assert padded.shape[-1] == SMALL_N
    tol = tolerance(k.dtype, n)
    u, v, done = _scale(k, 101, tol)
    up, vp, done_padded = _scale(padded, 101, tol)
    assert torch.equal(done, done_padded) and done.any() and not done.all()
    torch.testing.assert_close(up[:, :n], u, rtol=1e-5, atol=0)  # a few roundings apart
    torch.testing.assert_close(vp[:, :n], v, rtol=1e-5, atol=0)
    assert (up[:, n:] == 1).all() and (vp[:, n:] == 1).all()


# ----------------------------------------------------------------------------- empty samples


@pytest.mark.parametrize("early_stop", [True, False])
def test_a_sample_with_no_token_gives_zero_and_a_zero_gradient_on_both_backward_paths(early_stop):
    """Unchecked, a sample whose mask has no real token gives a zero matrix and zero gradient;
    the early-stop (implicit) backward once divided 0/0 by the number of real tokens."""
    x = logits(2, 5, 1.0, 3).requires_grad_()
    mask = torch.tensor([[True, True, True, False, False], [False] * 5])
    p = sinkhorn(x, 30, mask, check_finite=False, early_stop=early_stop)
    assert torch.equal(p[1], torch.zeros_like(p[1]))
    (p * logits(2, 5, 1.0, 4)).sum().backward()
    assert torch.isfinite(x.grad).all() and torch.equal(x.grad[1], torch.zeros_like(x.grad[1]))


def test_both_backward_paths_agree_with_an_empty_sample_in_the_batch():
    mask = torch.tensor([[True, True, True, True, False], [False] * 5])
    grads = []
    for early_stop in (True, False):
        x = logits(2, 5, 0.5, 5).requires_grad_()
        (sinkhorn(x, 200, mask, check_finite=False, early_stop=early_stop)
         * logits(2, 5, 1.0, 6)).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-6, atol=1e-8)


def test_softmax_of_a_sample_with_no_token_is_zero_not_nan():
    mask = torch.tensor([[True, False, False], [False, False, False]])
    p = softmax(logits(2, 3, 1.0, 7), mask, check_finite=False)
    assert torch.equal(p[1], torch.zeros_like(p[1])) and torch.allclose(p[0, :, 0], torch.ones_like(p[0, :, 0]))


@pytest.mark.parametrize("value", [np.int64(5), np.int32(5)])
def test_numpy_integers_are_accepted_as_n_iter(value):
    a = logits(1, 4, 1.0, 8)
    torch.testing.assert_close(sinkhorn(a, value), sinkhorn(a, 5))
    torch.testing.assert_close(sinkhorn(a, half_steps=value), sinkhorn(a, half_steps=5))
