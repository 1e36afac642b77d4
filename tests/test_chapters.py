"""Every chapter's `run` as plain pytest: under the `smoke` profile here (seconds), and under
`full-smoke` (every code path of the paper's scale) among the slow tests. Each result holds
what its notebook shows: the figures draw from it, its glued values are numbers or text,
and its claims carry verdicts."""

import math

import matplotlib

matplotlib.use("Agg")  # tests only; chapters keep the default backend
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from rankcollapse.claim_rows import Claim  # noqa: E402
from rankcollapse.experiments import (linearized_bound, rank_collapse,  # noqa: E402
                                      sinkhorn_vs_softmax)
from rankcollapse.profiles import get_profile  # noqa: E402

CPU = torch.device("cpu")


def check_common(result) -> None:
    """Glue: finite numbers or text; sentences: non-empty Markdown; claims with verdicts."""
    for name, value in result.glue.items():
        assert isinstance(value, (int, float, str)) or hasattr(value, "item"), name
        if not isinstance(value, str):
            assert math.isfinite(float(value)) or math.isnan(float(value)), name
    assert all(isinstance(t, str) and t.strip() for t in result.text.values())
    assert result.claims and all(isinstance(c, Claim) and c.verdict for c in result.claims)


def draw_all(figures, result) -> None:
    """Every figure the chapter shows draws from the result without error."""
    for fig in figures:
        assert fig(result).axes
        plt.close("all")


def run_rank_collapse(profile: str):
    result = rank_collapse.run(get_profile(profile), CPU, seed=0)
    check_common(result)
    f = rank_collapse.figures
    draw_all([f.pure_collapse, f.block_parts, f.rank_vs_entropy,
              lambda r: f.digits_lost(r.lost)], result)
    assert isinstance(result.rank_vs_entropy, pd.DataFrame) and len(result.example) == 4
    return result


def test_rank_collapse_runs_under_smoke():
    result = run_rank_collapse("smoke")
    assert set(result.pure["logit_std"]) == set(get_profile("smoke").collapse_scales)


@pytest.mark.slow
def test_rank_collapse_runs_under_full_smoke():
    run_rank_collapse("full-smoke")


def run_sinkhorn_vs_softmax(profile: str):
    result = sinkhorn_vs_softmax.run(get_profile(profile), CPU, seed=0)
    check_common(result)
    f = sinkhorn_vs_softmax.figures
    draw_all([f.convergence, f.heatmaps, f.entropy, f.pure_both, f.cost], result)
    assert len(result.heat_weights) == 2 * get_profile(profile).heatmap[0] ** 2
    assert list(result.per_n.index) == list(get_profile(profile).cost_sizes)
    return result


def test_sinkhorn_vs_softmax_runs_under_smoke():
    run_sinkhorn_vs_softmax("smoke")


@pytest.mark.slow
def test_sinkhorn_vs_softmax_runs_under_full_smoke():
    run_sinkhorn_vs_softmax("full-smoke")


def run_linearized_bound(profile: str):
    result = linearized_bound.run(get_profile(profile), CPU, seed=0)
    check_common(result)
    f = linearized_bound.figures
    draw_all([f.linearization, f.cubic, f.depth_bound, f.regime, f.first_order_gap], result)
    assert set(result.slopes) == {"softmax", "sinkhorn"}
    return result


def test_linearized_bound_runs_under_smoke():
    run_linearized_bound("smoke")


@pytest.mark.slow
def test_linearized_bound_runs_under_full_smoke():
    run_linearized_bound("full-smoke")
