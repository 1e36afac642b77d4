"""The attention normalizations against references that share no code with them: POT's
log-domain Sinkhorn (entropic optimal transport), PyTorch's `scaled_dot_product_attention`,
and Sinkhorn's fixed point characterised by its two defining properties alone."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from rankcollapse.models import SelfAttention
from rankcollapse.normalizations import sinkhorn

CONVERGED = 5_000  # full iterations: far beyond convergence at these logit scales


def logits_of(seed: int, n: int, scale: float, batch: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return scale * torch.randn(batch, n, n, generator=gen, dtype=torch.float64)


@pytest.mark.parametrize("n, scale", [(4, 0.5), (8, 1.0), (16, 2.0), (32, 3.0)])
def test_sinkhorn_matches_pot_log_domain_sinkhorn(n, scale):
    """Sinkhorn attention of logits A is n times POT's entropic transport plan between
    uniform marginals with cost -A and regularisation 1 (kernel exp(A)): both converged."""
    ot = pytest.importorskip("ot")
    logits = logits_of(n, n, scale)[0]
    ours = sinkhorn(logits, n_iter=CONVERGED)
    uniform = torch.full((n,), 1.0 / n, dtype=torch.float64)
    plan = ot.sinkhorn(uniform.numpy(), uniform.numpy(), (-logits).numpy(), reg=1.0,
                       method="sinkhorn_log", numItermax=100_000, stopThr=1e-15)
    torch.testing.assert_close(ours, n * torch.from_numpy(plan), rtol=1e-9, atol=1e-12)


def test_masked_sinkhorn_matches_pot_on_the_real_block():
    """With a key-padding mask, the real tokens' block is POT's plan between uniform
    marginals over the real tokens; padded rows and columns are zero."""
    ot = pytest.importorskip("ot")
    logits = logits_of(5, 9, 1.5)[0]
    mask = torch.tensor([True] * 6 + [False] * 3)
    ours = sinkhorn(logits, n_iter=CONVERGED, mask=mask)
    real = logits[:6, :6]
    uniform = torch.full((6,), 1.0 / 6, dtype=torch.float64).numpy()
    plan = ot.sinkhorn(uniform, uniform, (-real).numpy(), reg=1.0, method="sinkhorn_log",
                       numItermax=100_000, stopThr=1e-15)
    torch.testing.assert_close(ours[:6, :6], 6 * torch.from_numpy(plan), rtol=1e-9,
                               atol=1e-12)
    assert ours[6:].abs().max() == 0 and ours[:, 6:].abs().max() == 0


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 12), scale=st.floats(0.05, 1.5), seed=st.integers(0, 10_000))
def test_sinkhorn_is_the_scaling_with_uniform_marginals(n, scale, seed):
    """Characterised without any implementation: the converged P has rows and columns that
    each sum to 1, and log P - A = f 1^T + 1 g^T (a diagonal scaling of exp(A)), which
    determines it uniquely (Sinkhorn's theorem). The additive structure is checked by its
    double differences: D_ij - D_i0 - D_0j + D_00 = 0 for D = log P - A. (Logit scales up to
    1.5, where 5,000 iterations converge: near-permutation plans of sharper logits contract
    too slowly for any fixed count, with the definition's loop as much as with the engine.)"""
    logits = logits_of(seed, n, scale)[0]
    p = sinkhorn(logits, n_iter=CONVERGED)
    ones = torch.ones(n, dtype=torch.float64)
    torch.testing.assert_close(p.sum(-1), ones, rtol=0, atol=1e-10)
    torch.testing.assert_close(p.sum(-2), ones, rtol=0, atol=1e-10)
    d = p.log() - logits
    double = d - d[:, :1] - d[:1, :] + d[0, 0]
    assert double.abs().max() < 1e-9


@pytest.mark.parametrize("masked", [False, True])
def test_softmax_attention_matches_scaled_dot_product_attention(masked):
    """`SelfAttention` with softmax against PyTorch's fused attention on the same projected
    queries, keys and values (the output projection applied to both); with a key-padding
    mask, on the real queries (padded queries attend uniformly over the real keys here,
    by this library's convention)."""
    torch.manual_seed(0)
    layer = SelfAttention(32, 4, "softmax").double()
    x = torch.randn(3, 10, 32, dtype=torch.float64)
    mask = torch.ones(3, 10, dtype=torch.bool)
    if masked:
        mask[0, 7:], mask[2, 4:] = False, False
    ours = layer(x, mask if masked else None)
    q, k, v = layer.qkv(x).view(3, 10, 3, 4, 8).permute(2, 0, 3, 1, 4)
    keys = mask[:, None, None, :] if masked else None
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=keys)
    reference = layer.out(fused.transpose(1, 2).reshape(3, 10, 32))
    torch.testing.assert_close(ours[mask], reference[mask], rtol=1e-12, atol=1e-12)
