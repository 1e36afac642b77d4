"""Every chapter's `run` as plain pytest, under the `smoke` profile (the ci shapes at few
draws) and under `full-smoke` (the full profile's every code path at tiny sizes, on the
torch Sinkhorn engine a GPU takes): slow tests, a minute or more each on two cores. Each
result holds what its notebook shows: every figure draws from it, its glued values are
numbers or text, and its claims carry verdicts. Chapters 5-7, which train, are walked
through Jupyter instead (tests/test_full_smoke.py)."""

import math

import matplotlib

matplotlib.use("Agg")  # tests only; chapters keep the default backend
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from rankcollapse.claim_rows import Claim  # noqa: E402
from rankcollapse.experiments import (linearized_bound, random_matrix_control,  # noqa: E402
                                      rank_collapse, sinkhorn_vs_softmax)
from rankcollapse.profiles import get_profile  # noqa: E402

CPU = torch.device("cpu")


def check_common(result) -> None:
    """Glue: finite numbers or text; sentences: non-empty Markdown; claims with verdicts."""
    for name, value in result.glue.items():
        assert isinstance(value, (int, float, str)) or hasattr(value, "item"), name
        if not isinstance(value, str):
            assert not math.isinf(float(value)), name
    assert all(isinstance(t, str) and t.strip() for t in result.text.values())
    assert result.claims and all(isinstance(c, Claim) and c.verdict for c in result.claims)


def draw_all(figures, result) -> None:
    """Every figure the chapter shows draws from the result without error."""
    for fig in figures:
        assert fig(result).axes
        plt.close("all")


CHAPTERS = {  # chapter -> its figures (each drawn from the result) and a check of its own
    rank_collapse: (lambda f: [f.pure_collapse, f.block_parts, f.rank_vs_entropy,
                               lambda r: f.digits_lost(r.lost)],
                    lambda r, p: set(r.pure["logit_std"]) == set(p.ch1.collapse_scales)
                    and len(r.example) == 4 and isinstance(r.rank_vs_entropy, pd.DataFrame)),
    sinkhorn_vs_softmax: (lambda f: [f.convergence, f.heatmaps, f.entropy, f.pure_both, f.cost],
                          lambda r, p: len(r.heat_weights) == 2 * p.ch2.heatmap[0] ** 2
                          and list(r.per_n.index) == list(p.ch2.cost_sizes)),
    linearized_bound: (lambda f: [f.linearization, f.cubic, f.depth_bound, f.regime,
                                  f.first_order_gap],
                       lambda r, p: set(r.slopes) == {"softmax", "sinkhorn"}),
    random_matrix_control: (lambda f: [f.control_boxes, f.control_ratio, f.control_sweep,
                                       f.correlated, f.network_chains, f.hidden_test],
                            lambda r, p: set(r.advantage["setting"])
                            == {"independent", "independent, half identity"}),
}
CHAPTER_NUMBERS = ("01", "02", "03", "04")  # the notebooks whose `run` is tested here


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["smoke", "full-smoke"])
@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_chapter_runs(chapter, profile, monkeypatch):
    if profile == "full-smoke":  # the torch engine, which a GPU runs
        monkeypatch.setenv("RANKCOLLAPSE_NATIVE", "0")
    settings = get_profile(profile)
    result = chapter.run(settings, CPU, seed=0)
    check_common(result)
    figures, own = CHAPTERS[chapter]
    draw_all(figures(chapter.figures), result)
    assert own(result, settings)


def test_every_chapter_package_is_tested():
    """Each chapter with a `run` is in `CHAPTERS`, and its notebook number in
    `CHAPTER_NUMBERS` (which the full-smoke walk leaves out)."""
    import rankcollapse.experiments as experiments
    from pathlib import Path
    packages = [p.parent.name for p in Path(experiments.__file__).parent.glob("*/chapter.py")]
    assert sorted(packages) == sorted(m.__name__.rsplit(".", 1)[-1] for m in CHAPTERS)
    assert len(CHAPTER_NUMBERS) == len(CHAPTERS)
