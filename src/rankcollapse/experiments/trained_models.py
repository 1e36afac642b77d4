"""Chapter 5's experiment: train softmax and Sinkhorn models, then measure rank decay in them.

Two measurements, as in the paper: the relative residual of the hidden states layer by layer
(layer 0 = embeddings) under four inference variants (the models are always trained complete;
parts are switched off only at inference), and the rank-1 residual of products of attention
matrices along random paths through the layers.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from ..data import VOCAB_SIZE, Dataset, Tokenizer, load
from ..data import record as dataset_record
from ..masks import pair_mask
from ..measures import layer_table, relative_residual, rounding_floor, row_entropy
from ..models import Classifier, EncoderConfig, EncoderOutput, ModelConfig, Switches
from ..normalizations import NORMALIZATIONS, marginal_errors, sinkhorn
from ..profiles import Task
from ..stats import (MIN_UNITS, VERDICTS, Claim, check_verdict, claim_verdict, compare,
                     compare_table, describe, significant, unit_values)
from ..training import TrainConfig, TrainResult, train
from ..trainings import models_dir
from .random_matrix_control import path_residuals

# LayerNorm stays on in every variant: the paper switches off only FFN and skips.
VARIANTS = {"full model": Switches(),
            "without FFN": Switches(ffn=False),
            "without skip": Switches(skip=False),
            "pure attention (no FFN, no skip)": Switches(skip=False, ffn=False)}


ROLES = {"text": "text classification", "mnist": "MNIST digits", "cats_dogs": "Cats and Dogs"}


def task_titles(data: dict[str, tuple[Dataset, Dataset]]) -> dict[str, str]:
    """A title per task role (`ROLES`), naming the stand-in dataset where one is used."""
    return {role: ROLES[role] + (f" (stand-in: {train.name})"
                                 if dataset_record(train.name).stands_in_for else "")
            for role, (train, _) in data.items()}


def load_task(task: Task, root=None, limit_test: int | None = None) -> tuple[Dataset, Dataset]:
    """Train and test splits of the task's dataset (text shares the training vocabulary)."""
    options = dict(max_len=task.max_len, image_size=task.image_size)
    train_data = load(task.dataset, "train", root, limit=task.train_limit, **options)
    test_data = load(task.dataset, "test", root, tokenizer=train_data.vocab, limit=limit_test,
                     **options)
    return train_data, test_data


def synthetic_data(task: Task, n: int, seed: int = 0) -> Dataset:
    """`n` random examples shaped like `task`'s dataset (token ids and padding, or images of
    its channels and size): for smoke tests and timing, never for results."""
    rec = dataset_record(task.dataset)
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(len(rec.classes), (n,), generator=g)
    if rec.kind == "text":
        vocab = Tokenizer(list(Tokenizer.SPECIALS) + [f"w{i}" for i in range(VOCAB_SIZE - 3)])
        ids = torch.randint(3, VOCAB_SIZE, (n, task.max_len), generator=g)
        lengths = torch.randint(1, task.max_len + 1, (n, 1), generator=g)
        mask = torch.arange(task.max_len)[None, :] < lengths
        ids = ids.masked_fill(~mask, Tokenizer.PAD)
        ids[:, 0] = Tokenizer.CLS
        return Dataset(rec.name, "train", ids, y, mask, list(rec.classes), "text",
                       "synthetic (random token ids)", vocab)
    side = task.image_size or rec.side
    x = torch.rand(n, rec.channels, side, side, generator=g)
    return Dataset(rec.name, "train", x, y, None, list(rec.classes), "image",
                   "synthetic (random pixels)")


def train_config(task: Task, data: Dataset, normalization: str, seed: int,
                 n_iter: int = 50, switches: Switches | None = None) -> TrainConfig:
    """The `TrainConfig` of one model of `task` (the model shape follows the data), trained
    complete or, with `switches`, with parts of every block switched off during training."""
    encoder = EncoderConfig(d_model=task.d_model, n_heads=task.n_heads, depth=task.depth,
                            d_ff=task.d_ff, normalization=normalization, n_iter=n_iter,
                            switches=switches or Switches())
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
                 n_iter: int = 50, cache_dir=None) -> dict[tuple[str, int], TrainResult]:
    """One model per (normalization, seed), trained or loaded from the model cache
    (`trainings.models_dir`: where `rankcollapse-train` puts them too)."""
    return {(name, seed): train(train_config(task, train_data, name, seed, n_iter),
                                train_data, test_data, models_dir(cache_dir), device, quiet=True)
            for name in NORMALIZATIONS for seed in seeds}


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
def record(model: Classifier, data: Dataset, n: int, switches: Switches,
           batch_size: int = 64) -> tuple[EncoderOutput, torch.Tensor | None]:
    """Hidden states, attention sub-layer outputs, attention and logits of the first `n` test
    inputs under `switches`, on CPU, in the model's dtype (images are cast to it)."""
    parts, first = [], next(model.parameters())
    with switched(model.eval(), switches):
        for start in range(0, min(n, len(data)), batch_size):
            stop = min(start + batch_size, n, len(data))
            mask = None if data.mask is None else data.mask[start:stop].to(first.device)
            x = data.x[start:stop].to(first.device)
            _, out = model(x.to(first.dtype) if x.is_floating_point() else x, mask, record=True)
            parts.append(EncoderOutput(*(getattr(out, k).cpu() for k in _RECORDED)))
    joined = [torch.cat([getattr(p, k) for p in parts], 0 if k == "x" else 1) for k in _RECORDED]
    return EncoderOutput(*joined), None if data.mask is None else data.mask[: min(n, len(data))]


_RECORDED = ("x", "hidden", "attn_out", "attention", "logits")


def hidden_residuals(out: EncoderOutput, mask: torch.Tensor | None) -> pd.DataFrame:
    """Relative residual (composite norm, token-mean residual, real tokens only) of every
    hidden state (block output), and the same relative to the input's at layer 0: one row
    per (layer, sample); layer 0 = the embeddings."""
    res = relative_residual(out.hidden.double(), "composite", "mean", mask)
    return layer_table(res.numpy()).assign(relative=(res / res[0]).numpy().ravel())


def output_residuals(out: EncoderOutput, mask: torch.Tensor | None) -> pd.DataFrame:
    """Relative residual of the attention sub-layer's own output at each layer 1..L (before
    the skip connection adds the block's input): one row per (layer, sample)."""
    res = relative_residual(out.attn_out.double(), "composite", "mean", mask).numpy()
    table = layer_table(res)
    return table.assign(layer=table["layer"] + 1)


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


def accuracy_table(results: dict[str, dict[tuple[str, int], TrainResult]]) -> pd.DataFrame:
    """Test accuracy (mean, standard deviation over seeds) and training time per task and
    normalization; `results` maps task role -> `train_models` output."""
    rows = [{"task": role, "dataset": r.config.dataset, "normalization": name, "seed": seed,
             "accuracy": r.test_accuracy, "train_minutes": r.train_seconds / 60}
            for role, by_model in results.items() for (name, seed), r in by_model.items()]
    table = pd.DataFrame(rows).groupby(["task", "dataset", "normalization"], sort=False)
    return table.agg(accuracy=("accuracy", "mean"), accuracy_std=("accuracy", "std"),
                     seeds=("seed", "count"), train_minutes=("train_minutes", "mean"))


ACCURACY_MARGIN = 0.01  # accuracies within a factor 1.01 of each other count as a match
ACCURACY_WORDS = {"more": "Sinkhorn more accurate", "less": "Sinkhorn less accurate",
                  "parity": "a match", "inconclusive": "inconclusive"}


def accuracy_claim(results: dict[str, dict[tuple[str, int], TrainResult]],
                   titles: dict[str, str]) -> Claim:
    """C8: Sinkhorn models match or improve accuracy, decided per task over training seeds
    (the seed is the unit; parity within `ACCURACY_MARGIN` counts as a match). Not testable
    with fewer than `stats.MIN_UNITS` seeds."""
    parts, accuracies, found, rows = [], [], [], []
    for role, by_model in results.items():
        seeds = sorted({seed for _, seed in by_model})
        soft = [by_model[("softmax", s)].test_accuracy for s in seeds]
        sink = [by_model[("sinkhorn", s)].test_accuracy for s in seeds]
        c = compare(soft, sink, margin=ACCURACY_MARGIN)
        found.append(c.verdict)
        rows.append({"ratio": c.ratio, "low": c.low, "high": c.high})
        accuracies.append(f"{titles[role]}: softmax {np.mean(soft):.3f}, Sinkhorn "
                          f"{np.mean(sink):.3f}")
        parts.append(f"{accuracies[-1]}, {c.summary('seeds', ACCURACY_WORDS)}")
    seeds = len({seed for by_model in results.values() for _, seed in by_model})
    if seeds < MIN_UNITS:
        return Claim("C8", "Sinkhorn models match or improve accuracy", "not testable here",
                     f"This profile trains {seeds} seed(s) per model, and the seed is the unit "
                     f"of this comparison (at least {MIN_UNITS} are needed; the full profile "
                     f"trains three). Test accuracies: " + "; ".join(accuracies) + ".")
    return Claim("C8", "Sinkhorn models match or improve accuracy",
                 claim_verdict("no less", found),
                 f"Mean test accuracy per task and its ratio Sinkhorn / softmax over {seeds} "
                 f"seeds (a match: the interval within a factor {1 + ACCURACY_MARGIN:g} of 1, "
                 "the book's margin). " + "; ".join(parts) + ".").with_numbers(
        pd.DataFrame(rows), figure=None,
        measure="test accuracy Sinkhorn / softmax, geometric mean over tasks")


def chance_sentence(results: dict[str, dict[tuple[str, int], TrainResult]],
                    titles: dict[str, str], margin: float = 0.1) -> str:
    """Whether every model beats chance (1 / classes) by more than `margin` in accuracy: the
    attention analysed is then that of models that learned the task, at least in part."""
    failing = [f"{titles[role]}, {name}, seed {seed} ({r.test_accuracy:.3f}; chance "
               f"{1 / r.config.model.n_classes:.3f})"
               for role, by_model in results.items() for (name, seed), r in by_model.items()
               if r.test_accuracy < 1 / r.config.model.n_classes + margin]
    if not failing:
        return (f"Every model beats chance by more than {margin:g} in accuracy, so the "
                f"attention analysed below is that of models that learned something of their "
                f"task (not necessarily well).")
    return ("Not every model learned: " + "; ".join(failing) + " is within "
            f"{margin:g} of chance, and its attention is that of a classifier that barely works.")


FLOOR = rounding_floor(torch.float64)  # the analysis runs in float64
# The figures of the hidden-state residuals, one per task (the chapter's names).
RESIDUAL_FIGURES = "fig-trained-residual-text, fig-trained-residual-mnist, fig-trained-residual-cats"


def layer_comparisons(table: pd.DataFrame, value: str = "residual", unit: str = "seed"
                      ) -> pd.DataFrame:
    """Sinkhorn / softmax of `value` per task, inference variant and layer (1..L), compared
    over the training seeds (`stats.compare_table`): each seed's value is the median over
    the test inputs, the same inputs for both models; values at the float64 rounding floor
    are left out."""
    return compare_table(table[table["layer"] > 0], unit=unit, by=["task", "variant", "layer"],
                         value=value, floor=FLOOR)


def claims_table(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Per task and variant, from `layer_comparisons`: at how many layers each verdict holds,
    how many layers are mostly at the rounding floor (fewer than half of the inputs usable),
    and over the other layers the mean log10 ratio and the layer where it is largest."""
    rows = []
    for (task, variant), g in comparisons.groupby(["task", "variant"], sort=False):
        usable = g[g["units"] >= g["excluded"]]
        log_ratio = np.log10(usable["ratio"])
        best = usable.loc[log_ratio.idxmax()] if len(usable) else None
        counts = g["verdict"].value_counts()
        rows.append({"task": task, "variant": variant,
                     **{f"layers_{v}": int(counts.get(v, 0)) for v in VERDICTS},
                     "layers_at_floor": len(g) - len(usable), "layers": len(g),
                     "mean_log10_ratio": float(log_ratio.mean()),
                     "largest_ratio_layer": int(best["layer"]) if best is not None else -1,
                     "largest_log10_ratio": float(log_ratio.max())})
    return pd.DataFrame(rows)


TABLE_HEADERS = {"task": "task", "variant": "inference variant",
                 "layers_more": "layers: Sinkhorn more", "layers_less": "layers: Sinkhorn less",
                 "layers_parity": "layers: parity", "layers_inconclusive": "layers: inconclusive",
                 "layers_at_floor": "of which mostly at the floor", "layers": "layers",
                 "mean_log10_ratio": "mean log10 ratio", "largest_ratio_layer": "largest at layer",
                 "largest_log10_ratio": "largest log10 ratio"}


def layer_sentences(comparisons: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (task, variant), `stats.describe` of the layer comparisons."""
    return {key: describe(g, "layer", "layer")
            for key, g in comparisons.groupby(["task", "variant"], sort=False)}


def path_comparisons(paths: pd.DataFrame, unit: str = "seed") -> pd.DataFrame:
    """Sinkhorn / softmax rank-1 residual of attention path products per setting and depth,
    compared over the training seeds: each seed's value is the median over its paths (the
    same paths are sampled in both models)."""
    return compare_table(paths, unit=unit, by=["setting", "depth"], floor=FLOOR)


def unit_log_ratios(table: pd.DataFrame, unit: str = "seed", value: str = "residual"
                    ) -> pd.DataFrame:
    """log(Sinkhorn / softmax) per (task, variant, layer >= 1, unit) of the units' medians
    (`stats.unit_values`); pairs at the float64 rounding floor are left out."""
    wide = unit_values(table[table["layer"] > 0], unit, ["task", "variant", "layer"], value)
    wide = wide[(wide["softmax"] > FLOOR) & (wide["sinkhorn"] > FLOOR)]
    return wide.assign(log_ratio=np.log(wide["sinkhorn"] / wide["softmax"]))


def contrast(table: pd.DataFrame, first, second, unit: str = "seed",
             matched: bool = False) -> pd.DataFrame:
    """Per task, whether Sinkhorn's advantage (the log residual ratio) is larger where
    `first` holds than where `second` does (each a function of `unit_log_ratios`' rows to a
    boolean Series): per unit, the mean log ratio over the rows of each selection; the two
    are compared over units with `stats.compare` ('more': larger where `first`). Also the
    Sinkhorn / softmax ratio itself in each selection (`first_ratio`, `second_ratio`) and
    whether Sinkhorn is ahead where `first` holds (`first_verdict`): a larger advantage
    presupposes an advantage. With `matched`, only the layers a unit has above the floor in
    every variant of the task count (otherwise a variant that collapses to the floor early
    would be averaged over its early layers only, and the other over all of them)."""
    logs = unit_log_ratios(table, unit)
    if matched:
        variants = logs.groupby("task")["variant"].transform("nunique")
        present = logs.groupby(["task", unit, "layer"])["variant"].transform("nunique")
        logs = logs[present == variants]
    rows = []
    for task in table["task"].unique():  # in the chapter's order
        g = logs[logs["task"] == task]
        a = g[second(g)].groupby(unit)["log_ratio"].mean()
        b = g[first(g)].groupby(unit)["log_ratio"].mean()
        both = a.index.intersection(b.index)
        c = compare(np.exp(a[both]), np.exp(b[both]))
        ahead = compare(np.ones(len(b)), np.exp(b))
        rows.append({"task": task, "ratio": c.ratio, "low": c.low, "high": c.high,
                     "units": c.units, "excluded": len(a.index.union(b.index)) - len(both),
                     "verdict": c.verdict, "first_ratio": float(np.exp(b.mean())),
                     "second_ratio": float(np.exp(a.mean())), "first_verdict": ahead.verdict})
    return pd.DataFrame(rows)


def skip_contrast(table: pd.DataFrame, with_skip=("full model", "without FFN"),
                  unit: str = "seed") -> pd.DataFrame:
    """C4c's test: is the advantage larger in the variants with skip connections than in
    those without, over the layers above the floor in all of them? See `contrast`."""
    return contrast(table, lambda g: g["variant"].isin(with_skip),
                    lambda g: ~g["variant"].isin(with_skip), unit, matched=True)


def early_contrast(table: pd.DataFrame, variant: str = "full model", unit: str = "seed"
                   ) -> pd.DataFrame:
    """C4b's test: in `variant`, is the advantage larger in the first half of the layers
    than in the second? See `contrast`."""
    depth = int(table["layer"].max())
    return contrast(table, lambda g: (g["variant"] == variant) & (g["layer"] <= depth // 2),
                    lambda g: (g["variant"] == variant) & (g["layer"] > depth // 2), unit)


def path_sentences(comparisons: pd.DataFrame) -> dict[str, str]:
    """Per setting, `stats.describe` of `path_comparisons` over depths."""
    return {s: describe(g, "depth") for s, g in comparisons.groupby("setting", sort=False)}


def _by_task(comparisons: pd.DataFrame, titles: dict[str, str], x: str, noun: str) -> str:
    return " ".join(f"{titles[t]}: {describe(g, x, noun)}"
                    for t, g in comparisons.groupby("task", sort=False))


def claims(hidden: pd.DataFrame, outputs: pd.DataFrame, paths: pd.DataFrame,
           titles: dict[str, str], early: pd.DataFrame | None = None,
           skips: pd.DataFrame | None = None, unit: str = "seeds") -> list[Claim]:
    """C4a (the hidden-state residual of the complete trained models is higher under
    Sinkhorn, at every layer of every task), C4b (larger in early layers: `early_contrast`),
    C4c (larger with skip connections: `skip_contrast`), C4d (the same for the attention
    sub-layer's output) and C4e (for attention path products), from `layer_comparisons` of
    the hidden states and of the attention outputs and from `path_comparisons` (settings
    "<title>, full model")."""
    full, out = (t[t["variant"] == "full model"] for t in (hidden, outputs))
    path_full = paths[paths["setting"].str.endswith(", full model")]

    def decided(table: pd.DataFrame) -> list[str]:
        """'more' only where the advantage is larger there *and* there is an advantage."""
        return [v if v != "more" or ahead == "more" else "parity"
                for v, ahead in zip(table["verdict"], table["first_verdict"])]

    def contrast_text(table: pd.DataFrame, more: str, less: str, where: str, other: str) -> str:
        words = {"more": more, "less": less, "parity": "no difference (parity)",
                 "inconclusive": "inconclusive"}
        lines = []
        for r in table.itertuples():
            no_lead = " but Sinkhorn is not ahead there, so no advantage is more visible" \
                if r.verdict == "more" and r.first_verdict != "more" else ""
            lines.append(f"{titles[r.task]}: {words[r.verdict]}{no_lead} (Sinkhorn / softmax "
                         f"{significant(r.first_ratio)} {where}, {significant(r.second_ratio)} {other}; ratio of "
                         f"ratios {significant(r.ratio)}, interval {significant(r.low)}–{significant(r.high)}, "
                         f"{r.units} {unit}).")
        return " ".join(lines)

    contrasts = []
    if early is not None:
        contrasts.append(Claim(
            "C4b", "the advantage is most visible in early layers",
            claim_verdict("more", decided(early)),
            "Complete models, first half of the layers against the second: "
            + contrast_text(early, "larger early", "larger late", "early", "late")
            ).with_numbers(early, figure=RESIDUAL_FIGURES, measure=(
                "ratio of ratios: Sinkhorn / softmax in the first half of the layers over "
                "the same in the second half")))
    if skips is not None:
        contrasts.append(Claim(
            "C4c", "the advantage is most visible with skip connections",
            claim_verdict("more", decided(skips)),
            "Variants with skip connections against those without, over the layers above "
            "the rounding floor in all four variants: "
            + contrast_text(skips, "larger with skips", "larger without skips", "with skips",
                            "without")).with_numbers(skips, figure=RESIDUAL_FIGURES,
                                                     measure=(
                "ratio of ratios: Sinkhorn / softmax with skip connections over the same "
                "without")))
    return [
        Claim("C4a", "trained models: the hidden-state (block output) residual stays higher "
              "under Sinkhorn", claim_verdict("more", full["verdict"].tolist()),
              _by_task(full, titles, "layer", "layer")).with_numbers(
            full, figure=RESIDUAL_FIGURES),
        *contrasts,
        Claim("C4d", "the same for the attention sub-layer's own output",
              claim_verdict("more", out["verdict"].tolist()),
              _by_task(out, titles, "layer", "layer")).with_numbers(
            out, figure="fig-trained-attention-output"),
        Claim("C4e", "the same for products of attention matrices along paths",
              claim_verdict("more", path_full["verdict"].tolist()),
              " ".join(f"{s.removesuffix(', full model')}: {describe(g, 'depth')}"
                       for s, g in path_full.groupby("setting", sort=False))).with_numbers(
            path_full, figure="fig-trained-paths"),
    ]


def entropy_comparisons(attention: pd.DataFrame, unit: str = "seed") -> pd.DataFrame:
    """Row entropy of the complete models' attention, Sinkhorn / softmax, per task and layer,
    over the training seeds (parity within a factor 1.01: entropies are all near log n)."""
    from .sinkhorn_vs_softmax import ENTROPY_MARGIN

    return compare_table(attention, unit=unit, by=["task", "layer"], value="entropy",
                         margin=ENTROPY_MARGIN)


def trained_attention_claims(attention: pd.DataFrame, entropy: pd.DataFrame,
                             titles: dict[str, str], tolerance: float = 1e-6,
                             share: float = 0.99) -> list[Claim]:
    """C2a on trained logits (at least `share` of the Sinkhorn models' attention matrices,
    each (layer, input) counted with its worst head, have a row error below `tolerance`
    after exactly 50 iterations), with the logit scale of each task's layers; and C9 on
    trained models (`entropy_comparisons`)."""
    sink = attention[attention["normalization"] == "sinkhorn"]
    parts, ok = [], []
    for task, g in sink.groupby("task", sort=False):
        within = float((g["marginal_error"] < tolerance).mean())
        ok.append(within >= share)
        scale = g.groupby("layer")["logit_std"].median()
        parts.append(f"{titles[task]}: {within:.1%} within {tolerance:g} (worst "
                     f"{g['marginal_error'].max():.1e}); logit scale {scale.min():.2g}–"
                     f"{scale.max():.2g} over layers")
    from .sinkhorn_vs_softmax import ENTROPY_PARITY, entropy_sentence

    return [
        Claim("C2a", "50 iterations make the trained models' attention effectively doubly "
              "stochastic", check_verdict(all(ok) if ok else None),
              "Row error after exactly 50 iterations of the trained Sinkhorn models' own "
              "logits, one value per layer and test input (its worst head and row), all "
              f"seeds (check: at least {share:.0%} of them below {tolerance:g}, thresholds of "
              "the book's choosing: the paper states none): " + "; ".join(parts)
              + ".").with_numbers(number=float((sink["marginal_error"] < tolerance).mean())
                                  if len(sink) else None, figure="fig-trained-attention",
                                  measure=f"share of (layer, input) values within {tolerance:g}, all tasks"),
        Claim("C9", "doubly stochastic attention spreads attention more evenly (trained models)",
              claim_verdict("more", entropy["verdict"].tolist()),
              " ".join(f"{titles[t]}: {entropy_sentence(g, 'layer', 'layer', False)}"
                       for t, g in entropy.groupby("task", sort=False))
              + f" {ENTROPY_PARITY}").with_numbers(
            entropy, figure="fig-trained-attention"),
    ]


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
    shapes: dict[str, tuple[int, int, int]]  # task -> (layers, heads, tokens) of its attention


def analyse(models: dict[str, dict[tuple[str, int], Classifier]], tests: dict[str, Dataset],
            n_eval: int, n_paths: int, seed: int, n_iter: int = 50,
            path_variants=("full model", "without skip")) -> Analysis:
    """Every measurement for every task -> {(normalization, training seed) -> model}, each
    model and variant run once on the first `n_eval` test inputs, in float64 (a copy of the
    model: the weights are the trained float32 ones), so that the rounding floor is
    float64's."""
    tables = {k: [] for k in ("hidden", "attention_output", "paths", "attention")}
    shapes = {}
    for task, by_model in models.items():
        for (name, train_seed), model in by_model.items():
            exact = copy.deepcopy(model).double()
            for variant, switches in VARIANTS.items():
                out, mask = record(exact, tests[task], n_eval, switches)
                layers, _, heads, tokens, _ = out.attention.shape
                shapes[task] = (layers, heads, tokens)
                labels = dict(task=task, normalization=name, seed=train_seed, variant=variant)
                tables["hidden"].append(hidden_residuals(out, mask).assign(**labels))
                tables["attention_output"].append(output_residuals(out, mask).assign(**labels))
                if variant in path_variants:
                    tables["paths"].append(
                        attention_paths(out, mask, n_paths, seed).assign(**labels))
                if variant == "full model":
                    tables["attention"].append(attention_statistics(
                        out, mask, n_iter, name == "sinkhorn").assign(**labels))
    return Analysis(**{k: pd.concat(v, ignore_index=True) for k, v in tables.items()},
                    shapes=shapes)
