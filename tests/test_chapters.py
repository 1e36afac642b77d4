"""Every chapter's `run` as plain pytest: chapters 1-4 under the `smoke` profile (the ci
shapes at few draws) and under `full-smoke` (the full profile's every code path at tiny
sizes, on the torch Sinkhorn engine a GPU takes); chapters 5-7, which train, under `smoke`
here, with one model cache shared in chapter order, and under `full-smoke` in
tests/test_full_smoke.py (which CI runs in its other lane). Slow tests, a minute or more each
on two cores. Each result holds what its notebook shows: every figure draws from it, its
glued values are numbers or text, and its claims carry verdicts."""

import math

import matplotlib

matplotlib.use("Agg")  # tests only; chapters keep the default backend
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from rankcollapse.claim_rows import Claim  # noqa: E402
from rankcollapse.experiments import (appendix, linearized_bound,  # noqa: E402
                                      open_questions, random_matrix_control, rank_collapse,
                                      sinkhorn_vs_softmax, trained_models)
from rankcollapse.profiles import get_profile  # noqa: E402

CPU = torch.device("cpu")
# sentences that say nothing where there is nothing to say: how the depth sweep's data
# differ from chapter 5's (nothing, where the profile trains both alike)
MAY_BE_EMPTY = {"ds_data"}


def check_common(result) -> None:
    """Glue: finite numbers or text; sentences: non-empty Markdown; claims with verdicts."""
    for name, value in result.glue.items():
        assert isinstance(value, (int, float, str)) or hasattr(value, "item"), name
        if not isinstance(value, str):
            assert not math.isinf(float(value)), name
    assert all(isinstance(t, str) and (t.strip() or name in MAY_BE_EMPTY)
               for name, t in result.text.items())
    claims = getattr(result, "claims", None)  # the appendix measures and claims nothing
    assert claims is None or claims and all(isinstance(c, Claim) and c.verdict for c in claims)


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
TRAINED = {  # chapters that train, in chapter order (each reads the models of the one before)
    trained_models: (lambda f: [f.learning, f.residual, f.relative, f.ratio_skips,
                                f.ratio_no_skips, f.attention_output, f.paths,
                                f.random_vs_trained, f.trained_attention],
                     lambda r, p: {c.id for c in r.claims} == {"C4a", "C4b", "C4c", "C4d", "C4e",
                                                                "C8", "C6c", "C2a", "C9"}
                     and set(r.curves["task"]) == set(p.tasks)),
    open_questions: (lambda f: [f.scratch_residual, f.mechanism, f.swapped, f.iterations,
                                f.lipschitz, f.depth_sweep],
                     lambda r, p: {c.id for c in r.claims} == {"B1", "B3", "B4", "C10", "C6d", "B5"}
                     and set(r.iterations["iterations"]) == set(p.ch6.iterations)),
    appendix: (lambda f: [],
               lambda r, p: list(r.exactness.index) == list(p.appendix.scales)
               and set(r.trained_steps["task"]) == set(p.tasks)),
}


def check_result(chapter, table, result, settings) -> None:
    """What every chapter's result must hold (`check_common`), its figures drawn from it, and
    the chapter's own check from `table` (`CHAPTERS` or `TRAINED`)."""
    check_common(result)
    figures, own = table[chapter]
    draw_all(figures(getattr(chapter, "figures", None)), result)
    assert own(result, settings)


def chapter_id(module) -> str:
    return module.__name__.rsplit(".", 1)[-1]


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["smoke", "full-smoke"])
@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_chapter_runs(chapter, profile, monkeypatch):
    if profile == "full-smoke":  # the torch engine, which a GPU runs
        monkeypatch.setenv("RANKCOLLAPSE_NATIVE", "0")
    settings = get_profile(profile)
    check_result(chapter, CHAPTERS, chapter.run(settings, CPU, seed=0), settings)


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    """One model cache for the trained chapters of this module, in chapter order."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RANKCOLLAPSE_MODELS", str(tmp_path_factory.mktemp("models")))
        yield


@pytest.mark.slow
@pytest.mark.parametrize("chapter", TRAINED, ids=chapter_id)
def test_trained_chapter_runs(chapter, model_cache):
    settings = get_profile("smoke")
    check_result(chapter, TRAINED, chapter.run(settings, CPU, seed=0), settings)


def test_every_chapter_package_is_tested():
    """Each chapter with a `run` is in `CHAPTERS` or `TRAINED`, so that its `run` is tested
    under both profiles (here and in tests/test_full_smoke.py)."""
    import rankcollapse.experiments as experiments
    from pathlib import Path
    packages = [p.parent.name for p in Path(experiments.__file__).parent.glob("*/chapter.py")]
    assert sorted(packages) == sorted(chapter_id(m) for m in {**CHAPTERS, **TRAINED})
