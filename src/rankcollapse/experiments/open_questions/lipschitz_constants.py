"""C10, local Lipschitz constants of attention layers (the paper's future work): random
layers over logit scales and token counts, trained layers of chapter 5's models, a check of
the power iteration against the whole Jacobian, and the trained models' sensitivity to small
input perturbations (description)."""

from __future__ import annotations

import copy

import pandas as pd
import torch

from ... import recording as rec
from ...claim_rows import Claim
from ...data import Dataset
from ...lipschitz import jacobian_norm, jacobian_norm_exact, layer_map
from ...models import Classifier, Switches, random_stack
from ...normalizations import NORMALIZATIONS
from ...primary_tests import run_part
from ...profiles import Profile
from ...registry import registered, size_scale_label
from ...stats import (WORDS, compare_table, significant,
                      unit_values)
from ...verdicts import results_sentence

# power iteration to a relative change of 1e-3 or 30 steps, a lower bound of the norm
# (`power_iteration_check` measures how close it is)
POWER = dict(rtol=1e-3, max_iter=30)


def random_lipschitz(d_model: int, n_heads: int, scales, sizes, draws: int, seed: int,
                     n_iter: int) -> pd.DataFrame:
    """Local Lipschitz constant of one random attention layer (Gaussian weights with logit
    scale s, `models.init_random_`) at a random input of n unit-variance tokens, softmax
    and Sinkhorn on the same weights and input; `draws` independent (weights, input) draws
    per (n, s). Columns n, logit_std, draw, normalization, lipschitz."""
    rows = []
    for n in sizes:
        for s in scales:
            for draw in range(draws):
                unit_seed = seed + 1000 * draw
                x = torch.randn(n, d_model, generator=torch.Generator().manual_seed(unit_seed),
                                dtype=torch.float64)
                for name in NORMALIZATIONS:
                    layer = random_stack(d_model, n_heads, 1, name, s, Switches(), unit_seed,
                                         n_iter).blocks[0].attn
                    rows.append({"n": n, "logit_std": s, "draw": draw, "normalization": name,
                                 "lipschitz": jacobian_norm(layer_map(layer), x, seed=draw,
                                                            **POWER)})
    return pd.DataFrame(rows)


def check_tokens(d_model: int, n: int, entries: int) -> int:
    """The token count of `power_iteration_check`: n, or fewer so that n * d_model is at most
    `entries` (the profile's `ch6.check_entries`; at least 2 tokens)."""
    return max(2, min(n, entries // d_model))


def power_iteration_check(d_model: int, n_heads: int, n: int, seed: int, n_iter: int,
                          logit_std: float = 1.0) -> pd.DataFrame:
    """The chapter's power iteration (`POWER`) against the whole Jacobian's largest singular
    value, for one random layer of each normalization: columns power iteration, whole
    Jacobian, relative gap."""
    x = torch.randn(n, d_model, generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64)
    rows = {}
    for name in NORMALIZATIONS:
        f = layer_map(random_stack(d_model, n_heads, 1, name, logit_std, Switches(), seed,
                                   n_iter).blocks[0].attn)
        power, exact = jacobian_norm(f, x, **POWER), jacobian_norm_exact(f, x)
        rows[name] = {"power iteration": power, "whole Jacobian": exact,
                      "relative gap": (exact - power) / exact}
    return pd.DataFrame(rows).T.rename_axis("normalization")


def trained_lipschitz(models: dict[str, dict[tuple[str, int], Classifier]],
                      tests: dict[str, Dataset], n_inputs: int) -> pd.DataFrame:
    """Local Lipschitz constant of the attention layers C10 registers (the first, middle and
    last of each model's own depth) of the complete trained models, each at its own input
    (the LayerNorm of the previous hidden state, real tokens only) for the first `n_inputs`
    test inputs. Columns task, normalization, seed, layer, sample, lipschitz."""
    span = registered("C10").part("trained layers").span
    rows = []
    for task, by_model in models.items():
        for (name, seed), model in by_model.items():
            exact = copy.deepcopy(model).double()
            out, mask = rec.record(exact, tests[task], n_inputs, Switches())
            for layer in span.window(len(exact.encoder.blocks)):
                block = exact.encoder.blocks[layer - 1]
                with torch.no_grad():
                    h = block.ln1(out.hidden[layer - 1])
                for i in range(h.shape[0]):
                    tokens = h[i] if mask is None else h[i][mask[i]]
                    rows.append({"task": task, "normalization": name, "seed": seed,
                                 "layer": layer, "sample": i,
                                 "lipschitz": jacobian_norm(layer_map(block.attn), tokens,
                                                            **POWER)})
    return pd.DataFrame(rows)


def sensitivity(models: dict[str, dict[tuple[str, int], Classifier]],
                tests: dict[str, Dataset], n_inputs: int, eps: float = 1e-4,
                directions: int = 4, seed: int = 0) -> pd.DataFrame:
    """Relative change of a trained model's class logits per relative change of its input
    embeddings, `(|f(e + d) - f(e)| / |f(e)|) / (|d| / |e|)` with `|d| = eps |e|` in random
    directions (per input, Frobenius norms, float64; padded tokens unperturbed). Columns
    task, normalization, seed, sample, direction, sensitivity."""
    rows = []
    g = torch.Generator().manual_seed(seed)
    for task, by_model in models.items():
        data = tests[task].first(n_inputs)
        for (name, train_seed), model in by_model.items():
            exact = copy.deepcopy(model).double().eval()
            x = data.x if not data.x.is_floating_point() else data.x.double()
            with torch.no_grad():
                e = exact.embed(x)
                base = exact.head(exact.norm(exact.encoder(e, data.mask).x[:, 0]))
                for k in range(directions):
                    d = torch.randn(e.shape, generator=g, dtype=torch.float64)
                    if data.mask is not None:
                        d = d * data.mask[..., None]
                    size = e.flatten(1).norm(dim=1) / d.flatten(1).norm(dim=1)
                    d *= eps * size[:, None, None]
                    moved = exact.head(exact.norm(exact.encoder(e + d, data.mask).x[:, 0]))
                    change = (moved - base).norm(dim=1) / base.norm(dim=1) / eps
                    rows += [{"task": task, "normalization": name, "seed": train_seed,
                              "sample": i, "direction": k, "sensitivity": float(c)}
                             for i, c in enumerate(change)]
    return pd.DataFrame(rows)


def lipschitz_claim(random: pd.DataFrame, trained: pd.DataFrame, sensitive: pd.DataFrame,
                    titles: dict[str, str], profile: Profile) -> Claim:
    """C10: Sinkhorn against softmax, local Lipschitz constants of random layers (units:
    weight draws, per n and logit scale) and of trained layers (units: training seeds), the
    registered tests that decide the verdict; and the sensitivity of trained models (units:
    training seeds), description beside it."""
    wide = unit_values(random, "draw", ["n", "logit_std"], "lipschitz")
    rand = run_part("C10", "random layers", wide.assign(task=[
        size_scale_label(n, s) for n, s in zip(wide["n"], wide["logit_std"])]).rename(
            columns={"draw": "unit"}), profile)
    layers = run_part("C10", "trained layers", rec.per_unit(trained.assign(variant="full model"),
                                                       "lipschitz"), profile, titles)
    sens = compare_table(sensitive, unit="seed", by=["task"], value="sensitivity")
    parts = ["Random layers: " + results_sentence(rand, "draws"),
             "Trained layers (first, middle and last): " + results_sentence(layers, "seeds"),
             "(The sensitivities below are averages over random directions, not Lipschitz "
             "constants, and do not enter the verdict.)"]
    parts += [f"Sensitivity of the trained models to their input, {titles[r.task]}: "
              f"Sinkhorn / softmax {significant(r.ratio)} ({100 * r.level:.3g}% interval "
              f"{significant(r.low)}–{significant(r.high)}, {r.units} seeds): "
              f"{WORDS[r.verdict]}." for r in sens.itertuples()]
    return Claim.of("C10", rand + layers, " ".join(parts), figure="fig-lipschitz")
