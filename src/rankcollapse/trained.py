"""Chapter 5's experiment: train softmax and Sinkhorn models, then measure rank decay in them.

Two measurements, as in the paper: the relative residual of the hidden states layer by layer
(layer 0 = embeddings) under four inference variants (the models are always trained complete;
parts are switched off only at inference), and the rank-1 residual of products of attention
matrices along random paths through the layers.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from .data import Dataset, load
from .models import Classifier, EncoderConfig, EncoderOutput, ModelConfig, Switches
from .profiles import Task
from .randmat import path_residuals
from .rank import relative_residual
from .train import TrainConfig, TrainResult, train

# LayerNorm stays on in every variant: the paper switches off only FFN and skips.
VARIANTS = {"full model": Switches(),
            "without FFN": Switches(ffn=False),
            "without skip": Switches(skip=False),
            "pure attention (no FFN, no skip)": Switches(skip=False, ffn=False)}


def load_task(task: Task, root=None, limit_test: int | None = None) -> tuple[Dataset, Dataset]:
    """Train and test splits of the task's dataset (text shares the training vocabulary)."""
    options = dict(max_len=task.max_len, image_size=task.image_size)
    train_data = load(task.dataset, "train", root, limit=task.train_limit, **options)
    test_data = load(task.dataset, "test", root, tokenizer=train_data.vocab, limit=limit_test,
                     **options)
    return train_data, test_data


def train_config(task: Task, data: Dataset, normalization: str, seed: int,
                 n_iter: int = 50) -> TrainConfig:
    """The `TrainConfig` of one model of `task` (the model shape follows the data)."""
    encoder = EncoderConfig(d_model=task.d_model, n_heads=task.n_heads, depth=task.depth,
                            d_ff=task.d_ff, normalization=normalization, n_iter=n_iter)
    if data.kind == "text":
        model = ModelConfig("text", len(data.classes), encoder,
                            vocab_size=len(data.vocab), max_len=task.max_len)
    else:
        channels, side = data.x.shape[1], data.x.shape[-1]
        model = ModelConfig("image", len(data.classes), encoder, image_size=side,
                            patch=task.patch, channels=channels)
    return TrainConfig(model=model, dataset=data.name, epochs=task.epochs,
                       batch_size=task.batch_size, lr=task.lr, warmup_steps=task.warmup_steps,
                       seed=seed, extra={"train_size": len(data), "source": data.source})


def train_models(task: Task, train_data: Dataset, test_data: Dataset, seeds, device: str,
                 n_iter: int = 50, cache_dir=".cache/models") -> dict[tuple[str, int], TrainResult]:
    """One model per (normalization, seed), trained or loaded from the cache."""
    return {(name, seed): train(train_config(task, train_data, name, seed, n_iter),
                                train_data, test_data, cache_dir, device, quiet=True)
            for name in ("softmax", "sinkhorn") for seed in seeds}


@contextmanager
def switched(model: Classifier, switches: Switches):
    """Run `model` with other switches inside the block; restore them afterwards."""
    saved = replace(model.switches)
    for key, value in vars(switches).items():
        setattr(model.switches, key, value)
    try:
        yield model
    finally:
        for key, value in vars(saved).items():
            setattr(model.switches, key, value)


@torch.no_grad()
def record(model: Classifier, data: Dataset, n: int, switches: Switches, device,
           batch_size: int = 64) -> tuple[EncoderOutput, torch.Tensor | None]:
    """Hidden states and attention of the first `n` test inputs under `switches`, on CPU."""
    parts, dev = [], next(model.parameters()).device
    with switched(model.eval(), switches):
        for start in range(0, min(n, len(data)), batch_size):
            stop = min(start + batch_size, n, len(data))
            mask = None if data.mask is None else data.mask[start:stop].to(dev)
            _, out = model(data.x[start:stop].to(dev), mask, record=True)
            parts.append(EncoderOutput(out.x.cpu(), out.hidden.cpu(), out.attn_out.cpu(),
                                       out.attention.float().cpu()))
    join = lambda key, dim: torch.cat([getattr(p, key) for p in parts], dim)  # noqa: E731
    mask = None if data.mask is None else data.mask[: min(n, len(data))]
    return EncoderOutput(join("x", 0), join("hidden", 1), join("attn_out", 1),
                         join("attention", 1)), mask


def layer_residuals(out: EncoderOutput, mask: torch.Tensor | None) -> pd.DataFrame:
    """Relative residual (composite norm, token-mean residual, real tokens only) of every
    hidden state: one row per (layer, sample); layer 0 = the embeddings."""
    hidden = out.hidden.double()
    res = relative_residual(hidden, "composite", "mean", mask).numpy()  # (L + 1, B)
    layers, samples = np.meshgrid(np.arange(res.shape[0]), np.arange(res.shape[1]),
                                  indexing="ij")
    return pd.DataFrame({"layer": layers.ravel(), "sample": samples.ravel(),
                         "residual": res.ravel()})


def attention_paths(out: EncoderOutput, mask: torch.Tensor | None, n_paths: int,
                    seed: int, depths=None) -> pd.DataFrame:
    """Rank-1 residual of attention products along random paths (see `randmat`); padded
    tokens' rows and columns are zeroed for both normalizations so they compare alike."""
    attn = out.attention.double()
    if mask is not None:
        pair = (mask[:, :, None] & mask[:, None, :])[None, :, None]
        attn = attn * pair
    depths = depths or range(1, attn.shape[0] + 1)
    return path_residuals(attn, depths, n_paths, torch.Generator().manual_seed(seed))


def sinkhorn_over_softmax(table: pd.DataFrame, by: list[str], value: str = "residual"
                          ) -> pd.DataFrame:
    """Per group: mean log10 of `value` for each normalization and their difference
    (log10 Sinkhorn / softmax; positive = Sinkhorn keeps more rank)."""
    logs = table.assign(log10=np.log10(table[value].clip(lower=1e-300)))
    means = logs.groupby(by + ["normalization"])["log10"].mean().unstack("normalization")
    return means.assign(log10_ratio=means["sinkhorn"] - means["softmax"]).reset_index()


def accuracy_table(results: dict[str, dict[tuple[str, int], TrainResult]]) -> pd.DataFrame:
    """Test accuracy (mean, standard deviation over seeds) and training time per task and
    normalization; `results` maps task role -> `train_models` output."""
    rows = [{"task": role, "dataset": r.config.dataset, "normalization": name, "seed": seed,
             "accuracy": r.test_accuracy, "train_minutes": r.train_seconds / 60}
            for role, by_model in results.items() for (name, seed), r in by_model.items()]
    table = pd.DataFrame(rows).groupby(["task", "dataset", "normalization"], sort=False)
    return table.agg(accuracy=("accuracy", "mean"), accuracy_std=("accuracy", "std"),
                     seeds=("seed", "count"), train_minutes=("train_minutes", "mean"))


def claims(residuals: pd.DataFrame) -> pd.DataFrame:
    """The paper's claims on the layer-by-layer residuals, per task and variant: at how many
    layers (1..L) the Sinkhorn mean log10 residual is above softmax's, the mean log10 ratio
    over layers, and the layer where the gap in Sinkhorn's favour is largest."""
    gaps = sinkhorn_over_softmax(residuals[residuals["layer"] > 0], ["task", "variant", "layer"])
    rows = []
    order = list(dict.fromkeys(zip(residuals["task"], residuals["variant"])))
    for task, variant in order:
        g = gaps[(gaps["task"] == task) & (gaps["variant"] == variant)]
        best = g.loc[g["log10_ratio"].idxmax()]
        rows.append({"task": task, "variant": variant,
                     "layers_sinkhorn_higher": f"{int((g['log10_ratio'] > 0).sum())}/{len(g)}",
                     "mean_log10_ratio": g["log10_ratio"].mean(),
                     "largest_gap_layer": int(best["layer"]),
                     "largest_gap_log10": best["log10_ratio"]})
    return pd.DataFrame(rows)


def analyse(models: dict[str, dict[str, Classifier]], tests: dict[str, Dataset], n_eval: int,
            n_paths: int, seed: int, device,
            path_variants=("full model", "without skip")) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both measurements for every task -> {normalization -> model}: layer residuals under
    every inference variant, and attention-path residuals under `path_variants` (each model
    and variant is run once). Both tables have columns task, normalization, variant."""
    residuals, paths = [], []
    for task, by_name in models.items():
        for name, model in by_name.items():
            for variant, switches in VARIANTS.items():
                out, mask = record(model, tests[task], n_eval, switches, device)
                labels = dict(task=task, normalization=name, variant=variant)
                residuals.append(layer_residuals(out, mask).assign(**labels))
                if variant in path_variants:
                    paths.append(attention_paths(out, mask, n_paths, seed).assign(**labels))
    return pd.concat(residuals, ignore_index=True), pd.concat(paths, ignore_index=True)
