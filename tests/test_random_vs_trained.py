"""C6c: random attention products against trained ones, on constructed tables whose answer
is known, and the random side's shape."""

import numpy as np
import pandas as pd
import pytest

from rankcollapse.experiments.random_vs_trained import claim, random_contrast, random_products


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
    c6c = claim(contrast, {"t": "Task"})
    assert c6c.verdict == "reproduced" and "random products keep more" in c6c.finding
    assert c6c.number == pytest.approx(100.0, rel=0.05)


def test_the_other_way_round_contradicts():
    contrast = random_contrast(*tables(1e-1, 1e-3))
    assert (contrast.verdict == "less").all()
    assert claim(contrast, {"t": "Task"}).verdict == "contradicted"


def test_only_the_chosen_variant_counts():
    paths, random = tables(1e-3, 1e-1)
    paths.loc[paths.variant == "x", "residual"] = 1.0  # would say "less" if it were used
    assert (random_contrast(paths, random).verdict == "more").all()


def test_random_products_have_each_tasks_shape():
    table = random_products({"a": (3, 1, 4), "b": (2, 2, 5)}, n_pools=2, n_paths=3, seed=0,
                            batch=2, n_iter=10)
    assert set(table.task) == {"a", "b"}
    assert table.groupby("task").depth.max().to_dict() == {"a": 3, "b": 2}
    assert set(table.pool) == {0, 1} and set(table.normalization) == {"softmax", "sinkhorn"}
