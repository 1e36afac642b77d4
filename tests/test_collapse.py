import math

import numpy as np
import pytest
import torch

from rankcollapse.collapse import (layernorm_rank_check, log_summary, low_affine_rank_tokens,
                                   row_entropy, sweep)
from rankcollapse.rank import affine_rank


def test_row_entropy_extremes():
    n = 6
    assert row_entropy(torch.full((n, n), 1 / n)).item() == pytest.approx(math.log(n))
    assert row_entropy(torch.eye(n)).item() == pytest.approx(0.0, abs=1e-12)


def test_affine_rank_of_constructed_tokens():
    gen = torch.Generator().manual_seed(0)
    for k in (1, 3, 5):
        assert affine_rank(low_affine_rank_tokens(12, 20, k, gen)).item() == k
    assert affine_rank(torch.ones(4, 3)).item() == 0


def test_layernorm_changes_affine_rank_but_not_the_centred_linear_rank():
    """The finding of chapter 1: affine rank k -> k + 1, linear rank of centred tokens kept."""
    table = layernorm_rank_check(n_tokens=10, d_model=16, ranks=[1, 3], draws=5, seed=0)
    assert (table.affine_before == table.rank_in).all()
    assert (table.affine_after == table.rank_in + 1).all()
    assert (table.linear_after == table.linear_before).all()


def test_sweep_shows_pure_attention_collapse_and_skip_preventing_it():
    configs = [dict(normalization="softmax", logit_std=1.0, label="pure"),
               dict(normalization="softmax", logit_std=1.0, skip=True, label="skip")]
    df = sweep(configs, n_samples=4, n_tokens=8, d_model=8, n_heads=2, depth=6, n_iter=10,
               seed=0, device=torch.device("cpu"), dtype=torch.float64)
    assert set(df.columns) >= {"layer", "sample", "residual", "entropy", "label"}
    assert df.layer.max() == 6 and len(df) == 2 * 7 * 4
    last = df[df.layer == 6].groupby("label")["residual"].median()
    assert last["pure"] < 1e-8 < 1e-2 < last["skip"]
    summary = log_summary(df, ["label", "layer"])
    assert {"mean", "std", "count"} <= set(summary.columns)


def test_sweep_gives_both_normalizations_the_same_weights():
    configs = [dict(normalization=n, logit_std=1e-6) for n in ("softmax", "sinkhorn")]
    df = sweep(configs, n_samples=3, n_tokens=6, d_model=8, n_heads=2, depth=2, n_iter=30,
               seed=0, device=torch.device("cpu"), dtype=torch.float64, weight_draws=2)
    assert set(df.draw) == {0, 1} and len(df) == 2 * 2 * 3 * 3
    # With vanishing logits both normalizations are uniform: identical networks give
    # identical residuals; different weight draws do not.
    soft, sink = (df[df.normalization == n].residual.to_numpy() for n in ("softmax", "sinkhorn"))
    np.testing.assert_allclose(soft, sink, rtol=1e-6, atol=1e-12)
    by_draw = df[(df.normalization == "softmax") & (df.layer == 1)].groupby("draw").residual.mean()
    assert by_draw[0] != by_draw[1]
