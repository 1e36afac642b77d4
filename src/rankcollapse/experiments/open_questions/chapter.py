"""Chapter 6 as a function of its profile: the questions the paper left open, every table,
every figure's data, every value its prose states and its claims, computed by `run` from the
profile, the device and the seed alone. The notebook shows them; it computes nothing."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import torch

from ...claim_rows import Claim
from ...measures import FLOOR
from ...names import display, joined, math_number
from ...profiles import Profile
from ...stats import LEVEL
from ...tasks import load_task
from ...verdicts import TOLERANCE
from .. import depth_sweep
from .. import trained_models as tm
from ..depth_sweep.experiment import Sweep
from ..rank_collapse import deepest_drawn, log_summary
from . import correlation, inference, lipschitz_constants, scratch
from .inference import HALF_STEP
from .model_measures import Measures, measure

SCRATCH_BY = ["task", "variant", "normalization", "layer"]  # one summary row per layer
ITERATION_HEADERS = {"accuracy": "test accuracy", "row_error": "marginal error",
                     "residual": "last-layer residual", "ms": "forward pass (ms)"}


@dataclass(frozen=True)
class OpenQuestions:
    """What chapter 6 shows."""

    titles: dict[str, str]  # task role -> its title
    image_titles: dict[str, str]  # the same for the tasks without padding (C6d)
    scratch_accuracy: pd.DataFrame  # B1: accuracy per task, variant, training, normalization
    scratch_residual: pd.DataFrame  # B1: log summary of the residual per panel and layer
    scratch_panels: dict[str, str]  # B1: the residual figure's panels, by their titles
    mechanism: pd.DataFrame  # C6d: Sinkhorn / softmax of path products per mode and depth
    swap_accuracy: pd.DataFrame  # B3: accuracy per task and training, per normalization
    swap: pd.DataFrame  # B3: residual with Sinkhorn / with softmax at inference per layer
    iterations: pd.DataFrame  # B4: the sweep over iteration counts, per model
    iteration_means: pd.DataFrame  # B4: its means over seeds per task and count
    measured: Measures  # the measurements of chapter 5's models (C6d, B3, B4, C10)
    depth: Sweep  # B5: the depth sweep
    glue: dict[str, object]  # numbers the prose states
    text: dict[str, str]  # sentences the prose states (Markdown)
    claims: list[Claim]


def verdict_sentence(claim: Claim) -> str:
    """'**Verdict.** finding': a claim's verdict and finding as the chapter states them."""
    return f"**{claim.verdict.capitalize()}.** {claim.finding}"


def run(settings: Profile, device: torch.device | str, seed: int, quiet: bool = True
        ) -> OpenQuestions:
    """Chapter 6 under `settings`: chapter 5's complete models (trained where the cache lacks
    them, with every model the book trains), measured (`measure`); B1's models trained pure;
    the depth sweep (B5), whose models train where the cache lacks them (progress shown
    unless `quiet`)."""
    device = torch.device(device) if isinstance(device, str) else device
    tasks, own = settings.tasks, settings.ch6
    data = {role: load_task(task) for role, task in tasks.items()}
    titles = tm.task_titles(data)
    tests = {role: test for role, (_, test) in data.items()}
    complete = tm.complete_models(settings, device, quiet=True)
    measured = measure(settings, complete, tests, device, seed)

    study = scratch.scratch_study(settings, data, complete, device)
    panel = study.residuals["task"].map(titles) + ", " + study.residuals["variant"]
    scratch_residual = log_summary(study.residuals.assign(
        task=panel, variant=study.residuals["training"]), SCRATCH_BY, floor=FLOOR)
    b1 = scratch.scratch_claim(study.accuracy, study.residuals, study.contrast, study.chance,
                               titles, settings)

    image_titles = {t: titles[t] for t in tasks if tests[t].mask is None}
    c6d = correlation.mechanism_claim(measured.mechanism, titles, settings)
    b3 = inference.swap_claim(measured.swap_residuals, measured.swap_accuracy, titles, settings)
    sweep = measured.iterations
    b4 = inference.iteration_claim(sweep, titles, settings)
    c10 = lipschitz_constants.lipschitz_claim(measured.random_lipschitz,
                                              measured.trained_lipschitz, measured.sensitivity,
                                              titles, settings)
    by_depth = depth_sweep.run(settings, device, quiet=quiet)

    glue = {"ch6_seeds": len(settings.scratch_seeds), "ch6_train_seeds": tm.seed_counts(settings),
            "ch6_sweep_seeds": len(settings.depth_sweep.seeds) if settings.depth_sweep else 0,
            "ch6_chance": ", ".join(f"{c:.3f}" for c in study.chance.values()),
            "ch6_scratch_tasks": ", ".join(titles[r] for r in settings.scratch_tasks),
            "ch6_acc_inputs": own.accuracy_inputs, "ch6_deepest": deepest_drawn(scratch_residual),
            "ch6_n_eval": settings.n_eval, "ch6_rounds": own.iteration_rounds,
            "ch6_full": max(own.iterations), "ch6_n_iter": settings.n_iter,
            "ch6_d": settings.d_model, "ch6_heads": settings.n_heads,
            "ch6_draws": own.lipschitz_draws, "ch6_lip_inputs": own.lipschitz_inputs,
            "ch6_check_n": measured.check_tokens, "ch6_level": LEVEL} | by_depth.glue
    text = {"ch6_b1": verdict_sentence(b1), "ch6_c6d": verdict_sentence(c6d),
            "ch6_b3": verdict_sentence(b3), "ch6_b4": verdict_sentence(b4),
            "ch6_c10": verdict_sentence(c10), "ch6_b5": verdict_sentence(by_depth.claim),
            "ch6_iterations": joined([f"{k:g}" for k in own.iterations if k != HALF_STEP]),
            "ds_data": by_depth.data_note, "ch6_tolerance": math_number(TOLERANCE)}
    trained_on = tm.models_data(tasks, titles)
    claims = [replace(b1, data=tm.models_data(tasks, titles, settings.scratch_tasks,
                                              what="models trained as pure attention")),
              replace(b3, data=trained_on), replace(b4, data=trained_on),
              replace(c10, data=trained_on + "; random weights and inputs"),
              replace(c6d, data=tm.models_data(tasks, titles, list(image_titles))),
              by_depth.claim]
    swap = measured.swap_accuracy.assign(task=measured.swap_accuracy["task"].map(titles),
                                         trained=measured.swap_accuracy["trained"].map(display),
                                         normalization=measured.swap_accuracy["normalization"]
                                         .map(display))
    return OpenQuestions(
        titles=titles, image_titles=image_titles,
        scratch_accuracy=study.accuracy.assign(
            normalization=study.accuracy["normalization"].map(display),
            task=study.accuracy["task"].map(titles))
        .groupby(["task", "variant", "training", "normalization"], sort=False)["accuracy"]
        .agg(["mean", "std"]).rename(columns={"mean": "test accuracy", "std": "std over seeds"}),
        scratch_residual=scratch_residual, scratch_panels={p: p for p in dict.fromkeys(panel)},
        mechanism=correlation.mechanism_comparisons(measured.mechanism),
        swap_accuracy=swap.pivot_table(index=["task", "trained"], columns="normalization",
                                       values="accuracy", aggfunc="mean", sort=False)
        .rename_axis(columns="at inference"),
        swap=inference.swap_comparisons(measured.swap_residuals), iterations=sweep,
        iteration_means=sweep.assign(task=sweep["task"].map(titles))
        .groupby(["task", "iterations"], sort=False)[["accuracy", "row_error", "residual", "ms"]]
        .mean().rename(columns=ITERATION_HEADERS),
        measured=measured, depth=by_depth, glue=glue, text=text, claims=claims)
