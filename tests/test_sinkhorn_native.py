"""The C loops of the Sinkhorn engine against the torch engine they replace on the CPU, and
against the log-domain definition: forward, both backward passes, masks, padding, empty
samples, kernels that would underflow, NaN, threads, and the fallback when no compiler works."""

import math
from contextlib import contextmanager

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rankcollapse import _sinkhorn_engine as engine
from rankcollapse import _sinkhorn_native as native
from rankcollapse.normalizations import sinkhorn, sinkhorn_reference

from references import per_matrix, sinkhorn_loop

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler here")


def logits(batch, n, scale, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, n, generator=g) * scale


def random_mask(batch, n, seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(batch, n, generator=g) < 0.7
    mask[:, 0] = True  # at least one real token
    return mask


@contextmanager
def torch_engine():
    """Runs its block on the torch engine, as where no compiler is found."""
    saved = native._library()
    native._state["library"] = None
    try:
        yield
    finally:
        native._state["library"] = saved


def both_engines(fn):
    """fn() on the C loops, then on the torch engine."""
    ours = fn()
    with torch_engine():
        return ours, fn()


def sinkhorn_and_grad(x, w, n_iter, mask=None, early_stop=True):
    x = x.clone().requires_grad_(True)
    p = sinkhorn(x, n_iter, mask, check_finite=False, early_stop=early_stop)
    (p * w).sum().backward()
    return p.detach(), x.grad


def relative(a, b):
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


# ----------------------------------------------------------------------------- agreement


@given(st.integers(1, 40), st.sampled_from([0.3, 1.5, 3.0]), st.integers(1, 60),
       st.booleans(), st.integers(0, 2**16))
def test_forward_and_gradient_agree_with_the_torch_engine(n, scale, n_iter, masked, seed):
    """Any size (padding to eight lanes), logit scale (converged or not, implicit or unrolled
    backward), iteration count and mask: the same matrix within 1e-6 as the torch engine, and
    the same gradient up to the torch engine's implicit gradient for matrices within `NEAR`
    of the marginals (3e-4 relative at most, measured), where the C loops differentiate
    every iteration."""
    x, w = logits(6, n, scale, seed), logits(6, n, 1.0, seed + 1)
    mask = random_mask(6, n, seed) if masked else None
    (p, g), (p_ref, g_ref) = both_engines(lambda: sinkhorn_and_grad(x, w, n_iter, mask))
    assert float((p - p_ref).abs().max()) < 1e-6
    assert relative(g, g_ref) < 3e-4  # the torch engine's shortcut for nearly converged ones


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 17, 20, 33, 64])
@pytest.mark.parametrize("scale", [0.3, 1.5, 3.5])
@pytest.mark.parametrize("half_steps", [3, 4, 9, 100, 101])
def test_c_loops_give_the_matrix_of_the_torch_engine_and_the_gradient_of_the_definition(
        n, scale, half_steps):
    """Every row length (padding to eight lanes), converged or not, ending on a row or a
    column step: the matrix within 1e-6 of the torch engine's, the gradient within 1e-4
    (relative) of autograd through every half-step of the definition in float64."""
    x, w = logits(12, n, scale, n), logits(12, n, 1.0, n + 1)

    def run():
        y = x.clone().requires_grad_(True)
        p = sinkhorn(y, half_steps=half_steps, check_finite=False)
        (p * w).sum().backward()
        return p.detach(), y.grad

    (p, g), (p_ref, _) = both_engines(run)
    assert float((p - p_ref).abs().max()) < 1e-6
    ref = x.double().requires_grad_(True)
    (per_matrix(lambda m: sinkhorn_loop(m, half_steps), ref) * w.double()).sum().backward()
    assert relative(g.double(), ref.grad) < 1e-4


@pytest.mark.parametrize("early_stop", [True, False])
def test_masked_samples_agree_with_the_torch_engine_and_the_definition(early_stop):
    """Padding is an identity block: real blocks balanced, padded rows and columns zero,
    their gradient zero; a sample with no real token gives zero and a zero gradient."""
    x, w = logits(32, 12, 2.0, 5), logits(32, 12, 1.0, 6)
    mask = random_mask(32, 12, 7)
    mask[3] = False  # a sample with no real token

    def run():
        return sinkhorn_and_grad(x, w, 50, mask, early_stop)

    (p, g), (p_ref, g_ref) = both_engines(run)
    assert float((p - p_ref).abs().max()) < 1e-6
    assert relative(g, g_ref) < 1e-4
    pairs = mask[:, :, None] & mask[:, None, :]
    assert (p[~pairs] == 0).all() and (g[~pairs] == 0).all()
    assert (p[3] == 0).all() and (g[3] == 0).all()
    real = mask[0]
    expected = sinkhorn_reference(x[0][real][:, real].double(), 50)
    assert float((p[0][real][:, real].double() - expected).abs().max()) < 1e-6


def test_gradients_match_autograd_through_every_iteration_in_float64():
    """Matrices that converge (implicit backward) and matrices that do not (unrolled, by the
    C loops): within 1e-4 of autograd through 50 float64 iterations, per matrix."""
    x, w = logits(256, 17, 3.0, 11), logits(256, 17, 1.0, 12)
    converged = native.forward(x, None, 100, engine.tolerance(x.dtype, 17), math.exp(-40))[1]
    assert converged.any() and not converged.all()
    p, g = sinkhorn_and_grad(x, w, 50)
    ref = x.double().requires_grad_(True)
    (sinkhorn_reference(ref, 50) * w.double()).sum().backward()
    per_matrix = (g.double() - ref.grad).flatten(1).norm(dim=1) / ref.grad.flatten(1).norm(dim=1)
    assert float(per_matrix.max()) < 1e-4


# ----------------------------------------------------------------------------- the loops


def test_each_matrix_stops_on_its_own_and_within_the_tolerance():
    x = logits(64, 17, 1.5, 3)
    x[:8] *= 4  # these need every iteration
    tol = engine.tolerance(torch.float32, 17)
    p, converged, error, underflow = native.forward(x, None, 100, tol, math.exp(-40))
    assert converged[8:].all() and not underflow.any()
    assert (error[converged] == 0).all() and (error[~converged] > 0).all()
    rows = (p.sum(-1) - 1).abs().amax(-1)
    torch.testing.assert_close(error[~converged], rows[~converged])
    exact = native.forward(x, None, 100, -1.0, math.exp(-40))[0]
    assert float((p - exact).abs().max()) < 1e-6


def test_kernels_that_would_underflow_take_the_log_domain_alone():
    x = logits(8, 10, 1.0, 4)
    x[2, 0, 1] = -80.0  # a real entry of K below exp(-40)
    _, _, _, underflow = native.forward(x, None, 100, 1e-7, math.exp(-40))
    assert underflow.tolist() == [i == 2 for i in range(8)]
    p = sinkhorn(x, 50)
    expected = sinkhorn_reference(x.double(), 50)
    assert float((p.double() - expected).abs().max()) < 1e-6
    y = x.clone().requires_grad_(True)
    sinkhorn(y, 50, early_stop=False).sum().backward()  # unrolled: the log domain for #2
    assert torch.isfinite(y.grad).all()


def test_nan_logits_give_nan_not_a_crash():
    x = logits(4, 9, 1.0, 8)
    x[1, 2, 3] = float("nan")
    p = sinkhorn(x, 50, check_finite=False)
    assert torch.isnan(p[1]).all() and torch.isfinite(p[[0, 2, 3]]).all()


def test_results_do_not_depend_on_the_number_of_threads():
    x, w = logits(300, 17, 2.0, 9), logits(300, 17, 1.0, 10)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = sinkhorn_and_grad(x, w, 50)
        torch.set_num_threads(2)
        two = sinkhorn_and_grad(x, w, 50)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one[0], two[0]) and torch.equal(one[1], two[1])


def test_a_system_that_is_not_positive_definite_is_reported_not_solved():
    p = torch.full((2, 4, 4), 0.25)
    p[1] = torch.eye(4)  # P^T P = I: the system I + 11^T/n - P^T P is singular
    grad, solved = native.implicit_backward(p, torch.ones_like(p), None, 0.05)
    assert solved.tolist() == [True, False]


# ----------------------------------------------------------------------------- building


def test_a_failed_build_warns_once_and_the_torch_engine_runs(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", "false")  # a compiler that always fails
    monkeypatch.setenv("RANKCOLLAPSE_NATIVE_DIR", str(tmp_path))
    monkeypatch.delitem(native._state, "library")
    with pytest.warns(RuntimeWarning, match="could not be built"):
        assert not native.available()
    assert not native.applies(torch.zeros(2, 2))
    x = logits(4, 6, 1.0, 1)
    expected = sinkhorn_reference(x.double(), 50)
    assert float((sinkhorn(x, 50).double() - expected).abs().max()) < 1e-6
    monkeypatch.delitem(native._state, "library")  # the next test builds again


def test_the_library_is_built_once_per_source_and_switched_off_by_the_environment(
        monkeypatch, tmp_path):
    monkeypatch.setenv("RANKCOLLAPSE_NATIVE_DIR", str(tmp_path))
    monkeypatch.delitem(native._state, "library")
    assert native.available()
    built = list(tmp_path.glob("sinkhorn-*.so"))
    assert built == [native.library_path()]
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind
    monkeypatch.setenv("RANKCOLLAPSE_NATIVE", "0")
    monkeypatch.delitem(native._state, "library")
    assert not native.available()
    monkeypatch.delitem(native._state, "library")
