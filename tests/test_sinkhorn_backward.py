"""The Sinkhorn engine's backward pass on sharp, masked logits (trained attention on padded
text): plans that are, or nearly are, permutations make the implicit system
`I + m m^T / |m| - P^T P` singular or ill-conditioned. Such matrices must get the gradient of
their iterations, not a failed or inaccurate solve: on the torch engine (float64, CUDA, or
float32 without the C loops) and on the C loops alike, against autograd through the
definition."""

import pytest
import torch

from rankcollapse import _sinkhorn_engine as engine
from rankcollapse import _sinkhorn_native as native
from rankcollapse.normalizations import sinkhorn, sinkhorn_reference


def masked_logits(batch, n, scale, seed, dtype):
    """Random logits `(batch, n, n)` times `scale`, a random incoming gradient, and a mask of
    random lengths 1..n: short real blocks are the ones whose plans become permutations."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, n, n, generator=g, dtype=torch.float64) * scale
    w = torch.randn(batch, n, n, generator=g, dtype=torch.float64)
    mask = torch.arange(n) < torch.randint(1, n + 1, (batch, 1), generator=g)
    return x.to(dtype), w.to(dtype), mask


def engine_and_definition(x, w, mask, n_iter=50):
    """The engine's gradient, and the definition's gradient and plan in float64."""
    ours = x.clone().requires_grad_(True)
    (sinkhorn(ours, n_iter, mask) * w).sum().backward()
    ref = x.double().clone().requires_grad_(True)
    p = sinkhorn_reference(ref, n_iter, mask)
    (p * w.double()).sum().backward()
    return ours.grad.double(), ref.grad, p.detach()


def spectral_gaps(p, mask):
    """The smallest eigenvalue of each implicit system `I + m m^T / |m| - P^T P` (float64)."""
    real = mask.double().unsqueeze(-1)
    system = (torch.eye(p.shape[-1], dtype=torch.float64) + real @ real.transpose(-1, -2)
              / real.sum(-2, keepdim=True) - p.transpose(-1, -2) @ p)
    return torch.linalg.eigvalsh(system)[:, 0]


@pytest.fixture(params=["torch", "c"])
def float32_engine(request, monkeypatch):
    """float32 on the torch engine (as with RANKCOLLAPSE_NATIVE=0, or where no compiler
    works) and on the C loops."""
    if request.param == "torch":
        monkeypatch.setitem(native._state, "library", None)
    elif not native.available():
        pytest.skip("no C compiler here")
    return request.param


def assert_close_per_matrix(ours, ref, w, rtol, atol):
    """|ours - definition| <= rtol |definition| + atol |incoming gradient|, matrix by matrix:
    the gradient of a sharp plan can lie far below the incoming gradient, and a float32
    computation of it (the definition's own included) is good only to rounding of the latter."""
    error = (ours - ref).flatten(1).norm(dim=1)
    bound = rtol * ref.flatten(1).norm(dim=1) + atol * w.double().flatten(1).norm(dim=1)
    if bool((error <= bound).all()):
        return
    worst = int((error / bound).argmax())
    raise AssertionError(
        f"matrix {worst} of {len(error)}: error {float(error[worst]):.2e}, "
        f"bound {float(bound[worst]):.2e}")


@pytest.mark.parametrize("scale", [1.0, 10.0, 20.0, 60.0, 500.0])
def test_masked_sharp_gradients_match_the_definition_in_float32(float32_engine, scale):
    """Every matrix within the engine's accuracy: rounding of the incoming gradient on the C
    loops; on the torch engine, matrices that nearly converged (within `NEAR`) take the
    implicit gradient, off by up to NEAR / GAP of the incoming gradient. Plans whose system is
    ill-conditioned (gap below `GAP`: permutations and nearly so) get the gradient of their
    iterations on both engines, to rounding."""
    x, w, mask = masked_logits(160, 6, scale, 3, torch.float32)
    ours, ref, p = engine_and_definition(x, w, mask)
    assert torch.isfinite(ours).all()
    near = 1e-5 / 0.05  # written out, not read from the engine: NEAR / GAP in float32
    assert_close_per_matrix(ours, ref, w, 1e-3, near if float32_engine == "torch" else 1e-6)
    sharp = spectral_gaps(p, mask) < 0.05
    assert_close_per_matrix(ours[sharp], ref[sharp], w[sharp], 1e-3, 1e-6)


@pytest.mark.parametrize("scale", [1.0, 20.0, 60.0, 500.0])
def test_masked_sharp_gradients_match_the_definition_in_float64(scale):
    x, w, mask = masked_logits(160, 6, scale, 5, torch.float64)
    ours, ref, _ = engine_and_definition(x, w, mask)
    assert torch.isfinite(ours).all()
    assert_close_per_matrix(ours, ref, w, 1e-9, 1e-14)


def test_gradcheck_float64_with_a_mask_at_a_sharp_scale():
    """Logits of scale 500; the first sample's real block is made a permutation to the last
    bit (its other kernel entries underflow to 0): its implicit system is exactly singular."""
    x, _, _ = masked_logits(2, 6, 500.0, 2, torch.float64)
    x[0, :4, :4] += 4000 * torch.eye(4, dtype=torch.float64)[[2, 0, 3, 1]]
    mask = torch.tensor([[True] * 4 + [False] * 2, [True] * 3 + [False] * 3])
    assert torch.autograd.gradcheck(lambda y: sinkhorn(y, 6, mask=mask),
                                    (x.requires_grad_(True),))


def nearly_decoupled(n, coupling, dtype=torch.float32):
    """A doubly stochastic matrix `(n, n)` whose first token is all but cut off from the
    others: the spectral gap 1 - sigma_2(P)^2 of its implicit system is about `coupling`."""
    p = torch.full((n, n), 1.0 / (n - 1), dtype=torch.float64)
    p[0, :], p[:, 0] = coupling / (n - 1), coupling / (n - 1)
    p[0, 0] = 1.0 - coupling
    p[1:, 1:] -= coupling / (n - 1) ** 2
    return p.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_implicit_solve_is_refused_where_its_system_is_singular_or_ill_conditioned(dtype):
    p = torch.stack([nearly_decoupled(5, 0.5, dtype), nearly_decoupled(5, 1e-6, dtype),
                     torch.eye(5, dtype=dtype)])
    grad, solved = engine.implicit_backward(p, torch.ones_like(p), None)
    assert solved.tolist() == [True, False, False]
    assert torch.isfinite(grad[0]).all()


def test_the_c_loops_refuse_the_same_systems():
    if not native.available():
        pytest.skip("no C compiler here")
    p = torch.stack([nearly_decoupled(5, 0.5), nearly_decoupled(5, 1e-6), torch.eye(5)])
    grad, solved = native.implicit_backward(p, torch.ones_like(p), None, engine.GAP[p.dtype])
    assert solved.tolist() == [True, False, False]
    reference, _ = engine.implicit_backward(p[:1], torch.ones_like(p[:1]), None)
    torch.testing.assert_close(grad[0], reference[0], rtol=1e-4, atol=1e-6)


def test_an_error_in_the_backward_names_sinkhorn_and_where(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("out of luck")

    monkeypatch.setattr(engine, "unrolled_backward", broken)
    x = (torch.randn(2, 4, 4, dtype=torch.float64) * 8).requires_grad_(True)
    with pytest.raises(RuntimeError, match=r"Sinkhorn backward.*unrolled.*out of luck"):
        sinkhorn(x, 5, early_stop=False).sum().backward()
