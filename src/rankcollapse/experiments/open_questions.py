"""Chapter 6: the questions the paper left open, answered with experiments.

- **B1** pure self-attention (no FFN, no skip connections) *trained* that way, with and
  without LayerNorm, against the complete models of chapter 5 run with the same parts
  switched off only at inference: accuracy and the layer-wise residual.
- **C6d** the paper's hypothesis, decided in trained models: path products whose factors
  come from *different* inputs (each factor from an independent input, or the inputs
  shuffled within each layer) against paths from one input. If the Sinkhorn advantage comes
  from the correlation of attention along a real path, it shrinks when that correlation is
  broken.
- **B3** the normalization swapped at inference (softmax-trained weights run with Sinkhorn,
  and the reverse): what the weights learned against what the normalization does.
- **B4** how many Sinkhorn iterations inference needs: the Sinkhorn-trained models run with
  1 to 50 iterations (and with one half-step, which is softmax).
- **C10** (`lipschitz`) local Lipschitz constants of attention layers, random and trained,
  and the sensitivity of trained models to small input perturbations.

Every question is decided by its registered primary tests (`registry`) over independent
units (training seeds; weight draws for random layers); the verdicts say what was found
(`verdicts.finding_verdict`, `iterations_verdict`); C6d, a claim of the paper, by the
claim rule.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from ..data import Dataset
from ..lipschitz import jacobian_norm, jacobian_norm_exact, layer_map
from ..measures import FLOOR, Paths, path_products, relative_residual, sample_paths
from ..models import Classifier, Switches, random_stack
from ..normalizations import NORMALIZATIONS, marginal_errors
from ..profiles import Profile
from ..claim_rows import Claim
from ..primary_tests import run_part, run_sequence
from ..registry import ACCURACY_MARGIN, ITERATIONS, registered, size_scale_label
from ..stats import WORDS, compare_groups, compare_table, describe, family_level, significant, \
    unit_values
from ..verdicts import LEARNED, iterations_verdict, results_sentence
from ..names import display, quoted
from ..tasks import PURE, SCRATCH
from ..timing import interleaved_times
from ..training import TrainResult, evaluate
from .. import trainings
from .. import recording as rec

HALF_STEP = min(ITERATIONS)  # B4: one half-step (a row normalization of exp(logits)) is softmax
ACCURACY_INPUTS = 500  # test inputs for the accuracies of B1, B3 and B4
MODES = ("one input", "inputs mixed", "inputs shuffled")  # C6d
# C10: power iteration to a relative change of 1e-3 or 30 steps, a lower bound of the norm
# (`power_iteration_check` measures how close it is)
POWER = dict(rtol=1e-3, max_iter=30)


# ----------------------------------------------------------------------------- B1


def scratch_models(settings: Profile, device: str = "auto", cache_dir=None, quiet: bool = False
                   ) -> dict[str, dict[str, dict[tuple[str, int], TrainResult]]]:
    """Per task role of the profile's `scratch_tasks` and per `SCRATCH` variant, one model per
    (normalization, seed of `scratch_seeds`) trained with those parts switched off, where the
    model cache lacks it (`settings.train_jobs` side by side), and loaded
    (`trainings.ensure`)."""
    wanted = trainings.planned(settings, tuple(trainings.PURE), sweep=False)
    models: dict[str, dict[str, dict[tuple[str, int], TrainResult]]] = {}
    for t, r in trainings.ensure(wanted, settings.train_jobs, device, cache_dir, quiet).items():
        variant = models.setdefault(t.task, {}).setdefault(PURE[t.variant], {})
        variant[(t.normalization, t.seed)] = r
    return models


def scratch_analysis(scratch: dict[str, dict[tuple[str, int], TrainResult]],
                     complete: dict[tuple[str, int], TrainResult], test: Dataset, n_eval: int,
                     device: torch.device, task: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Accuracy (on the first `ACCURACY_INPUTS` test inputs) and the hidden-state residuals
    (first `n_eval` inputs, float64) of `task`'s models trained pure (`training` 'from
    scratch') and of its complete models with the same parts switched off at inference
    ('switched off at inference'): two long tables with columns task, variant, training,
    normalization, seed."""
    accuracy, residuals = [], []
    for variant, switches in SCRATCH.items():
        runs = {"from scratch": scratch[variant], "switched off at inference": complete}
        for training, results in runs.items():
            for (name, seed), result in results.items():  # both run with `switches`
                labels = dict(task=task, variant=variant, training=training,
                              normalization=name, seed=seed)
                with rec.switched(result.model, switches) as model:
                    accuracy.append({**labels, "accuracy": evaluate(
                        model, _first(test, ACCURACY_INPUTS), device)})
                out, mask = rec.record(copy.deepcopy(result.model).double(), test, n_eval,
                                      switches)
                residuals.append(rec.hidden_residuals(out, mask).assign(**labels))
    return pd.DataFrame(accuracy), pd.concat(residuals, ignore_index=True)


def _first(data: Dataset, n: int) -> Dataset:
    """The first `n` examples of `data` (all of them if fewer)."""
    if len(data) <= n:
        return data
    return replace(data, x=data.x[:n], y=data.y[:n],
                   mask=None if data.mask is None else data.mask[:n])


@dataclass
class ScratchStudy:
    """B1's data (`scratch_study`): `accuracy` and `residuals` (`scratch_analysis`, every
    scratch task), `contrast` (`training_contrast`) and each task's `chance` accuracy."""

    accuracy: pd.DataFrame
    residuals: pd.DataFrame
    contrast: pd.DataFrame
    chance: dict[str, float]


def scratch_study(settings: Profile, data: dict[str, tuple[Dataset, Dataset]],
                  complete: dict[str, dict[tuple[str, int], TrainResult]],
                  device: torch.device, cache_dir=None) -> ScratchStudy:
    """B1 for each of the profile's `scratch_tasks`: its models trained pure for the
    profile's `scratch_seeds` (`scratch_models`) against its `complete` models of the same
    seeds with those parts switched off at inference, and chance as one over its number of
    classes. `data`: role -> (train, test)."""
    pure = scratch_models(settings, device, cache_dir)
    analysed, chance = [], {}
    for role in settings.scratch_tasks:
        train_data, test = data[role]
        scratch = pure[role]
        same_seeds = {k: r for k, r in complete[role].items() if k[1] in settings.scratch_seeds}
        analysed.append(scratch_analysis(scratch, same_seeds, test, settings.n_eval, device,
                                         role))
        chance[role] = 1 / len(train_data.classes)
    residuals = pd.concat([r for _, r in analysed], ignore_index=True)
    return ScratchStudy(pd.concat([a for a, _ in analysed], ignore_index=True), residuals,
                        training_contrast(residuals), chance)


def scratch_comparisons(residuals: pd.DataFrame) -> pd.DataFrame:
    """Description: Sinkhorn / softmax of the residual per (task, variant, training, layer),
    over seeds (intervals simultaneous over the layers of each panel)."""
    table = residuals.assign(task=residuals["task"] + " | " + residuals["variant"],
                             variant=residuals["training"])
    out = rec.layer_comparisons(table)
    key = out["task"].str.split(" | ", regex=False, expand=True)
    return out.assign(task=key[0], setting=key[1]).rename(columns={"variant": "training"})


def training_contrast(residuals: pd.DataFrame) -> pd.DataFrame:
    """Description per (task, variant, normalization, layer): the residual of the models
    trained pure against that of the complete models switched off at inference, as two
    independent groups of seeds (`stats.compare_groups`: ratio from scratch / at inference,
    censored at the float64 floor, intervals simultaneous over each panel's layers)."""
    rows = []
    keys = ["task", "variant", "normalization", "layer"]
    values = (residuals[residuals["layer"] > 0].groupby(keys + ["seed", "training"])["residual"]
              .median().unstack("training").reset_index())
    for (task, variant, name), panel in values.groupby(keys[:3], sort=False):
        level = family_level(panel["layer"].nunique())
        for layer, g in panel.groupby("layer"):
            c = compare_groups(g["switched off at inference"].dropna(),
                               g["from scratch"].dropna(), floor=FLOOR, level=level)
            rows.append({"task": task, "variant": variant, "normalization": name,
                         "layer": layer, "ratio": c.ratio, "low": c.low, "high": c.high,
                         "units": c.units, "verdict": c.found})
    return pd.DataFrame(rows)


SCRATCH_PARTS = {"pure attention, LayerNorm": "trained pure, LayerNorm",
                 "pure attention, no LayerNorm": "trained pure, no LayerNorm"}


def _learned_words(accuracy: pd.DataFrame, failed: pd.DataFrame, titles: dict[str, str]
                   ) -> str:
    """Whether the models trained pure learned: all did, none did (with the range of their
    accuracies), or which did not."""
    if failed.empty:
        return f"Every model trained pure beats chance by more than {LEARNED:g}."
    if len(failed) == len(accuracy):
        return (f"None of the {len(failed)} models trained pure beats chance by more than "
                f"{LEARNED:g} (test accuracy {failed['accuracy'].min():.3f}–"
                f"{failed['accuracy'].max():.3f}), so the rank comparison below is between "
                "models that did not learn.")
    return (f"Models trained pure within {LEARNED:g} of chance (they did not learn): "
            + "; ".join(f"{titles[r.task]}, {r.variant}, {display(r.normalization)}, seed "
                        f"{r.seed} ({r.accuracy:.3f})" for r in failed.itertuples()) + ".")


def scratch_claim(accuracy: pd.DataFrame, residuals: pd.DataFrame, contrast: pd.DataFrame,
                  chance: dict[str, float], titles: dict[str, str], profile: Profile) -> Claim:
    """B1: whether pure attention trained from scratch learns (mean accuracy against each
    task's `chance`), which normalization keeps more rank in it (the registered test, which
    decides the verdict), and how training pure changes the residual against switching
    parts off at inference (description)."""
    mean = accuracy.groupby(["task", "variant", "training", "normalization"],
                            sort=False)["accuracy"].mean()
    scratch_acc = accuracy[accuracy["training"] == "from scratch"]
    failed = scratch_acc[scratch_acc["accuracy"] < scratch_acc["task"].map(chance) + LEARNED]
    parts = [_learned_words(scratch_acc, failed, titles)]
    trained_pure = residuals[residuals["training"] == "from scratch"]
    tested = []
    for variant, part in SCRATCH_PARTS.items():
        results = run_part("B1", part, rec.per_unit(trained_pure[trained_pure["variant"] == variant]),
                      profile, titles)
        tested += results
        for task in dict.fromkeys(residuals["task"]):
            acc = ", ".join(f"{display(name)} {mean[(task, variant, 'from scratch', name)]:.3f}"
                            for name in NORMALIZATIONS)
            off = ", ".join(f"{display(name)} "
                            f"{mean[(task, variant, 'switched off at inference', name)]:.3f}"
                            for name in NORMALIZATIONS)
            moved = " ".join(
                f"{display(name)}: " + describe(g, "layer", "layer",
                                                more="trained pure higher",
                                                less="trained pure lower")
                for name, g in contrast[(contrast["variant"] == variant)
                                        & (contrast["task"] == task)].groupby(
                                            "normalization", sort=False))
            parts.append(f"{titles[task]}, with {variant.removeprefix('pure attention, ')}: "
                         f"mean test accuracy trained pure {acc} (chance {chance[task]:.3f}; "
                         f"the complete models with these parts switched off at inference: "
                         f"{off}). Trained pure against switched off at inference, per "
                         f"normalization (description): {moved}")
        parts.append(f"Rank, Sinkhorn / softmax in the models trained pure with "
                     f"{variant.removeprefix('pure attention, ')}, layers 1–L: "
                     + results_sentence(results))
    return Claim.of("B1", tested, " ".join(parts), figure="fig-scratch-residual")


# ----------------------------------------------------------------------------- C6d


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


# ----------------------------------------------------------------------------- B3 and B4


@contextmanager
def attention_set(model: Classifier, normalization: str | None = None,
                  n_iter: int | None = None):
    """Run every attention layer of `model` with another normalization and/or number of
    Sinkhorn iterations inside the block; restore them afterwards."""
    layers = [block.attn for block in model.encoder.blocks]
    saved = [(a.normalization, a.n_iter) for a in layers]
    for a in layers:
        a.normalization = normalization or a.normalization
        a.n_iter = n_iter or a.n_iter
    try:
        yield model
    finally:
        for a, (name, iters) in zip(layers, saved):
            a.normalization, a.n_iter = name, iters


def _iteration_settings(k: float) -> dict:
    return {"normalization": "softmax"} if k == HALF_STEP else {"normalization": "sinkhorn",
                                                                 "n_iter": int(k)}


def swapped(models: dict[str, dict[tuple[str, int], TrainResult]], tests: dict[str, Dataset],
            n_eval: int, device: torch.device) -> tuple[pd.DataFrame, pd.DataFrame]:
    """B3: every complete model run with both normalizations at inference: accuracy (first
    `ACCURACY_INPUTS` test inputs) and hidden-state residuals (first `n_eval`, float64);
    columns task, trained (the normalization trained with), normalization (at inference),
    seed."""
    accuracy, residuals = [], []
    for task, by_model in models.items():
        for (trained, seed), result in by_model.items():
            exact = copy.deepcopy(result.model).double()  # one float64 copy per model
            for name in NORMALIZATIONS:
                labels = dict(task=task, trained=trained, normalization=name, seed=seed)
                with attention_set(result.model, name) as model:
                    accuracy.append({**labels, "accuracy": evaluate(
                        model, _first(tests[task], ACCURACY_INPUTS), device)})
                with attention_set(exact, name) as model:
                    out, mask = rec.record(model, tests[task], n_eval, Switches())
                residuals.append(rec.hidden_residuals(out, mask).assign(**labels))
    return pd.DataFrame(accuracy), pd.concat(residuals, ignore_index=True)


def swap_comparisons(residuals: pd.DataFrame) -> pd.DataFrame:
    """Description: per (task, weights, layer), residual with Sinkhorn / with softmax at
    inference, the same weights, over seeds."""
    return rec.layer_comparisons(residuals.assign(variant="trained with " + residuals["trained"]))


SWAP_PARTS = {"softmax": "weights trained with softmax", "sinkhorn": "weights trained with Sinkhorn"}


def swap_claim(residuals: pd.DataFrame, accuracy: pd.DataFrame, titles: dict[str, str],
               profile: Profile) -> Claim:
    """B3: what Sinkhorn at inference does to the same weights' residual (the registered
    test per task and trained normalization), with the accuracies of the four
    combinations."""
    data = rec.per_unit(residuals.assign(variant="trained with " + residuals["trained"]))
    mean = accuracy.groupby(["task", "trained", "normalization"], sort=False)["accuracy"].mean()
    tested, parts = [], []
    for trained, part in SWAP_PARTS.items():
        results = run_part("B3", part, data[data["variant"] == f"trained with {trained}"], profile,
                      titles)
        tested += results
        acc = "; ".join(f"{titles[t]}: " + ", ".join(
            f"{display(name)} {mean[(t, trained, name)]:.3f}" for name in NORMALIZATIONS)
            for t in dict.fromkeys(accuracy["task"]))
        parts.append(f"Weights trained with {display(trained)}: accuracy at inference {acc}. "
                     "Residual with Sinkhorn / with softmax at inference, layers 1–L: "
                     + results_sentence(results))
    return Claim.of("B3", tested, " ".join(parts), figure="fig-swapped")


def _sinkhorn_trained(models: dict[str, dict[tuple[str, int], TrainResult]]
                     ) -> list[tuple[str, int, TrainResult]]:
    return [(task, seed, result) for task, by_model in models.items()
            for (trained, seed), result in by_model.items() if trained == "sinkhorn"]


def iteration_times(models: dict[str, dict[tuple[str, int], TrainResult]],
                    tests: dict[str, Dataset], n_eval: int, device: torch.device,
                    repeats: int, iterations=ITERATIONS) -> pd.DataFrame:
    """B4's clock: the time of one forward pass of each Sinkhorn-trained model over the first
    `n_eval` test inputs with each number of `iterations` (median of `repeats` interleaved
    rounds: the profile's `iteration_rounds`). Columns task, seed, iterations, ms. Run it
    with nothing else busy on the device."""
    rows = []
    for task, seed, result in _sinkhorn_trained(models):
        batch = _first(tests[task], n_eval)
        x, mask = batch.x.to(device), None if batch.mask is None else batch.mask.to(device)

        def forward(k, model=result.model):
            with torch.no_grad(), attention_set(model, **_iteration_settings(k)):
                model(x, mask)

        times = interleaved_times({k: (lambda k=k: forward(k)) for k in iterations},
                                  repeats, device)
        rows += [{"task": task, "seed": seed, "iterations": k,
                  "ms": 1e3 * float(np.median(times[k]))} for k in iterations]
    return pd.DataFrame(rows)


def iteration_measures(models: dict[str, dict[tuple[str, int], TrainResult]],
                       tests: dict[str, Dataset], n_eval: int, device: torch.device,
                       iterations=ITERATIONS) -> pd.DataFrame:
    """B4: the Sinkhorn-trained models run with each number of `iterations` (`HALF_STEP`:
    softmax): accuracy (first `ACCURACY_INPUTS` test inputs), the relative residual of the
    last hidden state (median over the first `n_eval` inputs, float64) and the attention's
    departure from doubly stochastic (the larger of its row and column errors; median over
    inputs of the largest over layers and heads), per task and seed."""
    rows = []
    for task, seed, result in _sinkhorn_trained(models):
        data = tests[task]
        exact = copy.deepcopy(result.model).double()
        for k in iterations:
            with attention_set(result.model, **_iteration_settings(k)) as model:
                acc = evaluate(model, _first(data, ACCURACY_INPUTS), device)
            with attention_set(exact, **_iteration_settings(k)) as model:
                out, m = rec.record(model, data, n_eval, Switches())
            head_mask = None if m is None else m[None, :, None, :].expand(
                *out.attention.shape[:4])
            rows_error = torch.maximum(*marginal_errors(out.attention.double(), head_mask))
            residual = rec.hidden_residuals(out, m)
            rows.append({"task": task, "seed": seed, "iterations": k, "accuracy": acc,
                         "inputs": min(ACCURACY_INPUTS, len(data)),
                         "residual": float(residual.loc[residual["layer"] ==
                                                        residual["layer"].max(),
                                                        "residual"].median()),
                         "row_error": float(rows_error.amax((0, 2)).median())})
    return pd.DataFrame(rows)


def iteration_sweep(measures: pd.DataFrame, times: pd.DataFrame) -> pd.DataFrame:
    """B4's table: `iteration_measures` with the `iteration_times` of the same models."""
    return measures.merge(times, on=["task", "seed", "iterations"], validate="one_to_one")


def iteration_claim(sweep: pd.DataFrame, titles: dict[str, str], profile: Profile) -> Claim:
    """B4: the registered fixed-sequence test (`primary_tests.run_sequence`): the fewest
    iterations whose accuracy matches that with the most in every task, tested from the
    most down; with its speed-up in time per forward pass and the attention's departure
    from doubly stochastic there."""
    data = sweep.rename(columns={"seed": "unit", "iterations": "position",
                                 "accuracy": "value"})
    tested = run_sequence("B4", data, profile, titles, floor=1 / sweep["inputs"].max())
    full = sweep["iterations"].max()
    needed = iterations_verdict({t: {full: "parity", **{r.at: r.found for r in tested
                                                          if r.task == t}}
                                 for t in dict.fromkeys(r.task for r in tested)})[1]
    per_task = sweep.groupby(["task", "iterations"])["ms"].median().unstack()
    speed = per_task[needed] / per_task[full]
    parts = []
    for task, g in sweep.groupby("task", sort=False):
        at = g.groupby("iterations")[["accuracy", "row_error", "residual"]].mean()
        parts.append(f"{titles[task]}: accuracy {at.loc[full, 'accuracy']:.3f} with {full:g} "
                     f"iterations, {at.loc[needed, 'accuracy']:.3f} with {needed:g}, "
                     f"{at.loc[min(at.index), 'accuracy']:.3f} with one half-step (softmax); "
                     f"departure from doubly stochastic {quoted(at.loc[needed, 'row_error'])} "
                     f"with {needed:g}.")
    below = [r for r in tested if r.at == max(k for k in ITERATIONS if k < full)]
    return Claim.of("B4", tested,
                    f"The fewest iterations whose test accuracy matches that with {full:g} in "
                    f"every task, tested from {full:g} down and stopping at the first count "
                    f"without parity in some task (parity within a factor "
                    f"{1 + ACCURACY_MARGIN:g}, over seeds): {needed:g}; a forward pass then "
                    f"takes {speed.min():.2f}–{speed.max():.2f} of the time with {full:g} "
                    f"(per task, median over seeds, this run's device). "
                    + " ".join(parts) + f" With {below[0].at:g} iterations against {full:g}: "
                    + results_sentence(below, "seeds", "test accuracy with "
                                       f"{below[0].at:g} iterations / with {full:g}"),
                    figure="fig-iterations")


# ----------------------------------------------------------------------------- C10


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


# The whole Jacobian of the check below has (n d)^2 entries and takes n d backward passes: at
# most this many input entries (at d = 128, 16 tokens), so it stays seconds at every profile.
CHECK_ENTRIES = 2048


def check_tokens(d_model: int, n: int) -> int:
    """The token count of `power_iteration_check`: n, or fewer so that n * d_model is at most
    `CHECK_ENTRIES` (at least 2)."""
    return max(2, min(n, CHECK_ENTRIES // d_model))


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
        data = _first(tests[task], n_inputs)
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
