"""What the normalization does at inference, with the trained weights fixed. B3: the
normalization swapped (softmax-trained weights run with Sinkhorn, and the reverse). B4: how
many Sinkhorn iterations inference needs (the Sinkhorn-trained models run with fewer, down to
one half-step, which is softmax), decided by a registered fixed-sequence test."""

from __future__ import annotations

import copy
from contextlib import contextmanager

import numpy as np
import pandas as pd
import torch

from ... import recording as rec
from ...claim_rows import Claim
from ...data import Dataset
from ...models import Classifier, Switches
from ...names import display, quoted
from ...normalizations import NORMALIZATIONS, marginal_errors
from ...primary_tests import run_part, run_sequence
from ...profiles import Profile
from ...registry import ACCURACY_MARGIN
from ...timing import interleaved_times
from ...training import TrainResult, evaluate
from ...verdicts import iterations_verdict, results_sentence

HALF_STEP = 0.5  # one half-step (a row normalization of exp(logits)): softmax


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
            n_eval: int, accuracy_inputs: int, device: torch.device
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """B3: every complete model run with both normalizations at inference: accuracy (first
    `accuracy_inputs` test inputs) and hidden-state residuals (first `n_eval`, float64);
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
                        model, tests[task].first(accuracy_inputs), device)})
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
                    repeats: int, iterations: tuple[float, ...]) -> pd.DataFrame:
    """B4's clock: the time of one forward pass of each Sinkhorn-trained model over the first
    `n_eval` test inputs with each number of `iterations` (median of `repeats` interleaved
    rounds: the profile's `iteration_rounds`). Columns task, seed, iterations, ms. Run it
    with nothing else busy on the device."""
    rows = []
    for task, seed, result in _sinkhorn_trained(models):
        batch = tests[task].first(n_eval)
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
                       tests: dict[str, Dataset], n_eval: int, accuracy_inputs: int,
                       device: torch.device, iterations: tuple[float, ...]) -> pd.DataFrame:
    """B4: the Sinkhorn-trained models run with each number of `iterations` (`HALF_STEP`:
    softmax): accuracy (first `accuracy_inputs` test inputs), the relative residual of the
    last hidden state (median over the first `n_eval` inputs, float64) and the attention's
    departure from doubly stochastic (the larger of its row and column errors; median over
    inputs of the largest over layers and heads), per task and seed."""
    rows = []
    for task, seed, result in _sinkhorn_trained(models):
        data = tests[task]
        exact = copy.deepcopy(result.model).double()
        for k in iterations:
            with attention_set(result.model, **_iteration_settings(k)) as model:
                acc = evaluate(model, data.first(accuracy_inputs), device)
            with attention_set(exact, **_iteration_settings(k)) as model:
                out, m = rec.record(model, data, n_eval, Switches())
            head_mask = None if m is None else m[None, :, None, :].expand(
                *out.attention.shape[:4])
            rows_error = torch.maximum(*marginal_errors(out.attention.double(), head_mask))
            residual = rec.hidden_residuals(out, m)
            rows.append({"task": task, "seed": seed, "iterations": k, "accuracy": acc,
                         "inputs": min(accuracy_inputs, len(data)),
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
    below = [r for r in tested if r.at == max(k for k in sweep["iterations"] if k < full)]
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
