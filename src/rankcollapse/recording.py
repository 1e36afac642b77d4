"""What a trained model does inside, as chapters 5 and 6 both read it: its layers recorded
on test inputs (with parts of the block switched off at inference), the residual tables of
those recordings, and the per-seed comparisons of Sinkhorn against softmax built on them.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import pandas as pd
import torch

from .data import Dataset
from .measures import FLOOR, layer_table, relative_residual
from .models import Classifier, EncoderOutput, Switches
from .stats import compare_table, unit_values


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


def layer_comparisons(table: pd.DataFrame, value: str = "residual", unit: str = "seed"
                      ) -> pd.DataFrame:
    """Sinkhorn / softmax of `value` per task, inference variant and layer (1..L), compared
    over the training seeds (`stats.compare_table`, description): each seed's value is the
    median over the test inputs, the same inputs for both models; values at the float64
    rounding floor are censored; the intervals hold together over the layers of each
    (task, variant), one panel of the chapter's figures."""
    return compare_table(table[table["layer"] > 0], unit=unit, by=["task", "variant", "layer"],
                         within=["task", "variant"], value=value, floor=FLOOR)


def per_unit(table: pd.DataFrame, value: str = "residual", position: str | None = "layer",
             by=("task", "variant")) -> pd.DataFrame:
    """A long table of chapter 5 as the data of a registered paired test (`primary_tests.run_part`):
    per (task, variant, position >= 1, training seed) the median of `value` over the test
    inputs or paths, softmax and Sinkhorn side by side."""
    keys = [*by] + ([position] if position else [])
    rows = table[table[position] > 0] if position else table
    wide = unit_values(rows, "seed", keys, value)
    return wide.rename(columns={"seed": "unit", **({position: "position"} if position else {})})
