"""The high-precision stack: it agrees with float64 where float64 is exact, agrees with
itself at higher precision (so its digits are real, not rounding), and keeps the
doubly exponential collapse measurable far below float64's floor."""

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse import precise
from rankcollapse.experiments.linearized_bound import bound_check, depth_table, digit_growth
from rankcollapse.theory import random_head

N_ITER = 50  # the paper's iteration count


def case(seed=3, n=6, d=6, depth=4):
    gen = torch.Generator().manual_seed(seed)
    x0 = torch.randn(1, d, generator=gen, dtype=torch.float64).expand(n, d)
    z = torch.randn(n, d, generator=gen, dtype=torch.float64)
    heads = [random_head(d, d // 2, 1.0, gen) for _ in range(depth)]
    return x0, z - z.mean(0), heads


def test_high_precision_follows_the_residual_far_below_float64():
    x0, z, heads = case()
    table = precise.stack_table(x0, z, [0.1], heads, digits=200, n_iter=N_ITER)
    plain = depth_table(x0 + 0.1 * z, heads, n_iter=N_ITER)
    index = ["normalization", "layer"]
    top = table[table.layer <= 1].set_index(index)["log10_residual"]
    np.testing.assert_allclose(top, plain[plain.layer <= 1].set_index(index)["log10_residual"],
                               atol=1e-6)  # float64 agrees while it is exact
    assert table.log10_residual.min() < -60  # far below float64's floor
    assert bound_check(table, floor_log10=-180)[:3] == (True, 8, 4)
    assert 2.5 < digit_growth(table, floor_log10=-180) < 3.6  # the cubic law's factor 3


def test_more_digits_change_nothing_above_the_lower_precisions_floor():
    x0, z, heads = case(seed=5, depth=4)
    low = precise.depth_table(x0 + 0.3 * z, heads, digits=120, n_iter=N_ITER)
    high = precise.depth_table(x0 + 0.3 * z, heads, digits=300, n_iter=N_ITER)
    exact = low["log10_residual"] > -100  # above the 120-digit floor
    assert exact.sum() >= 6
    np.testing.assert_allclose(low.loc[exact, "log10_residual"],
                               high.loc[exact, "log10_residual"], atol=1e-8)
    np.testing.assert_allclose(low.loc[exact, "log10_relative"],
                               high.loc[exact, "log10_relative"], atol=1e-8)


def test_relative_residual_divides_by_the_layers_own_size():
    x0, z, heads = case(depth=1)
    table = precise.depth_table(x0 + 0.1 * z, heads, digits=40, normalizations=("softmax",),
                                n_iter=None)
    first = table.iloc[0]
    whole = float(torch.linalg.matrix_norm(x0 + 0.1 * z, 2))
    assert first.log10_relative == pytest.approx(first.log10_residual - np.log10(whole))


def test_too_few_digits_are_refused():
    x0, z, heads = case(depth=1)
    with pytest.raises(ValueError, match="digits"):
        precise.depth_table(x0, heads, digits=10, n_iter=N_ITER)
    with pytest.raises(ValueError, match="n_iter"):  # Sinkhorn without its iteration count
        precise.depth_table(x0, heads, digits=40, n_iter=None)


def test_floor_values_do_not_enter_the_growth():
    rows = [{"start": 0.1, "normalization": "softmax", "layer": k, "log10_residual": -(3.0 ** k)}
            for k in range(5)]
    rows.append({"start": 0.1, "normalization": "softmax", "layer": 5, "log10_residual": -380.0})
    stacks = pd.DataFrame(rows)
    assert digit_growth(stacks, floor_log10=-300) == pytest.approx(3.0)
    assert digit_growth(stacks, floor_log10=-400) > 3.0  # the floor value bends the fit
