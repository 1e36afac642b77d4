"""Chapter 5's measurements on tiny models: shapes, masks, the claims table, the switches."""

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.data import Dataset, Tokenizer
from rankcollapse.experiments.trained_models import (VARIANTS, accuracy_table, analyse, claims,
                                                     claims_table, early_contrast,
                                                     layer_comparisons, skip_contrast,
                                                     layer_sentences, path_comparisons, record,
                                                     switched, train_config,
                                                     entropy_comparisons,
                                                     trained_attention_claims)
from rankcollapse.models import Switches, build_model
from rankcollapse.profiles import Task
from rankcollapse.training import TrainResult


def text_data(n=12, length=8) -> Dataset:
    tok = Tokenizer.from_texts(["a b c d e f", "a b c", "d e f g"] * 3, min_freq=1)
    ids, mask = tok.encode(["a b c d e f g", "a b", "c d e", "f"] * (n // 4), max_len=length)
    return Dataset("toy", "test", ids, torch.arange(n) % 2, mask, ["x", "y"], "text", "toy",
                   vocab=tok)


def tiny_models(data):
    task = Task("toy", depth=3, d_model=16, n_heads=2, d_ff=32, epochs=1, batch_size=4,
                lr=1e-3, warmup_steps=1, max_len=8)
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
    assert (table[["layers_more", "layers_less", "layers_parity", "layers_inconclusive"]]
            .sum(axis=1) == 3).all()
    paths["setting"] = "toy, " + paths["variant"]
    path_table = path_comparisons(paths)
    assert set(path_table.setting) == {"toy, full model", "toy, without skip"}
    c4a, c4d, c4e = claims(comparisons, layer_comparisons(outputs), path_table, {"text": "toy"})
    assert (c4a.id, c4d.id, c4e.id) == ("C4a", "C4d", "C4e") and c4a.finding.startswith("toy: ")
    entropy = entropy_comparisons(stats)
    c2a, c9 = trained_attention_claims(stats, entropy, {"text": "toy"})
    assert c2a.id == "C2a" and c9.id == "C9" and "logit scale" in c2a.finding


def constructed(ratios: dict[str, list[float]]) -> pd.DataFrame:
    """Residual tables where Sinkhorn = ratio x softmax at each layer, for 6 training seeds
    (two inputs each)."""
    rows = []
    for variant, per_layer in ratios.items():
        for layer, ratio in enumerate([1.0] + per_layer):
            for seed in range(6):
                for sample in range(2):
                    base = 0.1 * (1 + seed) * (1 + sample)
                    rows += [dict(task="t", variant=variant, layer=layer, seed=seed,
                                  sample=sample, normalization="softmax", residual=base),
                             dict(task="t", variant=variant, layer=layer, seed=seed,
                                  sample=sample, normalization="sinkhorn", residual=ratio * base)]
    return pd.DataFrame(rows)


def test_layer_comparisons_and_claims_on_constructed_ratios():
    residuals = constructed({"full model": [2.0, 2.0, 1.0], "without FFN": [2.0, 1.0, 1.0],
                             "without skip": [0.5, 0.5, 0.5], "pure": [1.0, 1.0, 0.5]})
    comparisons = layer_comparisons(residuals)
    table = claims_table(comparisons).set_index("variant")
    assert table.loc["full model", "layers_more"] == 2
    assert table.loc["full model", "layers_parity"] == 1
    assert table.loc["without skip", "layers_less"] == 3
    assert table.loc["full model", "largest_ratio_layer"] == 1
    assert table.loc["full model", "mean_log10_ratio"] == pytest.approx(2 * np.log10(2) / 3)
    sentences = layer_sentences(comparisons)
    assert sentences[("t", "full model")] == ("Sinkhorn keeps more at layers 1–2; parity at "
                                              "layer 3.")
    paths = pd.DataFrame([dict(setting="T, full model", depth=1, seed=s, sample=s, normalization=n,
                               residual=1.0 if n == "softmax" else 3.0)
                          for s in range(5) for n in ("softmax", "sinkhorn")])
    c4a, c4d, c4e = claims(comparisons, comparisons, path_comparisons(paths), {"t": "T"})
    assert c4a.verdict == "partly reproduced" and c4e.verdict == "reproduced"
    assert c4d.verdict == c4a.verdict  # the same comparisons give the same verdict


def test_early_and_skip_contrasts_decide_c4b_and_c4c():
    """Full model: ratio 4 in layers 1-2, 1 in 3-4 (early advantage); variants with skips
    ratio 2, without 1 (skip advantage); each training seed is a unit."""
    residuals = constructed({"full model": [4.0, 4.0, 1.0, 1.0], "without FFN": [2.0] * 4,
                             "without skip": [1.0] * 4, "pure": [1.0] * 4})
    early, skips = early_contrast(residuals), skip_contrast(residuals)
    assert early.verdict.item() == "more" and early.ratio.item() == pytest.approx(4.0)
    assert skips.verdict.item() == "more"
    assert skips.ratio.item() == pytest.approx(2.0)  # (log 4 + log 4 + 4 log 2) / 8 = log 2
    reverse = constructed({"full model": [1.0, 1.0, 4.0, 4.0], "without skip": [3.0] * 4})
    assert early_contrast(reverse).verdict.item() == "less"
    assert skip_contrast(reverse).verdict.item() == "less"
    # less behind with skips is not more ahead: no advantage, so the claim is not reproduced
    behind = constructed({"full model": [0.8] * 4, "without skip": [0.4] * 4})
    skips_behind = skip_contrast(behind)
    assert skips_behind.verdict.item() == "more" and skips_behind.first_verdict.item() == "less"
    # deep layers at the floor without skips: only the layers all variants keep are compared
    deep = constructed({"full model": [1.0, 1.0, 8.0, 8.0], "without skip": [1.0, 1.0, 1.0, 1.0]})
    floor = (deep.variant == "without skip") & (deep.layer >= 3)
    deep.loc[floor, "residual"] = 0.0
    assert skip_contrast(deep).verdict.item() == "parity"  # layers 1-2: ratio 1 in both
    c4c = [c for c in claims(layer_comparisons(behind), layer_comparisons(behind), path_comparisons(pd.DataFrame(
        [dict(setting="T, full model", depth=1, seed=s, sample=s, normalization=n, residual=1.0)
         for s in range(5) for n in ("softmax", "sinkhorn")])), {"t": "T"},
        skips=skips_behind) if c.id == "C4c"][0]
    assert c4c.verdict == "not reproduced" and "not ahead there" in c4c.finding
    comparisons = layer_comparisons(residuals)
    claims_ = claims(comparisons, comparisons, path_comparisons(pd.DataFrame(
        [dict(setting="T, full model", depth=1, seed=s, sample=s, normalization=n, residual=1.0)
         for s in range(5) for n in ("softmax", "sinkhorn")])), {"t": "T"},
        early=early, skips=skips)
    assert [c.id for c in claims_] == ["C4a", "C4b", "C4c", "C4d", "C4e"]
    assert claims_[1].verdict == claims_[2].verdict == "reproduced"
    assert "larger early" in claims_[1].finding


def test_claims_table_leaves_out_layers_mostly_at_the_floor():
    residuals = constructed({"full model": [2.0, 3.0, 5.0]})
    residuals.loc[(residuals.layer == 3) & (residuals["seed"] < 5), "residual"] = 1e-20
    table = claims_table(layer_comparisons(residuals)).iloc[0]
    assert table.layers_at_floor == 1 and table.largest_ratio_layer == 2
    assert table.mean_log10_ratio == pytest.approx((np.log10(2) + np.log10(3)) / 2)


def test_accuracy_table_means_over_seeds():
    class Cfg:
        dataset = "toy"
    results = {"text": {(name, seed): TrainResult(None, Cfg(), acc, 60.0, 10, [], True)
                        for (name, seed), acc in [(("softmax", 0), 0.8), (("softmax", 1), 0.6),
                                                  (("sinkhorn", 0), 0.9), (("sinkhorn", 1), 0.7)]}}
    table = accuracy_table(results)
    assert table.loc[("text", "toy", "softmax"), "accuracy"] == pd.Series([0.8, 0.6]).mean()
    assert table.loc[("text", "toy", "sinkhorn"), "seeds"] == 2
    assert table.loc[("text", "toy", "sinkhorn"), "train_minutes"] == 1.0


def test_accuracy_claim_counts_a_match_or_an_improvement():
    from types import SimpleNamespace

    from rankcollapse.experiments.trained_models import accuracy_claim

    def results(soft, sink):
        return {"t": {**{("softmax", s): SimpleNamespace(test_accuracy=a) for s, a in enumerate(soft)},
                      **{("sinkhorn", s): SimpleNamespace(test_accuracy=a) for s, a in enumerate(sink)}}}
    same = accuracy_claim(results([0.8, 0.81, 0.79], [0.8, 0.81, 0.79]), {"t": "T"})
    assert same.verdict == "reproduced" and same.number == pytest.approx(1.0)
    better = accuracy_claim(results([0.5, 0.52, 0.49], [0.8, 0.81, 0.79]), {"t": "T"})
    assert better.verdict == "reproduced" and better.number > 1.5
    worse = accuracy_claim(results([0.8, 0.81, 0.79], [0.5, 0.52, 0.49]), {"t": "T"})
    assert worse.verdict == "contradicted" and worse.interval[1] < 1
    one_seed = accuracy_claim(results([0.8], [0.8]), {"t": "T"})
    assert one_seed.verdict == "not testable here"
