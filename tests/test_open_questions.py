"""Chapter 6's experiments: paths with broken correlation, swapped normalizations, fewer
iterations, pure training, Lipschitz constants; decided on constructed numbers where the
answer is known, and run end to end on tiny models."""

import numpy as np
import pandas as pd
import pytest
import torch

from dataclasses import replace

from rankcollapse.data import Dataset
from rankcollapse.experiments import open_questions as oq
from rankcollapse.experiments.open_questions import model_measures
from rankcollapse.experiments.open_questions.scratch import _learned_words
from rankcollapse.measures import path_products, sample_paths
from rankcollapse.models import build_model
from rankcollapse.profiles import OpenQuestionSettings, Task, get_profile
from rankcollapse.tasks import SCRATCH, train_config
from rankcollapse.training import TrainResult

ITERATIONS = OpenQuestionSettings().iterations  # B4's counts
ENTRIES = OpenQuestionSettings().check_entries  # the power iteration check's largest input


def test_modes_choose_the_inputs_of_each_factor():
    g = torch.Generator().manual_seed(0)
    base = sample_paths(6, 2, 4, 50, 8, g)
    one = oq.mode_paths(base, "one input", 8, 6, g)
    assert (one.samples == base.samples[:, None]).all()
    mixed = oq.mode_paths(base, "inputs mixed", 8, 6, g)
    assert mixed.samples.shape == (50, 4) and (mixed.samples != mixed.samples[:, :1]).any()
    shuffled = oq.mode_paths(base, "inputs shuffled", 8, 6, g)
    # within a layer the shuffle is a permutation: one input maps to one input
    for layer in range(6):
        at = base.layers == layer
        pairs = set(zip(base.samples[:, None].expand_as(at)[at].tolist(),
                        shuffled.samples[at].tolist()))
        assert len({a for a, _ in pairs}) == len(pairs) == len({b for _, b in pairs})
    with pytest.raises(ValueError, match="unknown mode"):
        oq.mode_paths(base, "random", 8, 6, g)


def test_products_take_each_factor_from_its_own_input():
    g = torch.Generator().manual_seed(1)
    attn = torch.rand(3, 4, 2, 5, 5, generator=g, dtype=torch.float64)
    paths = oq.mode_paths(sample_paths(3, 2, 3, 6, 4, g), "inputs mixed", 4, 3, g)
    got = path_products(attn, paths)
    for p in range(6):  # a plain loop as the reference
        expected = torch.eye(5, dtype=torch.float64)
        for k in range(3):
            expected = expected @ attn[paths.layers[p, k], paths.samples[p, k], paths.heads[p, k]]
        torch.testing.assert_close(got[p], expected)


def constructed_paths(one: float, broken: float, seeds=range(5)) -> pd.DataFrame:
    """Path residuals where Sinkhorn = ratio x softmax: `one` with one input, `broken` in
    the other modes."""
    rows = []
    for seed in seeds:
        for mode in oq.MODES:
            ratio = one if mode == "one input" else broken
            for depth in (2, 3):
                for path in range(3):
                    base = 0.01 * (1 + seed) * (1 + path)
                    rows += [dict(task="t", mode=mode, depth=depth, path=path, sample=path,
                                  seed=seed, normalization="softmax", residual=base),
                             dict(task="t", mode=mode, depth=depth, path=path, sample=path,
                                  seed=seed, normalization="sinkhorn", residual=ratio * base)]
    return pd.DataFrame(rows)


TASK = Task("mnist10k", depth=3, d_model=16, n_heads=2, d_ff=32, epochs=1, batch_size=4,
            lr=1e-3, warmup_steps=1, patch=4)


def profile(*tasks, n_tokens=8):
    """The ci profile with toy image tasks of these names, also trained pure."""
    return replace(get_profile("three-task"), depth_sweep=None, tasks={t: TASK for t in tasks}, scratch_tasks=tasks,
                   n_tokens=n_tokens)


@pytest.mark.parametrize("one, broken, verdict", [(4.0, 1.0, "reproduced"),
                                                  (2.0, 2.0, "not reproduced"),
                                                  (0.5, 0.5, "not reproduced"),
                                                  (1.0, 0.25, "not reproduced"),
                                                  (2.0, 8.0, "contradicted")])
def test_the_mechanism_decides_c6d(one, broken, verdict):
    """C6d (the paper's hypothesis) is decided by the trained-model contrast alone, by the
    claim rule: it agrees only where Sinkhorn is ahead with one input and its advantage
    shrinks when the correlation is broken; Sinkhorn behind with one input (0.5), or an
    advantage that does not shrink, decides against; one that grows is the opposite."""
    paths = constructed_paths(one, broken)
    c6d = oq.mechanism_claim(paths, {"t": "T"}, profile("t"))
    assert c6d.verdict == verdict and c6d.id == "C6d"
    assert [r.part for r in c6d.results] == ["trained models, correlation broken"]
    assert c6d.results[0].number == pytest.approx(one / broken)
    assert "T: Sinkhorn / softmax along one input's path, divided by that with inputs mixed " in \
        c6d.finding
    comparisons = oq.mechanism_comparisons(paths)
    assert set(comparisons["mode"]) == set(oq.MODES)


def constructed_sweep(enough: int, seeds=range(4), low: float = 0.5) -> pd.DataFrame:
    """Accuracy 0.9 from `enough` iterations on, `low` below (per seed a little noise), on
    1,000 test inputs."""
    return pd.DataFrame([dict(task="t", seed=s, iterations=k, inputs=1000,
                              accuracy=(0.9 if k >= enough else low) + 0.001 * s,
                              residual=0.1, row_error=1e-3 / k, ms=10.0 * k)
                         for s in seeds for k in ITERATIONS])


def test_an_accuracy_of_zero_is_censored_at_one_right_answer():
    """A seed with no right answer below `enough` (a small test set, a bad model) is entered
    at one right answer among the test inputs, not refused."""
    claim = oq.iteration_claim(constructed_sweep(20, low=0.0), {"t": "T"}, profile("t"))
    assert claim.verdict == "fewer iterations suffice" and ": 20; a forward pass" in claim.finding
    assert claim.results[0].censored == 0 and claim.results[1].censored == 2  # seeds 0 and 1: at most one right answer


@pytest.mark.parametrize("enough, verdict", [(3, "fewer iterations suffice"),
                                             (50, "all iterations needed")])
def test_the_fewest_iterations_that_match(enough, verdict):
    claim = oq.iteration_claim(constructed_sweep(enough), {"t": "T"}, profile("t"))
    assert claim.verdict == verdict
    assert f"with 50 in every task, tested from 50 down" in claim.finding
    assert f": {enough}; a forward pass then takes {10.0 * enough / 500:.2f}" in claim.finding
    few = oq.iteration_claim(constructed_sweep(enough, seeds=range(2)), {"t": "T"},
                             profile("t"))
    assert few.verdict == "undecided"  # two seeds are too few to decide


# ----------------------------------------------------------------------------- tiny models


def image_data(n=16, side=8, seed=0) -> Dataset:
    g = torch.Generator().manual_seed(seed)
    return Dataset("toy", "test", torch.rand(n, 1, side, side, generator=g),
                   torch.arange(n) % 2, None, ["x", "y"], "image", "toy")


def tiny_results(data, switches=None) -> dict:
    results = {}
    for seed in (0, 1, 2):
        for name in ("softmax", "sinkhorn"):
            torch.manual_seed(seed)
            cfg = train_config(TASK, data, name, seed, n_iter=10, switches=switches)
            results[(name, seed)] = TrainResult(build_model(cfg.model).eval(), cfg, 0.5, 0.0, 1,
                                                [], False)
    return results


def test_attention_set_swaps_and_restores():
    model = tiny_results(image_data())[("sinkhorn", 0)].model
    with oq.attention_set(model, "softmax", 3):
        assert all(b.attn.normalization == "softmax" and b.attn.n_iter == 3
                   for b in model.encoder.blocks)
    assert all(b.attn.normalization == "sinkhorn" and b.attn.n_iter == 10
               for b in model.encoder.blocks)


def test_swapped_and_iterations_on_tiny_models():
    data = image_data()
    results = {"img": tiny_results(data)}
    accuracy, residuals = oq.swapped(results, {"img": data}, 8, 500, torch.device("cpu"))
    assert len(accuracy) == 3 * 2 * 2 and accuracy.accuracy.between(0, 1).all()
    assert set(residuals.layer) == {0, 1, 2, 3}
    comparisons = oq.swap_comparisons(residuals)
    assert set(comparisons.variant) == {"trained with softmax", "trained with sinkhorn"}
    claim = oq.swap_claim(residuals, accuracy, {"img": "Img"}, profile("img"))
    assert claim.id == "B3" and "Weights trained with Sinkhorn" in claim.finding
    assert {r.part for r in claim.results} == {"weights trained with softmax",
                                               "weights trained with Sinkhorn"}
    cpu = torch.device("cpu")
    sweep = oq.iteration_sweep(oq.iteration_measures(results, {"img": data}, 8, 500, cpu,
                                                      ITERATIONS),
                               oq.iteration_times(results, {"img": data}, 8, cpu, 1, ITERATIONS))
    assert len(sweep) == 3 * len(ITERATIONS)  # the Sinkhorn models only
    assert (sweep["ms"] > 0).all() and sweep["accuracy"].between(0, 1).all()
    errors = sweep.groupby("iterations")["row_error"].median()
    assert errors[50] < errors[1]  # more iterations, closer to doubly stochastic
    assert oq.iteration_claim(sweep, {"img": "Img"}, profile("img")).id == "B4"


def test_pure_training_analysis_runs_both_trainings_with_the_same_parts_off():
    data = image_data()
    scratch = {v: tiny_results(data, sw) for v, sw in SCRATCH.items()}
    accuracy, residuals = oq.scratch_analysis(scratch, tiny_results(data), data, 8, 500,
                                              torch.device("cpu"), "img")
    assert set(accuracy.training) == {"from scratch", "switched off at inference"}
    assert len(accuracy) == 2 * 2 * 3 * 2 and set(accuracy.task) == {"img"}
    comparisons = oq.scratch_comparisons(residuals)
    assert set(comparisons.setting) == set(SCRATCH) and set(comparisons.task) == {"img"}
    contrast = oq.training_contrast(residuals)
    assert set(contrast.normalization) == {"softmax", "sinkhorn"}
    assert (contrast.units == 3).all()  # values at the floor are censored, not dropped
    claim = oq.scratch_claim(accuracy, residuals, contrast, {"img": 0.5}, {"img": "Img"},
                             profile("img"))
    assert claim.id == "B1" and "chance 0.500" in claim.finding
    assert [r.part for r in claim.results] == list(oq.SCRATCH_PARTS.values())


def test_lipschitz_tables_and_claim():
    data = image_data()
    models = {"img": {k: r.model for k, r in tiny_results(data).items()}}
    random = oq.random_lipschitz(16, 2, OpenQuestionSettings().lipschitz_scales, (4, 8), 3, seed=0, n_iter=10)
    assert len(random) == len(OpenQuestionSettings().lipschitz_scales) * 2 * 3 * 2 and (random.lipschitz > 0).all()
    # the same weights for both normalizations: at tiny logits the constants nearly agree
    # C10's registered layers of each model's own depth: the first, L // 2 and the last
    trained = oq.trained_lipschitz(models, {"img": data}, 2)
    assert set(trained.layer) == {1, 3} and len(trained) == 3 * 2 * 2 * 2
    with pytest.raises(ValueError):  # the registered layers are the first, middle and last
        oq.lipschitz_claim(random, trained[trained.layer == 1], oq.sensitivity(
            models, {"img": data}, 2, directions=1), {"img": "Img"}, profile("img"))
    sensitive = oq.sensitivity(models, {"img": data}, 4, directions=2)
    assert len(sensitive) == 3 * 2 * 4 * 2 and (sensitive.sensitivity > 0).all()
    claim = oq.lipschitz_claim(random, trained, sensitive, {"img": "Img"}, profile("img"))
    assert claim.id == "C10" and "Random layers: n = 4, σ = 0.5:" in claim.finding
    assert len(claim.results) == len(OpenQuestionSettings().lipschitz_scales) * 2 + 1
    assert all(np.isfinite(r.number) for r in claim.results)


def test_the_whole_jacobian_check_stays_small_at_every_profile():
    assert oq.check_tokens(32, 16, ENTRIES) == 16  # ci: the chapter's first size itself
    assert oq.check_tokens(128, 64, ENTRIES) * 128 <= ENTRIES  # full: fewer tokens
    assert oq.check_tokens(4096, 64, ENTRIES) == 2


def test_whether_the_pure_models_learned_is_said_once_when_none_did():
    acc = pd.DataFrame({"task": "mnist", "variant": "pure attention, LayerNorm",
                        "normalization": ["softmax", "sinkhorn"], "seed": 0,
                        "accuracy": [0.09, 0.102]})
    titles = {"mnist": "MNIST"}
    assert _learned_words(acc, acc.iloc[:0], titles).startswith("Every model trained pure")
    assert _learned_words(acc, acc, titles).startswith(
        "None of the 2 models trained pure beats chance by more than 0.1 (test accuracy "
        "0.090–0.102), so the rank comparison below is between models that did not learn")
    assert _learned_words(acc, acc.iloc[:1], titles) == (
        "Models trained pure within 0.1 of chance (they did not learn): MNIST, pure "
        "attention, LayerNorm, softmax, seed 0 (0.090).")


def test_the_chapters_measures_side_by_side_equal_one_after_another():
    """`model_measures.measure` in two worker processes and in this one: the same tables
    (B4's clock aside, which is timed alone in this process either way)."""
    data = image_data()
    complete = {"img": tiny_results(data)}
    settings = replace(profile("img"), n_eval=4, n_paths=4, d_model=8, n_heads=2,
                       ch6=OpenQuestionSettings(lipschitz_draws=1, lipschitz_inputs=1,
                                                iteration_rounds=1))
    cpu = torch.device("cpu")
    apart, together = (model_measures.measure(replace(settings, train_jobs=jobs), complete,
                                              {"img": data}, cpu, 0) for jobs in (2, 1))
    for field in ("mechanism", "swap_accuracy", "swap_residuals", "random_lipschitz",
                  "trained_lipschitz", "lipschitz_check", "sensitivity"):
        pd.testing.assert_frame_equal(getattr(apart, field), getattr(together, field),
                                      rtol=1e-9, obj=field)
    pd.testing.assert_frame_equal(apart.iterations.drop(columns="ms"),
                                  together.iterations.drop(columns="ms"), rtol=1e-9)
    assert apart.check_tokens == together.check_tokens
