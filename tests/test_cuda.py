"""The CUDA paths: the same results as on the CPU. Skipped (never failing) without a GPU;
`benchmarks/gpu_check.sh` runs them on a machine that has one."""

import pytest
import torch

from rankcollapse.models import EncoderConfig, ModelConfig, build_model
from rankcollapse.normalizations import sinkhorn, softmax
from rankcollapse.training import optimizer_step

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
CUDA = torch.device("cuda")


@pytest.mark.parametrize("n, scale", [(17, 0.5), (50, 2.0), (128, 3.0)])
def test_sinkhorn_on_cuda_matches_the_cpu(n, scale):
    a = torch.randn(64, n, n, generator=torch.Generator().manual_seed(0)) * scale
    mask = torch.arange(n)[None, :] < torch.randint(1, n + 1, (64, 1))
    for m in (None, mask):
        cpu = sinkhorn(a, 50, m)
        gpu = sinkhorn(a.to(CUDA), 50, None if m is None else m.to(CUDA)).cpu()
        assert (cpu - gpu).abs().max() < 2e-6


def test_gradients_on_cuda_match_the_cpu():
    a = torch.randn(32, 50, 50, generator=torch.Generator().manual_seed(1)) * 2.0
    w = torch.randn_like(a)
    x1, x2 = a.clone().requires_grad_(True), a.to(CUDA).requires_grad_(True)
    (sinkhorn(x1, 50) * w).sum().backward()
    (sinkhorn(x2, 50) * w.to(CUDA)).sum().backward()
    assert ((x1.grad - x2.grad.cpu()).norm() / x1.grad.norm()) < 1e-4


def test_half_precision_and_autocast_keep_sinkhorn_in_float32():
    a = torch.randn(8, 32, 32, device=CUDA)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        p = sinkhorn(a.bfloat16(), 50)
    assert p.dtype == torch.bfloat16
    ref = sinkhorn(a, 50)
    assert (p.float() - ref).abs().max() < 1e-2
    assert softmax(a.half()).dtype == torch.float16


@pytest.mark.parametrize("normalization", ["softmax", "sinkhorn"])
def test_a_training_step_runs_on_cuda_with_bf16(normalization):
    encoder = EncoderConfig(d_model=32, n_heads=4, depth=2, d_ff=64, normalization=normalization)
    model = build_model(ModelConfig("image", 10, encoder, image_size=28, patch=7)).to(CUDA)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.rand(16, 1, 28, 28, device=CUDA), torch.randint(10, (16,), device=CUDA)
    losses = [optimizer_step(model, optimizer, (x, None, y), 1e-3, bf16=True) for _ in range(3)]
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]
