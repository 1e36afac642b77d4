"""B1, pure self-attention (no FFN, no skip connections) *trained* that way, with and without
LayerNorm, against chapter 5's complete models run with the same parts switched off only at
inference: accuracy, the layer-wise residual, and which normalization keeps more rank in
the models trained pure (the registered test)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pandas as pd
import torch

from ... import recording as rec
from ... import training_plan
from ...claim_rows import Claim
from ...data import Dataset
from ...measures import FLOOR
from ...names import display
from ...normalizations import NORMALIZATIONS
from ...primary_tests import run_part
from ...profiles import Profile
from ...stats import (compare_groups, describe, family_level)
from ...tasks import PURE, SCRATCH
from ...training import TrainResult, evaluate
from ...verdicts import LEARNED, results_sentence


def scratch_models(settings: Profile, device: str = "auto", cache_dir=None, quiet: bool = False
                   ) -> dict[str, dict[str, dict[tuple[str, int], TrainResult]]]:
    """Per task role of the profile's `scratch_tasks` and per `SCRATCH` variant, one model per
    (normalization, seed of `scratch_seeds`) trained with those parts switched off, where the
    model cache lacks it (`settings.train_jobs` side by side), and loaded
    (`training_plan.ensure`)."""
    wanted = training_plan.planned(settings, tuple(training_plan.PURE), sweep=False)
    models: dict[str, dict[str, dict[tuple[str, int], TrainResult]]] = {}
    for t, r in training_plan.ensure(wanted, settings.train_jobs, device, cache_dir, quiet).items():
        variant = models.setdefault(t.task, {}).setdefault(PURE[t.variant], {})
        variant[(t.normalization, t.seed)] = r
    return models


def scratch_analysis(scratch: dict[str, dict[tuple[str, int], TrainResult]],
                     complete: dict[tuple[str, int], TrainResult], test: Dataset, n_eval: int,
                     accuracy_inputs: int, device: torch.device, task: str
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Accuracy (on the first `accuracy_inputs` test inputs) and the hidden-state residuals
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
                        model, test.first(accuracy_inputs), device)})
                out, mask = rec.record(copy.deepcopy(result.model).double(), test, n_eval,
                                      switches)
                residuals.append(rec.hidden_residuals(out, mask).assign(**labels))
    return pd.DataFrame(accuracy), pd.concat(residuals, ignore_index=True)


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
        analysed.append(scratch_analysis(scratch, same_seeds, test, settings.n_eval,
                                         settings.ch6.accuracy_inputs, device,
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
