"""C6c: random attention products against trained ones, on constructed tables whose answer
is known, and the random side's shape."""

import numpy as np
import pandas as pd
import pytest

from dataclasses import replace

from rankcollapse.experiments.random_vs_trained import (claim, measured_scales, random_contrast,
                                                        random_products, registered_data)
from rankcollapse.profiles import Task, get_profile

TOY = replace(get_profile("ci"), depth_sweep=None, tasks={"t": Task("mnist10k", depth=3, d_model=8, n_heads=1,
                                                  d_ff=8, epochs=1, batch_size=1, lr=1e-3,
                                                  warmup_steps=1)})


def tables(trained_value, random_value, seeds=3, pools=5):
    rng = np.random.default_rng(0)
    paths = pd.DataFrame([{"task": "t", "normalization": name, "variant": variant, "seed": s,
                           "depth": d, "path": p, "residual": trained_value * (1 + p)
                           * np.exp(0.01 * rng.normal())}
                          for name in ("softmax", "sinkhorn") for variant in ("full model", "x")
                          for s in range(seeds) for d in (1, 2, 3) for p in range(3)])
    random = pd.DataFrame([{"task": "t", "normalization": name, "pool": q, "depth": d,
                            "path": p, "residual": random_value * (1 + p)
                            * np.exp(0.01 * rng.normal())}
                           for name in ("softmax", "sinkhorn") for q in range(pools)
                           for d in (1, 2, 3) for p in range(3)])
    return paths, random


def test_random_over_trained_is_the_ratio_and_depth_one_is_left_out():
    paths, random = tables(1e-3, 1e-1)
    contrast = random_contrast(paths, random)
    assert set(contrast.depth) == {2, 3} and len(contrast) == 4
    np.testing.assert_allclose(contrast.ratio, 100.0, rtol=0.05)
    assert (contrast.verdict == "more").all() and (contrast.units == 3).all()
    c6c = claim(paths, random, {"t": "Task"}, TOY)
    assert c6c.verdict == "reproduced" and ": random / trained " in c6c.finding
    assert c6c.finding.endswith("): higher.")
    assert [r.task for r in c6c.results] == ["Task, softmax", "Task, Sinkhorn"]
    assert c6c.results[0].number == pytest.approx(100.0, rel=0.05)
    assert c6c.results[0].units == (3, 5)  # seeds, pools
    data = registered_data(paths, random)
    assert set(data.group) == {"reference", "other"} and set(data.position) == {1, 2, 3}


def test_the_other_way_round_contradicts():
    paths, random = tables(1e-1, 1e-3)
    assert (random_contrast(paths, random).verdict == "less").all()
    assert claim(paths, random, {"t": "Task"}, TOY).verdict == "contradicted"


def test_only_the_chosen_variant_counts():
    paths, random = tables(1e-3, 1e-1)
    paths.loc[paths.variant == "x", "residual"] = 1.0  # would say "less" if it were used
    assert (random_contrast(paths, random).verdict == "more").all()


def test_random_products_have_each_tasks_shape_and_measured_scale():
    attention = pd.DataFrame([{"task": t, "normalization": n, "layer": l, "seed": s,
                               "logit_std": (0.5 if n == "softmax" else 2.0) * l}
                              for t, layers in (("a", 3), ("b", 2)) for n in ("softmax", "sinkhorn")
                              for l in range(1, layers + 1) for s in range(3)])
    scales = measured_scales(attention)
    np.testing.assert_allclose(scales[("a", "sinkhorn")], [2.0, 4.0, 6.0])
    table = random_products({"a": (3, 1, 4), "b": (2, 2, 5)}, scales, n_pools=2, n_paths=3,
                            seed=0, batch=2, n_iter=10)
    assert set(table.task) == {"a", "b"}
    assert table.groupby("task").depth.max().to_dict() == {"a": 3, "b": 2}
    assert set(table.pool) == {0, 1} and set(table.normalization) == {"softmax", "sinkhorn"}
    # larger logits, sharper attention, less mixing: the Sinkhorn pools (logit scales 2-6)
    # keep more rank than the softmax pools (0.5-1.5)
    deep = table[table.depth == 2].groupby(["task", "normalization"]).residual.median()
    assert deep[("a", "sinkhorn")] > deep[("a", "softmax")]
