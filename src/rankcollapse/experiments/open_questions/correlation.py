"""C6d, the paper's hypothesis decided in trained models: path products whose factors come
from *different* inputs (each factor from an independent input, or the inputs shuffled
within each layer) against paths from one input. If the Sinkhorn advantage comes from the
correlation of attention along a real path, it shrinks when that correlation is broken."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch

from ... import recording as rec
from ...claim_rows import Claim
from ...data import Dataset
from ...measures import FLOOR, Paths, path_products, relative_residual, sample_paths
from ...models import Classifier, Switches
from ...primary_tests import run_part
from ...profiles import Profile
from ...registry import registered
from ...stats import (WORDS, compare_table)
from ...verdicts import results_sentence

MODES = ("one input", "inputs mixed", "inputs shuffled")  # factors' inputs of a path


def mode_paths(paths: Paths, mode: str, batch: int, n_layers: int,
               generator: torch.Generator) -> Paths:
    """`paths` with the inputs of their factors chosen by `mode` (`MODES`): every factor from
    the path's one input; each factor from an independent random input; or each layer's
    inputs shuffled (a random permutation per layer applied to the path's input)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
    one = paths.samples[:, None].expand_as(paths.layers)
    if mode == "one input":
        samples = one
    elif mode == "inputs mixed":
        samples = torch.randint(batch, paths.layers.shape, generator=generator)
    else:
        perms = torch.stack([torch.randperm(batch, generator=generator) for _ in range(n_layers)])
        samples = perms[paths.layers, one]
    return Paths(paths.layers, paths.heads, samples)


def mechanism_paths(attn: torch.Tensor, n_paths: int, seed: int, depths=None) -> pd.DataFrame:
    """Rank-1 residual of attention products, the same sampled paths (layers, heads) in
    every mode of `MODES`; attn `(layers, batch, heads, n, n)` without padding."""
    n_layers, batch, n_heads = attn.shape[:3]
    frames = []
    for depth in depths or range(2, n_layers + 1):
        g = torch.Generator().manual_seed(seed + depth)
        base = sample_paths(n_layers, n_heads, depth, n_paths, batch, g)
        for mode in MODES:
            p = mode_paths(base, mode, batch, n_layers, g)
            res = relative_residual(path_products(attn, p).double(), "composite", kind="rank1")
            frames.append(pd.DataFrame({"mode": mode, "depth": depth, "path": np.arange(n_paths),
                                        "sample": p.samples[:, 0].numpy(),
                                        "residual": res.numpy()}))
    return pd.concat(frames, ignore_index=True)


def mechanism(models: dict[str, dict[tuple[str, int], Classifier]], tests: dict[str, Dataset],
              n_eval: int, n_paths: int, seed: int) -> pd.DataFrame:
    """`mechanism_paths` of every complete model of the tasks without padding (images: the
    products of text attention with different paddings would not act on the same tokens),
    in float64; columns task, normalization, seed added."""
    frames = []
    for task, by_model in models.items():
        if tests[task].mask is not None:
            continue
        for (name, train_seed), model in by_model.items():
            out, _ = rec.record(copy.deepcopy(model).double(), tests[task], n_eval, Switches())
            frames.append(mechanism_paths(out.attention.double(), n_paths, seed).assign(
                task=task, normalization=name, seed=train_seed))
    return pd.concat(frames, ignore_index=True)


def mechanism_comparisons(paths: pd.DataFrame) -> pd.DataFrame:
    """Description: Sinkhorn / softmax of the path residual per (task, mode, depth), over
    seeds (intervals simultaneous over the depths of each task and mode)."""
    return compare_table(paths, unit="seed", by=["task", "mode", "depth"],
                         within=["task", "mode"], floor=FLOOR)


def mechanism_data(paths: pd.DataFrame) -> pd.DataFrame:
    """`mechanism`'s table as the data of C6d's registered contrast: the modes
    as variants, the depths as positions."""
    return rec.per_unit(paths.rename(columns={"mode": "variant"}), position="depth")


def mechanism_claim(paths: pd.DataFrame, titles: dict[str, str], profile: Profile) -> Claim:
    """C6d, the paper's hypothesis, decided on trained models: per image task, Sinkhorn's
    advantage in path products with one input against that with each factor from an
    independent input (the registered contrast); it agrees only where Sinkhorn is shown
    ahead with one input. The inputs shuffled are description (the figure)."""
    part = "trained models, correlation broken"
    c6d = run_part("C6d", part, mechanism_data(paths), profile, titles)
    left_out = "; ".join(f"{r.task}: {r.left_out}" for r in c6d if r.left_out)
    finding = ("Trained models, path products of depths 2–L, each seed over the depths at "
               "which none of its products (softmax or Sinkhorn, one input or mixed) is at the "
               "rounding floor, where a ratio would only be a bound"
               + (f" (left out: {left_out})" if left_out else "")
               + "; the ratio Sinkhorn / softmax "
               "with one input divided by that with the inputs mixed (above 1: the advantage "
               "shrinks when the correlation is broken): "
               + results_sentence(c6d, "seeds", registered("C6d").part(part).estimate())
               + " Whether Sinkhorn is ahead with one input at all (the condition), Sinkhorn "
               "/ softmax there: "
               + "; ".join(f"{r.task}: {WORDS[r.requirement]}" for r in c6d
                           if r.requirement) + ".")
    return Claim.of("C6d", c6d, finding, figure="fig-mechanism")
