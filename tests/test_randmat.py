import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.randmat import (compare_attention, compare_paths, median_ratio_ci,
                                  random_logits, sinkhorn_advantage, verdict,
                                  with_identity_layers)


def test_random_logits_have_the_requested_scale_and_correlation():
    a = random_logits(3, 64, 2, 16, scale=2.0, rho=0.8, generator=torch.Generator().manual_seed(0))
    assert a.shape == (3, 64, 2, 16, 16)
    assert a[2].std().item() == pytest.approx(2.0, rel=0.05)
    corr = np.corrcoef(a[0].flatten().numpy(), a[1].flatten().numpy())[0, 1]
    assert corr == pytest.approx(0.8, abs=0.02)
    with pytest.raises(ValueError, match="rho"):
        random_logits(2, 1, 1, 2, 1.0, 1.0, torch.Generator())


def test_half_of_the_layers_become_identity():
    attn = torch.softmax(torch.randn(6, 2, 1, 4, 4), -1)
    out = with_identity_layers(attn, torch.Generator().manual_seed(0))
    eye = torch.eye(4)
    identity_layers = [l for l in range(6) if torch.equal(out[l], eye.expand_as(out[l]))]
    assert len(identity_layers) == 3
    kept = [l for l in range(6) if l not in identity_layers]
    assert torch.equal(out[kept], attn[kept])


def test_median_ratio_interval():
    rng = np.random.default_rng(0)
    a = rng.lognormal(size=400)
    ratio, lo, hi = median_ratio_ci(a, a, 200, seed=0)
    assert ratio == 1.0 and lo <= 1 <= hi
    ratio, lo, hi = median_ratio_ci(a, 2 * a, 200, seed=0)
    assert ratio == pytest.approx(0.5) and hi < 1


def test_identical_attention_gives_ratio_one_because_paths_are_shared():
    attn = torch.softmax(torch.randn(4, 3, 2, 5, 5, dtype=torch.float64), -1)
    table = compare_attention({"same": {"softmax": attn, "sinkhorn": attn}}, [1, 2, 3], 20, 0)
    adv = sinkhorn_advantage(table, n_boot=50)
    assert (adv.ratio == 1.0).all()


def test_compare_paths_identity_variant_and_verdict():
    logits = random_logits(4, 2, 2, 6, 1.0, 0.0, torch.Generator().manual_seed(1))
    table = compare_paths({"x": logits}, [1, 2], 10, 0, n_iter=10, identity_seed=0)
    assert set(table.normalization) == {"softmax", "sinkhorn"} and len(table) == 40
    adv = sinkhorn_advantage(table, n_boot=50)
    assert verdict(adv).startswith("Sinkhorn keeps more rank")


def test_paired_interval_is_narrower_for_paired_data_and_zero_medians_are_nan():
    rng = np.random.default_rng(1)
    base = rng.lognormal(size=300)
    a, b = base * 1.1, base * rng.lognormal(0, 0.05, size=300)
    _, lo_u, hi_u = median_ratio_ci(a, b, 500, seed=0)
    _, lo_p, hi_p = median_ratio_ci(a, b, 500, seed=0, paired=True)
    assert hi_p - lo_p < 0.5 * (hi_u - lo_u) and lo_p > 1
    assert np.isnan(median_ratio_ci(a, np.zeros(300), 50, seed=0, paired=True)[0])
    adv = pd.DataFrame({"depth": [1, 2], "ratio": [1.2, float("nan")], "low": [1.1, float("nan")],
                        "high": [1.3, float("nan")]})
    assert "no ratio at depth 2" in verdict(adv)
