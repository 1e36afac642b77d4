"""Random attention products against trained ones (claim C6c).

The paper reports that products of random stochastic matrices decay *more slowly* than the
products of attention matrices taken from a trained model, and attributes the difference to
input dependence. Here: chapter 4's control (independent N(0, 1) logits, normalized by
softmax or Sinkhorn) drawn at each trained model's shape (layers, heads, tokens), against the
complete trained models' path products (chapter 5). The two sides are independent groups,
not pairs: the trained side's units are the training seeds, the random side's the pools, and
the comparison is `stats.compare_groups` of their medians over paths.
"""

from __future__ import annotations

import pandas as pd

from ..normalizations import NORMALIZATIONS
from ..stats import Claim, claim_verdict, compare_groups, describe
from .random_matrix_control import pooled_paths, random_pool
from .trained_models import FLOOR


def random_products(shapes: dict[str, tuple[int, int, int]], n_pools: int, n_paths: int,
                    seed: int, batch: int = 8, scale: float = 1.0,
                    n_iter: int = 50) -> pd.DataFrame:
    """Rank-1 residual of random attention products (`random_matrix_control.pooled_paths`)
    for each task's (layers, heads, tokens), at every depth; column task."""
    frames = [pooled_paths({task: random_pool(layers, batch, heads, tokens, scale,
                                              n_iter=n_iter)},
                           n_pools, range(1, layers + 1), n_paths, seed).rename(
                               columns={"setting": "task"})
              for task, (layers, heads, tokens) in shapes.items()]
    return pd.concat(frames, ignore_index=True)


def random_contrast(paths: pd.DataFrame, random: pd.DataFrame, variant: str = "full model",
                    min_depth: int = 2) -> pd.DataFrame:
    """Per task, normalization and depth >= `min_depth` (depth 1 is one matrix, not a
    product): the ratio random / trained of the median rank-1 residual of path products, over
    the trained models' seeds against the random pools (`stats.compare_groups`). Columns
    task, normalization, depth, ratio, low, high, units, excluded, verdict ('more': the
    random products keep more rank, i.e. decay more slowly)."""
    trained = (paths[(paths["variant"] == variant) & (paths["depth"] >= min_depth)]
               .groupby(["task", "normalization", "depth", "seed"])["residual"].median())
    pools = (random[random["depth"] >= min_depth]
             .groupby(["task", "normalization", "depth", "pool"])["residual"].median())
    rows = []
    for (task, name, depth), values in trained.groupby(level=[0, 1, 2], sort=False):
        c = compare_groups(values.to_numpy(), pools.loc[(task, name, depth)].to_numpy(),
                           floor=FLOOR)
        rows.append({"task": task, "normalization": name, "depth": depth, "ratio": c.ratio,
                     "low": c.low, "high": c.high, "units": c.units, "excluded": c.excluded,
                     "verdict": c.verdict})
    return pd.DataFrame(rows)


def claim(contrast: pd.DataFrame, titles: dict[str, str]) -> Claim:
    """C6c: random products decay more slowly than trained ones, i.e. the ratio random /
    trained is above 1 at every (task, normalization, depth)."""
    parts = [f"{titles[task]}, {'Sinkhorn' if name == 'sinkhorn' else name}: "
             + describe(g, "depth", more="random products keep more",
                        less="random products keep less")
             for task in titles for name in NORMALIZATIONS
             if len(g := contrast[(contrast["task"] == task)
                                  & (contrast["normalization"] == name)])]
    return Claim("C6c", "random stochastic products decay more slowly than trained attention "
                 "products", claim_verdict("more", contrast["verdict"].tolist()),
                 "Rank-1 residual of path products, random / trained (complete models; seeds "
                 "against independent pools of random matrices of the same shape): "
                 + " ".join(parts)).with_numbers(
        contrast, figure="fig-random-vs-trained",
        measure="random / trained residual of path products, geometric mean of the ratios")
