"""Chapter 5's experiment: train softmax and Sinkhorn models (`complete_models`), then measure
rank decay in them (`analyse`).

Two measurements, as in the paper: the relative residual of the hidden states layer by layer
(layer 0 = embeddings) under four inference variants (the models are always trained complete;
parts are switched off only at inference), and the rank-1 residual of products of attention
matrices along random paths through the layers.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ... import training_plan
from ...data import Dataset
from ...data import record as dataset_record
from ...masks import pair_mask
from ...measures import layer_table, row_entropy
from ...models import Classifier, EncoderOutput, Switches
from ...names import TASKS, dataset
from ...normalizations import marginal_errors, sinkhorn
from ...profiles import Profile, Task
from ...recording import hidden_residuals, output_residuals, record
from ...training import TrainResult
from ...workers import side_by_side
from ..random_matrix_control import path_residuals

# LayerNorm stays on in every variant: the paper switches off only FFN and skips.
VARIANTS = {"full model": Switches(),
            "without FFN": Switches(ffn=False),
            "without skip": Switches(skip=False),
            "pure attention (no FFN, no skip)": Switches(skip=False, ffn=False)}


OURS = {"retrieval"}  # the tasks of this book's choosing, not the paper's


def task_titles(data: dict[str, tuple[Dataset, Dataset]]) -> dict[str, str]:
    """A title per task role (`names.TASKS`), naming the stand-in dataset where one is used."""
    return {role: TASKS[role] + (f" (stand-in: {dataset(train.name)})"
                                 if dataset_record(train.name).stands_in_for else
                                 " (this book's task)" if role in OURS else "")
            for role, (train, _) in data.items()}


def one_size(tasks: dict[str, Task], size: str) -> str:
    """The tasks' `size` (a field of `Task`, e.g. 'depth'): '24' where all share it, else each
    value once, in order ('6 or 24')."""
    values = sorted({getattr(t, size) for t in tasks.values()})
    return " or ".join(f"{v:g}" for v in values)


def seed_counts(settings: Profile, titles: dict[str, str] = TASKS) -> str:
    """How many training seeds per normalization, in words: '5 seeds per normalization'
    where every task trains as many, else '18 seeds per normalization on MNIST digits and 5
    on key-value retrieval' (each task by its short title, else its role)."""
    counts = {role: len(settings.seeds_of(role)) for role in settings.tasks}
    if len(set(counts.values())) <= 1:
        return f"{next(iter(counts.values()), len(settings.train_seeds))} seeds per normalization"
    words = [f"{n}{' seeds per normalization' if i == 0 else ''} on {titles.get(role, role)}"
             for i, (role, n) in enumerate(counts.items())]
    return ", ".join(words[:-1]) + " and " + words[-1]


# A model's shape as the prose names it, and a value alone ('the paper: 4×4'); a field that
# differs from the paper's is named. Text models have a token count, image models patches.
SHAPE = {"depth": ("{} layers", "{}"), "d_model": ("width {}", "{}"),
         "n_heads": ("{} heads", "{}"), "max_len": ("{} tokens", "{}"),
         "patch": ("{0}×{0} patches", "{0}×{0}"), "image_size": ("images of {0}×{0}", "{0}×{0}")}
TEXT_ONLY, IMAGE_ONLY = {"max_len"}, {"patch", "image_size"}


def shape_words(task: Task, field: str) -> str:
    """One field of a model's shape as the prose names it ('7×7 patches')."""
    return SHAPE[field][0].format(getattr(task, field))


def departures(tasks: dict[str, Task], paper: dict[str, Task], kinds: dict[str, str],
               titles: dict[str, str]) -> str:
    """Where each of the paper's tasks in `tasks` departs from the paper's shape (`paper`, the
    `full` profile's tasks, which are the paper's shapes), in words: 'MNIST digits: width 48
    (the paper: 128), 7×7 patches (the paper: 4×4)'; 'none' where no task departs. `kinds`
    gives each role's data kind ('text' or 'image'). Tasks of this book's choosing (`OURS`)
    have no paper shape and are left out."""
    parts = []
    for role, task in tasks.items():
        if role in OURS:
            continue
        left_out = IMAGE_ONLY if kinds[role] == "text" else TEXT_ONLY
        changed = [f"{shape_words(task, field)} (the paper: "
                   f"{SHAPE[field][1].format(getattr(paper[role], field))})"
                   for field in SHAPE if field not in left_out
                   and getattr(task, field) != getattr(paper[role], field)]
        if changed:
            parts.append(f"{titles[role]}: " + ", ".join(changed))
    return "; ".join(parts) or "none"


def models_data(tasks: dict[str, Task], titles: dict[str, str], roles=None,
                what: str = "trained models") -> str:
    """What a claim's trained models are, for the ledger's data column: 'trained models:
    MNIST digits (...), 24 layers of width 48 on the first 2,000 training examples; ...'
    ('on all its training examples' where the task uses them all; `roles`: the tasks
    named, default all; `what`: the models' name)."""
    return f"{what}: " + "; ".join(
        f"{titles[r]}, {tasks[r].depth} layers of width {tasks[r].d_model}"
        + (f" on the first {tasks[r].train_limit:,} training examples"
           if tasks[r].train_limit else " on all its training examples")
        for r in (roles or tasks))


def model_table(data: dict[str, tuple[Dataset, Dataset]], tasks: dict[str, Task]
                ) -> pd.DataFrame:
    """Per task (its title): the data set, its train / test sizes and classes, the model's
    sizes and its training, in words."""
    return pd.DataFrame([
        {"task": TASKS[role], "dataset": train.source,
         "train / test": f"{len(train):,} / {len(test):,}", "classes": len(train.classes),
         "model": ", ".join(shape_words(t, f) for f in ("depth", "d_model", "n_heads")
                            + (("max_len",) if train.kind == "text" else ("patch",))),
         "training": f"{t.epochs} epochs, batch {t.batch_size}, AdamW lr {t.lr:g}"}
        for (role, (train, test)), t in zip(data.items(), tasks.values())]).set_index("task")


def complete_models(settings: Profile, device: str = "auto", cache_dir=None, quiet: bool = False
                    ) -> dict[str, dict[tuple[str, int], TrainResult]]:
    """Chapter 5's complete models of the profile: per task role, one per (normalization,
    seed), loaded (`training_plan.ensure`). Every model the book trains (chapter 6's pure and
    depth-sweep models too) is trained here where the model cache lacks it, side by side
    (`settings.train_jobs`), the costliest first: one batch ends with one short wait for the
    last training, where three would end with three."""
    training_plan.run_all(training_plan.planned(settings), settings.train_jobs, device,
                          cache_dir, quiet)
    wanted = training_plan.planned(settings, ("complete",), sweep=False)
    models: dict[str, dict[tuple[str, int], TrainResult]] = {}
    for t, r in training_plan.ensure(wanted, settings.train_jobs, device, cache_dir, quiet).items():
        models.setdefault(t.task, {})[(t.normalization, t.seed)] = r
    return models


def attention_statistics(out: EncoderOutput, mask: torch.Tensor | None, n_iter: int,
                         sinkhorn_model: bool) -> pd.DataFrame:
    """Per (layer, sample) of the attention: the mean row entropy over heads and real rows,
    the standard deviation of the logits over all real pairs of the layer (the logit scale),
    and for a Sinkhorn model the largest row error over heads after exactly `n_iter`
    iterations of its own logits (float64; NaN for softmax)."""
    layers, batch, heads, n = out.logits.shape[:4]
    head_mask = None if mask is None else mask[None, :, None, :].expand(layers, batch, heads, n)
    entropy = row_entropy(out.attention.double(), head_mask).mean(-1)  # (layers, batch)
    logits = out.logits.double()
    real = torch.ones_like(logits, dtype=torch.bool) if mask is None else \
        pair_mask(head_mask)
    scale = torch.stack([logits[l][real[l]].std() for l in range(layers)])
    table = layer_table(entropy.numpy(), "entropy").assign(layer=lambda t: t["layer"] + 1)
    table["logit_std"] = scale.numpy()[table["layer"] - 1]
    error = np.full(len(table), np.nan)
    if sinkhorn_model:
        p = sinkhorn(logits, n_iter, head_mask, early_stop=False, check_finite=False)
        error = marginal_errors(p, head_mask)[0].amax(-1).numpy().ravel()
    return table.assign(marginal_error=error)


def attention_paths(out: EncoderOutput, mask: torch.Tensor | None, n_paths: int,
                    seed: int, depths=None) -> pd.DataFrame:
    """Rank-1 residual of attention products along random paths (see
    `random_matrix_control.path_residuals`); padded tokens' rows and columns are zeroed for
    both normalizations so they compare alike."""
    attn = out.attention.double()
    if mask is not None:
        attn = attn * pair_mask(mask)[None, :, None]
    depths = depths or range(1, attn.shape[0] + 1)
    return path_residuals(attn, depths, n_paths, torch.Generator().manual_seed(seed))


@dataclass
class Analysis:
    """Chapter 5's measurements of the trained models, as long tables with columns task,
    normalization, seed (the training seed: the unit of every comparison) and variant:
    `hidden` (block outputs: residual, and relative to layer 0), `attention_output` (the
    attention sub-layer's outputs), `paths` (rank-1 residual of attention products), and
    `attention` (the complete models' attention per layer: entropy, logit scale, the
    Sinkhorn models' marginal error after exactly 50 iterations)."""

    hidden: pd.DataFrame
    attention_output: pd.DataFrame
    paths: pd.DataFrame
    attention: pd.DataFrame
    # task -> (layers, heads, tokens) of its attention; tokens: the median number of real
    # (non-padding) tokens of the analysed inputs
    shapes: dict[str, tuple[int, int, int]]


def analyse(models: dict[str, dict[tuple[str, int], Classifier]], tests: dict[str, Dataset],
            n_eval: int, n_paths: int, seed: int, n_iter: int,
            path_variants=("full model", "without skip"), jobs: int = 1) -> Analysis:
    """Every measurement for every task -> {(normalization, training seed) -> model}, each
    model and variant run once on the first `n_eval` test inputs, in float64 (a copy of the
    model: the weights are the trained float32 ones), so that the rounding floor is
    float64's. With `jobs` above 1 and the models on the CPU, that many worker processes
    take a share of the models each, in order, so that the tables are the same and in the
    same order as one after another."""
    flat = [(task, key, model) for task, by_model in models.items()
            for key, model in by_model.items()]
    on_cpu = all(next(model.parameters()).device.type == "cpu" for *_, model in flat)
    jobs = min(jobs, len(flat)) if on_cpu else 1
    shares = [flat[i * len(flat) // jobs:(i + 1) * len(flat) // jobs] for i in range(jobs)]
    done = side_by_side({str(i): (_analyse_models, (share, tests, n_eval, n_paths, seed, n_iter,
                                                    path_variants))
                         for i, share in enumerate(shares)}, jobs)
    tables = {k: pd.concat([done[str(i)][0][k] for i in range(jobs)], ignore_index=True)
              for k in ("hidden", "attention_output", "paths", "attention")}
    shapes = {task: shape for i in range(jobs) for task, shape in done[str(i)][1].items()}
    return Analysis(**tables, shapes=shapes)


def _analyse_models(models: list[tuple[str, tuple[str, int], Classifier]],
                    tests: dict[str, Dataset], n_eval: int, n_paths: int, seed: int,
                    n_iter: int, path_variants) -> tuple[dict[str, pd.DataFrame], dict]:
    """`analyse` of the (task, (normalization, training seed), model) in `models`: its tables
    and the attention shape of each task."""
    tables = {k: [] for k in ("hidden", "attention_output", "paths", "attention")}
    shapes = {}
    for task, (name, train_seed), model in models:
        exact = copy.deepcopy(model).double()
        for variant, switches in VARIANTS.items():
            out, mask = record(exact, tests[task], n_eval, switches)
            layers, _, heads, tokens, _ = out.attention.shape
            real = tokens if mask is None else int(mask.sum(1).median())
            shapes[task] = (layers, heads, real)
            labels = dict(task=task, normalization=name, seed=train_seed, variant=variant)
            tables["hidden"].append(hidden_residuals(out, mask).assign(**labels))
            tables["attention_output"].append(output_residuals(out, mask).assign(**labels))
            if variant in path_variants:
                tables["paths"].append(
                    attention_paths(out, mask, n_paths, seed).assign(**labels))
            if variant == "full model":
                tables["attention"].append(attention_statistics(
                    out, mask, n_iter, name == "sinkhorn").assign(**labels))
    return {k: pd.concat(v, ignore_index=True) if v else pd.DataFrame()
            for k, v in tables.items()}, shapes
