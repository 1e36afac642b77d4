"""The depth sweep, computed from the profile alone (`run`)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...measures import FLOOR
from ...normalizations import NORMALIZATIONS
from ...profiles import Profile, sweep_task
from ...recording import hidden_residuals, record
from ...claim_rows import Claim
from ...primary_tests import run_part, trend_scores
from ...registry import LATE, registered
from ...stats import (WORDS, compare_table, family_level, found_of, mostly_at_floor,
                     paired_estimate, significant, unit_values)
from ...tasks import load_task
from ...training import TrainResult
from ...verdicts import Result, results_sentence
from ... import training_plan
from ..trained_models import PLATEAU, VARIANTS, attention_statistics, plateaued, task_titles

# The inference variants the sweep reads: the complete model, and without skip connections.
SWEPT_VARIANTS = {"full model": "with skip connections",
                  "without skip": "without skip connections"}
FINDING = "B5"
TIED = "most seeds tied at the rounding floor"  # a depth whose late layers cannot tell
FIGURE = "fig-depth-sweep"


@dataclass
class Sweep:
    """What chapter 6 shows of the depth sweep. `training`: per depth and normalization,
    the test accuracy (mean over seeds, lowest), how many seeds meet chapter 5's plateau
    criterion, the trained logit scale (lowest and highest layer, median over inputs and
    seeds) and the training time. `hidden`: the relative residual per (depth,
    normalization, seed, variant, layer, input). `ratios`: Sinkhorn / softmax per (depth,
    variant, layer) over the seeds (`stats.compare_table`, description; simultaneous over
    the layers of each curve), with the relative depth layer / L. `late`: per depth and
    variant, Sinkhorn / softmax over the second half of the layers, the registered test's
    own per-seed values, with t intervals simultaneous over the depths (description).
    `results` and `claim`: the registered finding (B5). `glue`: the values the prose
    states."""

    training: pd.DataFrame
    hidden: pd.DataFrame
    ratios: pd.DataFrame
    late: pd.DataFrame
    results: list[Result]
    claim: Claim
    title: str
    data_note: str = ""  # how the sweep's data and epochs differ from chapter 5's, and why
    glue: dict[str, object] = field(default_factory=dict)

    def late_shown(self) -> pd.DataFrame:
        """`late` with the reader's headers and words, its numbers as text (`shown_ratio`;
        '–' where there is none)."""
        numbers = {k: self.late[k].map(shown_ratio) for k in ("ratio", "low", "high")}
        return self.late.assign(
            **numbers, variant=self.late["variant"].map(SWEPT_VARIANTS),
            found=self.late["found"].map(lambda f: WORDS.get(f, f))).drop(columns="level").rename(columns={
                "variant": "inference", "layers": "late layers", "ratio": "Sinkhorn / softmax",
                "low": "interval low", "high": "interval high"})


def shown_ratio(x: float) -> str:
    """A ratio or interval end for a table: three significant digits, more (up to six) where
    fewer would print a value that is not 1 as 1 (0.9996: an interval reaching just below 1
    must not read as one starting at 1); '–' for none."""
    if not np.isfinite(x):
        return "–"
    digits = 3
    while float(significant(x, digits)) == 1 and x != 1 and digits < 6:
        digits += 1
    return significant(x, digits)


def training_table(results: dict[tuple[int, str, int], TrainResult],
                   attention: pd.DataFrame) -> pd.DataFrame:
    """Per depth and normalization: accuracy (mean, lowest), seeds that plateaued, the
    logit scale's range over layers and the mean training time."""
    scales = attention.groupby(["depth", "normalization", "layer"])["logit_std"].median()
    rows = []
    for depth in sorted({d for d, _, _ in results}):
        for name in NORMALIZATIONS:
            runs = [r for (d, n, _), r in results.items() if (d, n) == (depth, name)]
            scale = scales.loc[(depth, name)]
            rows.append({"depth": depth, "normalization": name,
                         "accuracy": np.mean([r.test_accuracy for r in runs]),
                         "lowest": min(r.test_accuracy for r in runs),
                         "plateaued": f"{sum(plateaued(r.curve, **PLATEAU) for r in runs)} "
                                      f"of {len(runs)}",
                         "logit scale, lowest layer": float(scale.min()),
                         "logit scale, highest layer": float(scale.max()),
                         "training time (min)": np.mean([r.train_seconds for r in runs]) / 60})
    return pd.DataFrame(rows)


def measure(results: dict[tuple[int, str, int], TrainResult], test_data, n_eval: int,
            n_iter: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every model run in float64 on the first `n_eval` test inputs under each of
    `SWEPT_VARIANTS`: the hidden-state residuals, and the complete models' attention
    statistics (for the logit scale)."""
    hidden, attention = [], []
    for (depth, name, seed), r in results.items():
        exact = copy.deepcopy(r.model).double()
        labels = dict(depth=depth, normalization=name, seed=seed)
        for variant in SWEPT_VARIANTS:
            out, mask = record(exact, test_data, n_eval, VARIANTS[variant])
            hidden.append(hidden_residuals(out, mask).assign(variant=variant, **labels))
            if variant == "full model":
                attention.append(attention_statistics(out, mask, n_iter, False).assign(**labels))
    return pd.concat(hidden, ignore_index=True), pd.concat(attention, ignore_index=True)


def finding_data(hidden: pd.DataFrame, task: str) -> pd.DataFrame:
    """B5's registered data: per (depth, variant, layer >= 1, training seed) the median
    residual over the test inputs, softmax and Sinkhorn side by side."""
    wide = unit_values(hidden[hidden["layer"] > 0], "seed", ["depth", "variant", "layer"])
    return wide.rename(columns={"seed": "unit", "layer": "position"}).assign(task=task)


def late_table(data: pd.DataFrame, task: str) -> pd.DataFrame:
    """Per variant and depth, Sinkhorn / softmax over the second half of the layers: the
    mean over seeds of the registered test's per-seed log ratios (`primary_tests.trend_scores`),
    with t intervals simultaneous over the depths of each variant (description); where the
    registered rule would call those layers' values mostly tied at the rounding floor under
    both normalizations (`stats.mostly_at_floor`), `found` says so (`TIED`) instead of what
    the interval found, and there is no ratio (values tied at the floor say nothing of it)."""
    rows = []
    for part in registered(FINDING).parts:
        variant = part.variants[0]
        wide, counts = trend_scores(part, data[data["variant"] == variant],
                                    f"{FINDING} / {task}")
        level = family_level(wide.shape[1])
        for depth in wide.columns:
            ratio, low, high = paired_estimate(wide[depth].to_numpy()).interval(level)
            layers = LATE.positions(depth)
            tied = mostly_at_floor(counts.loc[depth, "tied"], counts.loc[depth, "values"])
            if tied:
                ratio = low = high = float("nan")
            rows.append({"variant": variant, "depth": depth,
                         "layers": f"{layers[0]}–{layers[-1]}", "ratio": ratio, "low": low,
                         "high": high, "level": level,
                         "found": TIED if tied else found_of(ratio, low, high)})
    return pd.DataFrame(rows)


def run(settings: Profile, device: str = "auto", cache_dir=None, quiet: bool = True) -> Sweep:
    """Train (or load) every model of the profile's depth sweep, `settings.train_jobs` at a
    time, measure them and decide B5; a ValueError where the profile has no sweep."""
    sweep = settings.depth_sweep
    if sweep is None:
        raise ValueError(f"profile {settings.name!r} has no depth sweep (Profile.depth_sweep)")
    results = {(t.depth, t.normalization, t.seed): r for t, r in training_plan.ensure(
        training_plan.swept(settings), settings.train_jobs, device, cache_dir, quiet).items()}
    base = sweep_task(settings, max(sweep.depths))
    train_data, tests = load_task(base)
    title = task_titles({sweep.task: (train_data, tests)})[sweep.task]
    hidden, attention = measure(results, tests, settings.n_eval, settings.n_iter)
    ratios = compare_table(hidden[hidden["layer"] > 0], unit="seed",
                           by=["depth", "variant", "layer"], within=["depth", "variant"],
                           floor=FLOOR)
    ratios = ratios.assign(relative=ratios["layer"] / ratios["depth"])
    data = finding_data(hidden, sweep.task)
    tested = run_part(FINDING, registered(FINDING).parts[0].name, data, settings,
                      {sweep.task: title}) + \
        run_part(FINDING, registered(FINDING).parts[1].name, data, settings,
                 {sweep.task: title})
    depths = ", ".join(map(str, sweep.depths[:-1])) + f" and {sweep.depths[-1]}"
    said = "; ".join(
        f"{SWEPT_VARIANTS[part.variants[0]]}, " + results_sentence(
            [r for r in tested if r.part == part.name], "seeds", part.estimate()).rstrip(".")
        for part in registered(FINDING).parts)
    claim = Claim.of(FINDING, tested, f"{title}, its first {len(train_data):,} training "
                     f"examples, models of {depths} layers of width {base.d_model} trained "
                     f"alike ({base.epochs} epochs, {len(sweep.seeds)} seeds per "
                     f"normalization); per doubling of depth: {said}.", figure=FIGURE,
                     data=f"depth sweep: {title}, models of {depths} layers of width "
                          f"{base.d_model} on the first {len(train_data):,} training examples")
    glue = {"ds_task": title, "ds_depths": depths, "ds_seeds": len(sweep.seeds),
            "ds_width": base.d_model, "ds_heads": base.n_heads, "ds_epochs": base.epochs,
            "ds_train": f"{len(train_data):,}", "ds_inputs": min(settings.n_eval, len(tests))}
    return Sweep(training_table(results, attention), hidden, ratios, late_table(data, title),
                 tested, claim, title, data_note(settings), glue)


def data_note(settings: Profile) -> str:
    """Where the sweep trains on fewer examples or for other epochs than chapter 5's model
    of its task: what differs, and why; empty where nothing does."""
    sweep = settings.depth_sweep
    own, base = sweep_task(settings, max(sweep.depths)), settings.tasks[sweep.task]
    differs = []
    if own.train_limit != base.train_limit:
        differs.append(f"its first {own.train_limit:,} training examples (chapter 5: "
                       + (f"{base.train_limit:,})" if base.train_limit else "all of them)"))
    if own.epochs != base.epochs:
        differs.append(f"{own.epochs} epochs (chapter 5: {base.epochs})")
    if not differs:
        return ""
    return ("The sweep differs from chapter 5's model of this task in " + " and ".join(differs)
            + f": its {len(training_plan.swept(settings))} trainings must fit this profile's "
            "budget, and the epochs are those after which the deepest models' held-out loss "
            "has stopped falling (the plateau column below checks every seed).")
