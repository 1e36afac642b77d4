"""Chapter 5's measurements on tiny models: shapes, masks, the claims table, the switches."""

import pandas as pd
import torch

from rankcollapse.data import Dataset, Tokenizer
from rankcollapse.models import Switches
from rankcollapse.profiles import Task
from rankcollapse.train import TrainResult
from rankcollapse.trained import (VARIANTS, accuracy_table, analyse, claims, record,
                                  switched, train_config)
from rankcollapse.models import build_model


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
    out, mask = record(tiny_models(data)["sinkhorn"], data, 8, Switches(), "cpu", batch_size=3)
    assert out.hidden.shape == (4, 8, 8, 16) and out.attention.shape == (3, 8, 2, 8, 8)
    assert torch.equal(mask, data.mask[:8])
    assert (out.attention[:, 1, :, 3:, :] == 0).all()  # "a b" + <cls>: 3 real tokens
    assert (out.attention[:, 1, :, :3, :3] > 0).all()


def test_analyse_and_claims_tables():
    data = text_data()
    residuals, paths = analyse({"text": tiny_models(data)}, {"text": data}, n_eval=8,
                               n_paths=5, seed=0, device="cpu")
    assert set(residuals.variant) == set(VARIANTS)
    assert len(residuals) == 2 * len(VARIANTS) * 4 * 8  # norms x variants x layers x samples
    assert residuals.residual.between(0, 2).all()
    assert set(paths.variant) == {"full model", "without skip"} and len(paths) == 2 * 2 * 3 * 5
    table = claims(residuals)
    assert list(table.variant) == list(VARIANTS) and set(table.task) == {"text"}
    assert table.layers_sinkhorn_higher.str.endswith("/3").all()


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
