"""Chapter 5 as a function of its profile: the trained models (trained where the model cache
lacks them), every table, every figure's data, every value its prose states and its claims,
computed by `run` from the profile, the device and the seed alone. The notebook shows them;
it computes nothing."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from ... import retrieval
from ...claim_rows import Claim
from ...measures import FLOOR
from ...names import math_number, quoted
from ...profiles import PAPER_SHAPES, Profile
from ...recording import layer_comparisons
from ...registry import COLLAPSE_LEVEL, NO_SKIPS, SKIPS
from ...stats import LEVEL
from ...tasks import load_task
from ...verdicts import TOLERANCE
from .. import random_vs_trained as rvt
from ..rank_collapse import log_summary
from . import rank_claims as cl
from . import convergence as cv
from . import experiment as ex

BY = ["task", "variant", "normalization", "layer"]  # one summary row per layer of a curve


@dataclass(frozen=True)
class TrainedModels:
    """What chapter 5 shows."""

    titles: dict[str, str]  # task role -> its title
    models: pd.DataFrame  # per task: data set, sizes, model and training
    accuracy: pd.DataFrame  # test accuracy, chance, training time per task and normalization
    convergence: pd.DataFrame  # against the linear baseline, and the plateau criterion
    curves: pd.DataFrame  # learning curves with each task's chance and linear baseline
    residual: pd.DataFrame  # log summary of the hidden states' residual per layer
    relative: pd.DataFrame  # the same, relative to layer 0
    outputs: pd.DataFrame  # the same for the attention sub-layer's output, complete models
    skips: pd.DataFrame  # Sinkhorn / softmax per layer, the variants with skip connections
    no_skips: pd.DataFrame  # the same, the variants without
    paths: pd.DataFrame  # rank-1 residual of path products, complete models
    path_where: pd.DataFrame  # where Sinkhorn keeps more, less or as much, by depth
    random: pd.DataFrame  # random / trained residual of path products per depth
    logit_scales: pd.DataFrame  # the trained logit scale per layer, task and normalization
    attention: pd.DataFrame  # the trained attention per layer: entropy, scale, row error
    glue: dict[str, object]  # numbers the prose states
    text: dict[str, str]  # sentences the prose states (Markdown)
    claims: list[Claim]
    data: str  # the trained models, for the ledger's data column


def run(settings: Profile, device: torch.device | str, seed: int, quiet: bool = False
        ) -> TrainedModels:
    """Chapter 5 under `settings`: every model the book trains is trained where the model
    cache lacks it (`complete_models`), then the complete models are measured on the first
    test inputs (`analyse`) and the random products drawn, from `seed`."""
    tasks = settings.tasks
    data = {role: load_task(task) for role, task in tasks.items()}
    titles = ex.task_titles(data)
    results = ex.complete_models(settings, device, quiet=quiet)
    accuracy = cv.accuracy_table(results)
    convergence = cv.convergence_table(results, data, titles)
    accuracy_claim = cv.accuracy_claim(results, titles, settings)

    models = {role: {key: r.model for key, r in results[role].items()} for role in tasks}
    analysis = ex.analyse(models, {role: data[role][1] for role in tasks}, settings.n_eval,
                          settings.n_paths, seed, settings.n_iter, jobs=settings.train_jobs)
    comparisons = layer_comparisons(analysis.hidden)
    paths = analysis.paths.assign(setting=analysis.paths["task"].map(titles) + ", "
                                  + analysis.paths["variant"])
    random = rvt.random_products(analysis.shapes, rvt.measured_scales(analysis.attention),
                                 settings.n_pools, settings.paths_per_pool, seed,
                                 n_iter=settings.n_iter)
    attention_claims = cl.trained_attention_claims(analysis.attention, titles, settings)
    claims = cl.claims(analysis, titles, settings) + [
        accuracy_claim, rvt.claim(analysis.paths, random, titles, settings)] + attention_claims

    first = next(iter(next(iter(results.values())).values()))
    sharp = {role: task for role, task in tasks.items() if task.logit_init}
    glue = {"ch5_seeds": ex.seed_counts(settings), "ch5_keys": retrieval.KEYS,
            "ch5_values": retrieval.VALUES, "ch5_jobs": settings.train_jobs,
            "ch5_sharp_start": ex.one_size(sharp, "logit_init"),
            "ch5_window": cv.PLATEAU["window"], "ch5_heldout": first.config.heldout,
            "ch5_n_eval": settings.n_eval, "ch5_n_iter": settings.n_iter,
            "ch5_floor": quoted(FLOOR), "ch5_level": LEVEL, "ch5_paths": settings.n_paths,
            "ch5_random_pools": settings.n_pools, "ch5_depth": ex.one_size(tasks, "depth"),
            "ch5_width": ex.one_size(tasks, "d_model"), "ch5_collapse_level": COLLAPSE_LEVEL}
    text = {"ch5_plateau": cv.plateau_words(), "ch5_chance": cv.chance_sentence(results, titles),
            "ch5_accuracy": accuracy_claim.finding,
            "ch5_convergence": cv.convergence_sentence(convergence),
            "ch5_tolerance": math_number(TOLERANCE),
            "ch5_departures": ex.departures(tasks, PAPER_SHAPES, {
                role: train.kind for role, (train, _) in data.items()}, titles)} | {
        f"ch5_{c.id}_trained": f"**{c.verdict.capitalize()}.** {c.finding}"
        for c in attention_claims}
    full_paths = paths[paths["setting"].str.endswith("full model")]
    return TrainedModels(
        titles=titles, models=ex.model_table(data, tasks), accuracy=accuracy,
        convergence=convergence, curves=cv.curves_with_references(results, convergence, titles),
        residual=log_summary(analysis.hidden, BY, floor=FLOOR),
        relative=log_summary(analysis.hidden, BY, value="relative", floor=FLOOR),
        outputs=log_summary(analysis.attention_output[
            analysis.attention_output["variant"] == "full model"], BY, floor=FLOOR),
        skips=comparisons[comparisons["variant"].isin(SKIPS)],
        no_skips=comparisons[comparisons["variant"].isin(NO_SKIPS)],
        paths=full_paths,
        path_where=cl.where_table(cl.path_comparisons(paths), "depth", ["setting"]),
        random=rvt.random_contrast(analysis.paths, random),
        logit_scales=cl.logit_scales(analysis.attention, titles),
        attention=analysis.attention, glue=glue, text=text, claims=claims,
        data=ex.models_data(tasks, titles))
