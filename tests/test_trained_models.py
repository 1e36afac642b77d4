"""Chapter 5's measurements on tiny models: shapes, masks, the claims table, the switches."""

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.data import Dataset, Tokenizer
from dataclasses import replace
from types import SimpleNamespace

from rankcollapse.experiments.trained_models import (VARIANTS, Analysis, accuracy_claim,
                                                     accuracy_table, analyse, claims,
                                                     claims_table, layer_sentences,
                                                     path_comparisons, logit_scales, scale_words,
                                                     trained_attention_claims, convergence_sentence)
from rankcollapse.recording import layer_comparisons, per_unit, record, switched
from rankcollapse.tasks import train_config
from rankcollapse.models import Switches, build_model
from rankcollapse.profiles import Task, get_profile
from rankcollapse.training import TrainResult


def text_data(n=12, length=8) -> Dataset:
    tok = Tokenizer.from_texts(["a b c d e f", "a b c", "d e f g"] * 3, min_freq=1)
    ids, mask = tok.encode(["a b c d e f g", "a b", "c d e", "f"] * (n // 4), max_len=length)
    return Dataset("toy", "test", ids, torch.arange(n) % 2, mask, ["x", "y"], "text", "toy",
                   vocab=tok)


TOY = Task("wordnet4", depth=3, d_model=16, n_heads=2, d_ff=32, epochs=1, batch_size=4,
           lr=1e-3, warmup_steps=1, max_len=8)


def profile(*tasks: str, depth: int = TOY.depth):
    """The ci profile with toy trained tasks of these names and depth (the registry reads
    them: the registered tests' layers are 1..depth)."""
    return replace(get_profile("three-task"), depth_sweep=None,
                   tasks={t: replace(TOY, depth=depth) for t in tasks})


def tiny_models(data):
    task = TOY
    torch.manual_seed(0)
    return {name: build_model(train_config(task, data, name, 0, n_iter=10).model).eval()
            for name in ("softmax", "sinkhorn")}


def test_switched_restores_the_switches():
    model = tiny_models(text_data())["softmax"]
    with switched(model, Switches(skip=False, ffn=False)):
        assert not model.switches.skip and not model.switches.ffn
    assert model.switches.skip and model.switches.ffn and model.switches.layernorm


def test_record_keeps_the_mask_and_layer_zero():
    data = text_data()
    out, mask = record(tiny_models(data)["sinkhorn"], data, 8, Switches(), batch_size=3)
    assert out.hidden.shape == (4, 8, 8, 16) and out.attention.shape == (3, 8, 2, 8, 8)
    assert torch.equal(mask, data.mask[:8])
    assert (out.attention[:, 1, :, 3:, :] == 0).all()  # "a b" + <cls>: 3 real tokens
    assert (out.attention[:, 1, :, :3, :3] > 0).all()


def test_analyse_and_claims_tables():
    data = text_data()
    models = {(name, seed): model for seed in (0, 1, 2)
              for name, model in tiny_models(data).items()}
    result = analyse({"text": models}, {"text": data}, n_eval=8, n_paths=5, seed=0, n_iter=10)
    shared = analyse({"text": models}, {"text": data}, n_eval=8, n_paths=5, seed=0, n_iter=10,
                     jobs=2)  # two worker processes, a share of the models each
    for table in ("hidden", "attention_output", "paths", "attention"):
        pd.testing.assert_frame_equal(getattr(shared, table), getattr(result, table),
                                      rtol=1e-9, obj=table)
    assert shared.shapes == result.shapes
    hidden, outputs, paths = result.hidden, result.attention_output, result.paths
    assert set(hidden.variant) == set(VARIANTS) and set(hidden.seed) == {0, 1, 2}
    assert len(hidden) == 3 * 2 * len(VARIANTS) * 4 * 8  # seeds x norms x variants x layers x samples
    assert hidden.residual.between(0, 2).all()
    np.testing.assert_allclose(hidden[hidden.layer == 0].relative, 1.0)
    assert set(outputs.layer) == {1, 2, 3}
    assert set(paths.variant) == {"full model", "without skip"}
    assert len(paths) == 3 * 2 * 2 * 3 * 5 and set(paths["sample"]) <= set(range(8))
    stats = result.attention
    assert set(stats.variant) == {"full model"} and set(stats.layer) == {1, 2, 3}
    assert stats[stats.normalization == "softmax"].marginal_error.isna().all()
    assert (stats[stats.normalization == "sinkhorn"].marginal_error >= 0).all()
    assert (stats.entropy <= np.log(8) + 1e-9).all() and (stats.logit_std > 0).all()
    comparisons = layer_comparisons(hidden)
    assert len(comparisons) == len(VARIANTS) * 3 and (comparisons.units <= 3).all()
    table = claims_table(comparisons)
    assert list(table.variant) == list(VARIANTS) and set(table.task) == {"text"}
    assert (table[["layers_more", "layers_less", "layers_parity", "layers_neither"]]
            .sum(axis=1) == 3).all()
    paths["setting"] = "toy, " + paths["variant"]
    path_table = path_comparisons(paths)
    assert set(path_table.setting) == {"toy, full model", "toy, without skip"}
    c4 = claims(result, {"text": "toy"}, profile("text"))
    assert [c.id for c in c4] == ["C4a", "C4b", "C4c", "C4d", "C4e"]
    assert all(r.task == "toy" and r.units == (3,) for c in c4 for r in c.results
               if r.outcome != "untested")
    assert [r.part for r in c4[1].results] == ["trained models, by relative depth",
                                               "trained models, by collapse"]
    c2a, c9 = trained_attention_claims(stats, {"text": "toy"}, profile("text"))
    assert c2a.id == "C2a" and c9.id == "C9" and "logit scale" in c2a.finding
    assert c2a.results[0].number == pytest.approx(
        stats[stats.normalization == "sinkhorn"].marginal_error.quantile(0.99))


def constructed(ratios: dict[str, list[float]],
                relative: dict[str, list[float]] | None = None) -> pd.DataFrame:
    """Residual tables where Sinkhorn = ratio x softmax at each layer, for 6 training seeds
    (two inputs each); the softmax models' relative residual (to layer 0) at layers 1..L is
    `relative[variant]` (default 1 everywhere: they never collapse to half)."""
    rows = []
    for variant, per_layer in ratios.items():
        curve = [1.0] + list((relative or {}).get(variant, [1.0] * len(per_layer)))
        for layer, ratio in enumerate([1.0] + per_layer):
            for seed in range(6):
                for sample in range(2):
                    base = 0.1 * (1 + seed) * (1 + sample)
                    rows += [dict(task="t", variant=variant, layer=layer, seed=seed,
                                  sample=sample, normalization="softmax", residual=base,
                                  relative=curve[layer]),
                             dict(task="t", variant=variant, layer=layer, seed=seed,
                                  sample=sample, normalization="sinkhorn", residual=ratio * base,
                                  relative=ratio * curve[layer])]
    return pd.DataFrame(rows)


def analysis_of(residuals: pd.DataFrame, path_ratio: float = 3.0) -> Analysis:
    """An `Analysis` whose hidden states and attention outputs are `residuals` and whose
    path products have Sinkhorn / softmax = `path_ratio` at every depth, for every seed."""
    depth = int(residuals["layer"].max())
    paths = pd.DataFrame([dict(task="t", variant="full model", depth=d, seed=s, sample=s,
                               normalization=n,
                               residual=0.1 * (1 + s) * (path_ratio if n == "sinkhorn" else 1.0))
                          for d in range(1, depth + 1) for s in range(6)
                          for n in ("softmax", "sinkhorn")])
    attention = pd.DataFrame([dict(task=t, normalization=n, layer=layer, seed=0,
                                   logit_std=0.5 * layer if n == "sinkhorn" else 0.25 * layer)
                              for t in residuals["task"].unique() for n in ("softmax", "sinkhorn")
                              for layer in range(1, depth + 1)])
    return Analysis(residuals, residuals[residuals["layer"] > 0], paths, attention, {})


def test_layer_comparisons_and_claims_on_constructed_ratios():
    residuals = constructed({"full model": [2.0, 2.0, 1.0], "without FFN": [2.0, 1.0, 1.0],
                             "without skip": [0.5, 0.5, 0.5],
                             "pure attention (no FFN, no skip)": [1.0, 1.0, 0.5]})
    comparisons = layer_comparisons(residuals)
    table = claims_table(comparisons).set_index("variant")
    assert table.loc["full model", "layers_more"] == 2
    assert table.loc["full model", "layers_parity"] == 1
    assert table.loc["without skip", "layers_less"] == 3
    assert table.loc["full model", "largest_ratio_layer"] == 1
    assert table.loc["full model", "mean_log10_ratio"] == pytest.approx(2 * np.log10(2) / 3)
    sentences = layer_sentences(comparisons)
    assert sentences[("t", "full model")] == ("Sinkhorn higher at layers 1–2; parity at "
                                              "layer 3.")
    c4a, c4b, c4c, c4d, c4e = claims(analysis_of(residuals), {"t": "T"}, profile("t"))
    # complete models: mean log ratio over layers 1-3 is (2 log 2) / 3
    assert c4a.results[0].number == pytest.approx(2 ** (2 / 3))
    assert c4a.verdict == "reproduced" and c4e.verdict == "reproduced"
    assert c4d.verdict == c4a.verdict  # the same table gives the same verdict
    assert c4e.results[0].number == pytest.approx(3.0)


def test_early_and_skip_contrasts_decide_c4b_and_c4c():
    """Full model: ratio 4 in layers 1-2, 1 in 3-4 (early advantage), its softmax model
    collapsing to half at layer 3 (k = 2); C4c compares each variant over its own layers
    before collapse: with skips, full model 1-2 (ratio 4) and without FFN 1-4 (ratio 2,
    never collapses); without skips, pure attention layer 1 (ratio 1, k = 1) while without
    skip is below half at layer 1 already (k = 0) and drops out."""
    residuals = constructed({"full model": [4.0, 4.0, 1.0, 1.0], "without FFN": [2.0] * 4,
                             "without skip": [1.0] * 4,
                             "pure attention (no FFN, no skip)": [1.0] * 4},
                            {"full model": [0.9, 0.6, 0.3, 0.2],
                             "without FFN": [0.9, 0.8, 0.7, 0.6],
                             "without skip": [0.4, 0.3, 0.2, 0.1],
                             "pure attention (no FFN, no skip)": [0.9, 0.4, 0.6, 0.1]})
    _, c4b, c4c, _, _ = claims(analysis_of(residuals), {"t": "T"}, profile("t", depth=4))
    depth, collapse = c4b.results
    assert depth.number == pytest.approx(4.0) and collapse.number == pytest.approx(4.0)
    assert c4b.verdict == "reproduced" and collapse.outcome == "agrees"
    # with skips: (2 log 4 + 4 log 2) / 6 cells = (4/3) log 2; without: log 1
    assert c4c.results[0].number == pytest.approx(2 ** (4 / 3)) and c4c.verdict == "reproduced"
    assert c4c.results[0].left_out == ("without skip: the softmax model keeps less than half "
                                       "its input's residual already at layer 1: no layer "
                                       "before collapse to half")
    assert "T: k = 2 (full model) of 4 layers" in c4b.finding
    assert ("T: k = 2 (full model), k = 4 (without FFN), k = 0 (without skip), k = 1 (pure "
            "attention (no FFN, no skip)) of 4 layers") in c4c.finding
    assert "T: Sinkhorn / softmax early, divided by that late 4.00 (" in c4b.finding
    assert "T: Sinkhorn / softmax before collapse to half, divided by that after 4.00 (" in c4b.finding
    assert "tested on the log-ratio scale" in c4c.finding
    reverse = constructed({"full model": [1.0, 1.0, 4.0, 4.0], "without FFN": [1.0] * 4,
                           "without skip": [3.0] * 4,
                           "pure attention (no FFN, no skip)": [3.0] * 4})
    _, c4b, c4c, _, _ = claims(analysis_of(reverse), {"t": "T"}, profile("t", depth=4))
    assert c4b.verdict == "contradicted" and c4c.verdict == "contradicted"
    # the softmax models never collapse to half: C4b's collapse test cannot be carried out
    untested = c4b.results[1]
    assert (untested.outcome, untested.found, untested.number) == ("untested", "undecided",
                                                                   None)
    assert untested.note == ("full model: the softmax model keeps at least half its input's "
                             "residual at every layer: no layer after collapse to half; the "
                             "test cannot be carried out")
    assert "T: not testable here (full model: the softmax model keeps at least half" in \
        c4b.finding
    # less behind with skips is not more ahead: no advantage, so the claim is not reproduced
    behind = constructed({"full model": [0.8] * 4, "without FFN": [0.8] * 4,
                          "without skip": [0.4] * 4,
                          "pure attention (no FFN, no skip)": [0.4] * 4})
    _, _, c4c, _, _ = claims(analysis_of(behind), {"t": "T"}, profile("t", depth=4))
    assert c4c.results[0].found == "more" and c4c.results[0].requirement == "less"
    assert c4c.verdict == "not reproduced"
    assert "(the condition), Sinkhorn / softmax there: T: lower." in c4c.finding


def test_c4c_is_untested_where_no_variant_without_skips_has_a_layer_before_collapse():
    residuals = constructed({"full model": [2.0] * 4, "without FFN": [2.0] * 4,
                             "without skip": [1.0] * 4,
                             "pure attention (no FFN, no skip)": [1.0] * 4},
                            {"without skip": [0.4] * 4,
                             "pure attention (no FFN, no skip)": [0.3] * 4})
    _, _, c4c, _, _ = claims(analysis_of(residuals), {"t": "T"}, profile("t", depth=4))
    r = c4c.results[0]
    assert (r.outcome, c4c.verdict) == ("untested", "not testable here")
    assert r.note == ("without skip: the softmax model keeps less than half its input's "
                      "residual already at layer 1: no layer before collapse to half; pure "
                      "attention (no FFN, no skip): the softmax model keeps less than half its "
                      "input's residual already at layer 1: no layer before collapse to half; "
                      "the test cannot be carried out")


def test_claims_table_counts_layers_tied_at_the_floor():
    residuals = constructed({"full model": [2.0, 3.0, 5.0]})
    residuals.loc[(residuals.layer == 3) & (residuals["seed"] < 5), "residual"] = 1e-20
    table = claims_table(layer_comparisons(residuals)).iloc[0]
    assert table.layers_at_floor == 1 and table.largest_ratio_layer == 2


def test_per_unit_takes_each_seeds_median():
    residuals = constructed({"full model": [2.0]})
    data = per_unit(residuals)
    assert set(data.columns) >= {"task", "variant", "position", "unit", "softmax", "sinkhorn"}
    assert len(data) == 6 and data.position.unique().tolist() == [1]
    first = data[data.unit == 0].iloc[0]
    assert first.softmax == pytest.approx(0.15) and first.sinkhorn == pytest.approx(0.3)


def test_accuracy_table_means_over_seeds():
    class Cfg:
        dataset = "toy"
        model = SimpleNamespace(n_classes=4)
    results = {"text": {(name, seed): TrainResult(None, Cfg(), acc, 60.0, 10, [], True)
                        for (name, seed), acc in [(("softmax", 0), 0.8), (("softmax", 1), 0.6),
                                                  (("sinkhorn", 0), 0.9), (("sinkhorn", 1), 0.7)]}}
    table = accuracy_table(results)
    assert table.loc[("text", "toy", "softmax"), "accuracy"] == pd.Series([0.8, 0.6]).mean()
    assert table.loc[("text", "toy", "sinkhorn"), "seeds"] == 2
    assert table.loc[("text", "toy", "sinkhorn"), "train_minutes"] == 1.0
    assert table.loc[("text", "toy", "softmax"), "chance"] == 0.25


def test_accuracy_claim_counts_a_match_or_an_improvement():
    def results(soft, sink):
        return {"t": {**{("softmax", s): SimpleNamespace(test_accuracy=a) for s, a in enumerate(soft)},
                      **{("sinkhorn", s): SimpleNamespace(test_accuracy=a) for s, a in enumerate(sink)}}}
    toy = profile("t")
    same = accuracy_claim(results([0.8, 0.81, 0.79], [0.8, 0.81, 0.79]), {"t": "T"}, toy)
    assert same.verdict == "reproduced" and same.results[0].number == pytest.approx(1.0)
    better = accuracy_claim(results([0.5, 0.52, 0.49], [0.8, 0.81, 0.79]), {"t": "T"}, toy)
    assert better.verdict == "reproduced" and better.results[0].number > 1.5
    worse = accuracy_claim(results([0.8, 0.81, 0.79], [0.5, 0.52, 0.49]), {"t": "T"}, toy)
    assert worse.verdict == "contradicted" and worse.results[0].high < 1
    one_seed = accuracy_claim(results([0.8], [0.8]), {"t": "T"}, toy)
    assert one_seed.verdict == "undecided" and one_seed.results[0].units == (1,)


def test_logit_scales_are_medians_per_task_normalization_and_layer():
    rows = [dict(task="t", normalization=n, layer=layer, seed=s, logit_std=v)
            for n, base in (("softmax", 1.0), ("sinkhorn", 2.0)) for layer in (1, 2)
            for s, v in enumerate((base * layer, base * layer + 1, base * layer + 5))]
    table = pd.DataFrame(rows)
    wide = logit_scales(table, {"t": "T"})
    assert list(wide.columns) == ["T, softmax", "T, Sinkhorn"]
    assert list(wide.index) == ["layer 1", "layer 2"]
    assert wide.loc["layer 2", "T, Sinkhorn"] == 5.0 and wide.loc["layer 1", "T, softmax"] == 2.0
    assert scale_words(table, {"t": "T"}) == "T: softmax 2–3, Sinkhorn 3–5"


def test_convergence_sentence_names_models_below_the_baseline_and_open_plateaus():
    table = pd.DataFrame([
        {"task": "A", "normalization": "softmax", "accuracy": 0.8, "linear baseline": 0.9,
         "test inputs": 1000, "plateaued": "2 of 5"},
        {"task": "A", "normalization": "sinkhorn", "accuracy": 0.95, "linear baseline": 0.9,
         "test inputs": 1000, "plateaued": "5 of 5"}])
    words = convergence_sentence(table)
    assert ("stay below the linear baseline on A, softmax (0.800 against 0.900); there 3 of 5 "
            "models had not plateaued (their held-out loss was still falling)") in words
    assert ("Not every model meets the plateau criterion: 2 of 5 softmax models on A meet it."
            in words and "5 of 5" not in words)
    good = table.assign(accuracy=0.95, plateaued="5 of 5")
    assert convergence_sentence(good) == ("Every task's Transformers beat the linear baseline "
                                          "on average. Every model meets the plateau criterion.")


def test_a_plateaued_model_below_the_baseline_is_not_called_undertrained():
    """Every seed plateaued: the gap is one of generalisation, not of training time; a gap
    within twice the baseline's sampling error on the test set is no gap."""
    table = pd.DataFrame([
        {"task": "T", "normalization": "softmax", "accuracy": 0.851, "linear baseline": 0.890,
         "test inputs": 1000, "plateaued": "8 of 8"},
        {"task": "C", "normalization": "softmax", "accuracy": 0.823, "linear baseline": 0.828,
         "test inputs": 1000, "plateaued": "8 of 8"}])
    words = convergence_sentence(table)
    assert "not trained" not in words
    assert "level with the linear baseline on C, softmax (0.823 against 0.828)" in words
    assert "below the linear baseline on T, softmax (0.851 against 0.890), every model's " \
        "held-out loss having improved by less than 5% of its value, or by less than 0.005 " \
        "nats, over its last 2 epochs" in words
    assert "rises" not in words  # no gain column: nothing said of it
    rising = convergence_sentence(table.assign(**{"last-epochs gain": [-0.042, 0.01]}))
    assert ("The held-out loss rises over the last epochs on T, softmax (-4.2%) (median over "
            "seeds): those models overfit there") in rising and "C, softmax (+" not in rising

def test_models_that_plateau_only_by_the_floor_are_counted_and_named(monkeypatch):
    """A fall of 7% that is 0.0013 nats meets the criterion through its floor alone; the
    table counts such models and the sentence names where."""
    from rankcollapse.experiments.trained_models import convergence_table

    def run(losses, seed):
        return SimpleNamespace(curve=[{"heldout_loss": x} for x in losses], test_accuracy=0.99,
                               config=SimpleNamespace(epochs=len(losses)))

    near_zero = [0.05, 0.0182, 0.0175, 0.0169]  # 7% of 0.0182, but 0.0013 nats
    settled = [2.0, 1.0, 0.99, 0.985]  # 1.5%
    results = {"t": {("softmax", 0): run(near_zero, 0), ("softmax", 1): run(settled, 1),
                     ("sinkhorn", 0): run(settled, 0), ("sinkhorn", 1): run(settled, 1)}}
    data = {"t": (SimpleNamespace(classes=list(range(4))), list(range(50)))}
    monkeypatch.setattr("rankcollapse.experiments.trained_models.convergence.linear_baseline",
                        lambda train, test: 0.5)
    table = convergence_table(results, data, {"t": "T"})
    assert table.set_index("normalization")["by the floor alone"].to_dict() == \
        {"softmax": 1, "sinkhorn": 0}
    assert table.set_index("normalization")["plateaued"].to_dict() == \
        {"softmax": "2 of 2", "sinkhorn": "2 of 2"}
    words = convergence_sentence(table)
    assert ("Every model meets the plateau criterion. Some of them meet the criterion only "
            "through its absolute part (a fall of more than 5% but of less than 0.005 "
            "nats): 1 of 2 softmax models on T.") in words


def test_the_ledger_data_names_each_tasks_depth_width_and_examples():
    from rankcollapse.experiments.trained_models import models_data, one_size
    from rankcollapse.profiles import Task

    small = dict(d_model=48, n_heads=4, d_ff=96, epochs=1, batch_size=8, lr=1e-3,
                 warmup_steps=1)
    tasks = {"a": Task("mnist10k", depth=24, train_limit=2000, **small),
             "b": Task("retrieval", depth=6, **small)}
    assert models_data(tasks, {"a": "A", "b": "B"}) == (
        "trained models: A, 24 layers of width 48 on the first 2,000 training examples; "
        "B, 6 layers of width 48 on all its training examples")
    assert models_data(tasks, {"a": "A", "b": "B"}, ["b"]) == \
        "trained models: B, 6 layers of width 48 on all its training examples"
    assert models_data(tasks, {"a": "A", "b": "B"}, ["b"], what="pure models") == \
        "pure models: B, 6 layers of width 48 on all its training examples"
    assert one_size(tasks, "depth") == "6 or 24" and one_size(tasks, "d_model") == "48"


def test_departures_name_each_size_that_differs_from_the_papers_and_only_those():
    from rankcollapse.experiments.trained_models import departures
    from rankcollapse.profiles import PAPER_SHAPES, PROFILES, Task

    small = dict(d_ff=96, epochs=1, batch_size=8, lr=1e-3, warmup_steps=1)
    paper = {"mnist": Task("mnist", depth=24, d_model=128, n_heads=4, patch=4, **small),
             "text": Task("ag_news", depth=24, d_model=128, n_heads=4, max_len=128, **small),
             "retrieval": Task("retrieval", depth=24, d_model=128, n_heads=4, **small)}
    ours = {"mnist": Task("mnist10k", depth=6, d_model=128, n_heads=4, patch=7, **small),
            "text": Task("wordnet4", depth=24, d_model=128, n_heads=2, max_len=64, patch=9,
                         **small),
            "retrieval": Task("retrieval", depth=3, d_model=8, n_heads=1, **small)}
    kinds = {"mnist": "image", "text": "text", "retrieval": "text"}
    titles = {"mnist": "M", "text": "T", "retrieval": "R"}
    assert departures(ours, paper, kinds, titles) == (
        "M: 6 layers (the paper: 24), 7×7 patches (the paper: 4×4); "
        "T: 2 heads (the paper: 4), 64 tokens (the paper: 128)")  # a text model's patch: moot
    assert departures(paper, paper, kinds, titles) == "none"
    full = PROFILES["full"].tasks  # the full profile trains the paper's shapes
    assert departures(full, PAPER_SHAPES, kinds | {"cats_dogs": "image"}, titles | {
        "cats_dogs": "C"}) == "none"


def test_plateau_is_an_improvement_below_the_fraction_over_the_window():
    from rankcollapse.experiments.trained_models import plateaued

    curve = [{"heldout_loss": v} for v in (2.0, 1.0, 0.97, 0.96)]
    assert plateaued(curve, window=2, fraction=0.05)  # 1.0 -> 0.96: 4% better
    assert not plateaued(curve, window=3, fraction=0.05)  # 2.0 -> 0.96
    assert plateaued(curve + [{"heldout_loss": 1.2}], window=1)  # a rise is no improvement
    assert not plateaued(curve[:2], window=2)  # too short to tell
    # near zero loss an absolute floor decides: 0.0182 -> 0.0169 is 7% but 0.0013 nats
    tiny = [{"heldout_loss": v} for v in (0.0182, 0.0170, 0.0169)]
    assert not plateaued(tiny, window=2, fraction=0.05)
    assert plateaued(tiny, window=2, fraction=0.05, floor=0.005)
    assert not plateaued(tiny, window=2, fraction=0.05, floor=0.001)  # 0.0013 >= 0.001
    # where the loss is large the relative part decides: 1.0 -> 0.9 is 10%, far above the floor
    assert not plateaued(curve[:1] + [{"heldout_loss": 1.0}, {"heldout_loss": 0.9}],
                         window=1, floor=0.005)
