"""Random attention products against trained ones (claim C6c).

The paper reports that products of random stochastic matrices decay *more slowly* than the
products of attention matrices taken from a trained model, and attributes the difference to
input dependence. Here: chapter 4's control (independent Gaussian logits, normalized by
softmax or Sinkhorn) drawn at each trained model's shape (layers, heads, tokens) and at its
measured logit scale, layer by layer (the median over seeds and inputs of the standard
deviation of the trained logits), against the complete trained models' path products
(chapter 5). The two sides are independent groups, not pairs: the trained side's units are
the training seeds, the random side's the pools.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..normalizations import NORMALIZATIONS
from ..profiles import Profile
from ..claim_rows import Claim
from ..primary_tests import run_part
from ..stats import compare_groups, describe, family_level
from ..verdicts import results_sentence
from .random_matrix_control import pooled_paths, random_pool
from ..measures import FLOOR


def measured_scales(attention: pd.DataFrame) -> dict[tuple[str, str], np.ndarray]:
    """Per (task, normalization) of chapter 5's attention table, the logit scale of each
    layer 1..L: the median over seeds and inputs of the logits' standard deviation."""
    medians = attention.groupby(["task", "normalization", "layer"])["logit_std"].median()
    return {key: g.sort_index(level="layer").to_numpy()
            for key, g in medians.groupby(level=[0, 1], sort=False)}


def random_products(shapes: dict[str, tuple[int, int, int]],
                    scales: dict[tuple[str, str], np.ndarray], n_pools: int, n_paths: int,
                    seed: int, batch: int = 8, *, n_iter: int) -> pd.DataFrame:
    """Rank-1 residual of random attention products (`random_matrix_control.pooled_paths`)
    for each task's (layers, heads, tokens), at every depth, one set of pools per (task,
    normalization) at that model's measured logit scales; columns task, normalization."""
    frames = []
    for (task, name), scale in scales.items():
        layers, heads, tokens = shapes[task]
        pools = pooled_paths({task: random_pool(layers, batch, heads, tokens, scale,
                                                n_iter=n_iter)},
                             n_pools, range(1, layers + 1), n_paths, seed)
        frames.append(pools[pools["normalization"] == name].rename(columns={"setting": "task"}))
    return pd.concat(frames, ignore_index=True)


def _medians(paths: pd.DataFrame, random: pd.DataFrame, variant: str, min_depth: int
             ) -> tuple[pd.Series, pd.Series]:
    trained = (paths[(paths["variant"] == variant) & (paths["depth"] >= min_depth)]
               .groupby(["task", "normalization", "depth", "seed"])["residual"].median())
    pools = (random[random["depth"] >= min_depth]
             .groupby(["task", "normalization", "depth", "pool"])["residual"].median())
    return trained, pools


def random_contrast(paths: pd.DataFrame, random: pd.DataFrame, variant: str = "full model",
                    min_depth: int = 2) -> pd.DataFrame:
    """Description per task, normalization and depth >= `min_depth` (depth 1 is one matrix,
    not a product): the ratio random / trained of the median rank-1 residual of path
    products, over the trained models' seeds against the random pools
    (`stats.compare_groups`, censored at the float64 floor, intervals simultaneous over the
    depths of each task and normalization). Columns task, normalization, depth, ratio, low,
    high, level, units, verdict ('more': the random products keep more rank)."""
    trained, pools = _medians(paths, random, variant, min_depth)
    rows = []
    for (task, name), by_depth in trained.groupby(level=[0, 1], sort=False):
        level = family_level(by_depth.index.get_level_values("depth").nunique())
        for depth, values in by_depth.groupby(level="depth", sort=False):
            c = compare_groups(values.to_numpy(), pools.loc[(task, name, depth)].to_numpy(),
                               floor=FLOOR, level=level)
            rows.append({"task": task, "normalization": name, "depth": depth,
                         "ratio": c.ratio, "low": c.low, "high": c.high, "level": c.level,
                         "units": c.units, "verdict": c.found})
    return pd.DataFrame(rows)


def registered_data(paths: pd.DataFrame, random: pd.DataFrame, variant: str = "full model"
                    ) -> pd.DataFrame:
    """C6c's data (`primary_tests.run_part`, a groups test): per task '<task>, <normalization>' the
    trained seeds' (group 'reference') and the random pools' ('other') medians over paths
    at each depth."""
    trained, pools = _medians(paths, random, variant, 1)
    frames = [s.rename("value").reset_index().rename(columns={unit: "unit"})
              .assign(group=group) for s, unit, group in ((trained, "seed", "reference"),
                                                          (pools, "pool", "other"))]
    data = pd.concat(frames, ignore_index=True)
    return data.assign(task=data["task"] + ", " + data["normalization"],
                       variant=variant).rename(columns={"depth": "position"})


def claim(paths: pd.DataFrame, random: pd.DataFrame, titles: dict[str, str],
          profile: Profile) -> Claim:
    """C6c: the registered test, random / trained residual of path products per task and
    normalization, depths 2..L."""
    names = {f"{t}, {n}": f"{titles[t]}, {'Sinkhorn' if n == 'sinkhorn' else n}"
             for t in titles for n in NORMALIZATIONS}
    tested = run_part("C6c", "random against trained", registered_data(paths, random), profile,
                 names)
    return Claim.of("C6c", tested, "Rank-1 residual of path products, random / trained (complete "
                    "models; seeds against independent pools of random matrices of the same "
                    "shape and measured logit scale; depths 2–L): " + results_sentence(
                        tested, ("seeds", "pools"), "random / trained"),
                    figure="fig-random-vs-trained")


def sentences(contrast: pd.DataFrame, titles: dict[str, str]) -> str:
    """The per-depth description of `random_contrast`, per task and normalization."""
    return " ".join(f"{titles[task]}, {'Sinkhorn' if name == 'sinkhorn' else name}: "
                    + describe(g, "depth", more="random higher",
                               less="random lower")
                    for (task, name), g in contrast.groupby(["task", "normalization"],
                                                            sort=False))
