"""The time of one training step, Sinkhorn against softmax: the appendix's experiment and
`benchmarks/train_step.py`'s. A Vision Transformer of a named shape (`TRAIN_SHAPES`) is
timed phase by phase (forward, backward, the whole optimizer step) at its initialisation
and at a chosen logit scale, and the trained models of a profile's tasks on their own
batches; `training_estimate` scales a profile's training time from a few steps. Times are
ratios against softmax in the same process, in interleaved pairs (`timing`).
"""

from __future__ import annotations

import copy
import statistics
from typing import Callable

import pandas as pd
import torch

from ._sinkhorn_engine import sinkhorn_forward
from .data import record
from .names import TASKS
from .models import EncoderConfig, ModelConfig, build_model, init_random_
from .normalizations import half_step_count
from .profiles import get_profile
from .tasks import load_task, synthetic_data, train_config
from .timing import timed
from .training import _batch, epoch_order, optimizer_step
from .training_plan import Training, run


def _vit_shape(profile: str, batch: int) -> dict:
    """The shape of a profile's MNIST Vision Transformer (the model chapter 5 trains)."""
    task = get_profile(profile).tasks["mnist"]
    return dict(depth=task.depth, d_model=task.d_model, n_heads=task.n_heads,
                patch=task.patch, batch=batch)


# The Vision Transformers timed by `train_step_table` (28 x 28 single-channel images): the
# `ci` profile's (16 + 1 tokens) and the paper's (49 + 1 tokens, a smaller batch to time).
TRAIN_SHAPES = {"ci": _vit_shape("ci", 128), "paper": _vit_shape("full", 32)}
PHASES = ("forward", "backward", "step")


def _training_phases(shape: dict, normalization: str, device: torch.device, n_iter: int,
                     seed: int, logit_std: float | None) -> dict[str, Callable[[], float]]:
    """For one ViT: functions that each run one phase of a training step and return its time
    in seconds (forward with the graph built; backward of a fresh forward; the whole
    optimizer step as training does it). `logit_std`: Gaussian weights whose attention
    logits have this standard deviation (`models.init_random_`), as in a trained model, where
    Sinkhorn needs more iterations; None: PyTorch's default initialisation (small logits)."""

    torch.manual_seed(seed)
    encoder = EncoderConfig(d_model=shape["d_model"], n_heads=shape["n_heads"],
                            depth=shape["depth"], d_ff=2 * shape["d_model"],
                            normalization=normalization, n_iter=n_iter)
    model = build_model(ModelConfig("image", 10, encoder, image_size=28, patch=shape["patch"]))
    if logit_std is not None:
        init_random_(model.encoder, logit_std, torch.Generator().manual_seed(seed))
    model = model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape["batch"], 1, 28, 28, generator=g).to(device)
    y = torch.randint(10, (shape["batch"],), generator=g).to(device)
    loss = lambda: torch.nn.functional.cross_entropy(model(x)[0], y)  # noqa: E731

    def backward() -> float:
        value = loss()
        return timed(device, value.backward)

    return {"forward": lambda: timed(device, loss), "backward": backward,
            "step": lambda: timed(device, lambda: optimizer_step(model, optimizer,
                                                                  (x, None, y), 1e-4))}


WEIGHTS = {"default initialisation": None, "logit scale 1": 1.0}


def train_step_table(shapes: list[str], device: torch.device, repeats: int = 10,
                     *, n_iter: int, seed: int = 0, weights=tuple(WEIGHTS)) -> pd.DataFrame:
    """Sinkhorn against softmax for the same ViT (`TRAIN_SHAPES`) with the given `weights`
    (`WEIGHTS`), per phase of a training step: median times and the median over interleaved
    rounds of the per-round ratio Sinkhorn / softmax (each round runs every phase of both
    models in turn)."""
    rows = []
    for name, weight in ((n, w) for n in shapes for w in weights):
        shape = TRAIN_SHAPES[name]
        phases = {norm: _training_phases(shape, norm, device, n_iter, seed, WEIGHTS[weight])
                  for norm in ("softmax", "sinkhorn")}
        for fns in phases.values():  # warm-up: allocator, lazy initialisation
            for fn in fns.values():
                fn()
        times = {(norm, phase): [] for norm in phases for phase in PHASES}
        for _ in range(repeats):
            for phase in PHASES:
                for norm, fns in phases.items():
                    times[(norm, phase)].append(fns[phase]())
        tokens = (28 // shape["patch"]) ** 2 + 1
        for phase in PHASES:
            soft, sink = times[("softmax", phase)], times[("sinkhorn", phase)]
            rows.append({"shapes": name, "model": f"{shape['depth']} layers, width "
                         f"{shape['d_model']}, {shape['n_heads']} heads, {tokens} tokens, "
                         f"batch {shape['batch']}", "weights": weight, "phase": phase,
                         "device": device.type,
                         "softmax_ms": 1e3 * statistics.median(soft),
                         "sinkhorn_ms": 1e3 * statistics.median(sink),
                         "ratio": statistics.median(b / a for a, b in zip(soft, sink)),
                         "repeats": repeats, "threads": torch.get_num_threads()})
    return pd.DataFrame(rows)


def training_estimate(profile, device: torch.device, steps: int = 5, seed: int = 0
                      ) -> pd.DataFrame:
    """Time `steps` optimizer steps (median, after one warm-up) of every model a profile
    trains, on random data of its shapes, and extrapolate to the profile's whole training:
    epochs x steps per epoch (the dataset's training size / batch) x seeds, per task and
    normalization. Training only: the analyses after it are not counted."""

    rows = []
    for role, task in profile.tasks.items():
        data = synthetic_data(task, task.batch_size, seed)
        batch = (data.x.to(device), None if data.mask is None else data.mask.to(device),
                 data.y.to(device))
        for name in ("softmax", "sinkhorn"):
            torch.manual_seed(seed)
            model = build_model(train_config(task, data, name, seed, profile.n_iter).model).to(device).train()
            optimizer = torch.optim.AdamW(model.parameters(), lr=task.lr)
            step = lambda: optimizer_step(model, optimizer, batch, task.lr)  # noqa: E731
            step()
            seconds = statistics.median(timed(device, step) for _ in range(steps))
            per_epoch = -(-record(task.dataset).train_size // task.batch_size)
            total = task.epochs * per_epoch * len(profile.seeds_of(role))
            rows.append({"task": role, "dataset": task.dataset, "normalization": name,
                         "seconds_per_step": seconds, "steps": total,
                         "estimated_hours": seconds * total / 3600, "device": device.type})
    return pd.DataFrame(rows)


def trained_step_table(profile: str, device: torch.device, repeats: int = 10,
                       seed: int | None = None, cache_dir=None) -> pd.DataFrame:
    """One training step at the trained models' own logits, per task of `profile`: the
    Sinkhorn model of training seed `seed` (None: the task's first training seed; from the
    model cache, trained there if missing)
    and the same weights with softmax attention, each stepping on the same real training
    batches in turn (rounds interleaved; learning rate 0, so the weights stay the trained
    ones). Median times, the median of the per-round ratios Sinkhorn / softmax, and the share
    of the attention matrices of the first batch whose Sinkhorn iteration converged (stopped
    early, with the implicit backward) rather than running all iterations."""
    settings, rows = get_profile(profile), []
    for role, task in settings.tasks.items():
        first = settings.seeds_of(role)[0] if seed is None else seed
        trained = run(Training(profile, role, "sinkhorn", first), device, cache_dir).model
        models = {"sinkhorn": trained.train(), "softmax": copy.deepcopy(trained).train()}
        for layer in models["softmax"].encoder.blocks:
            layer.attn.normalization = "softmax"
        optimizers = {k: torch.optim.AdamW(m.parameters(), lr=0.0) for k, m in models.items()}
        train_data = load_task(task)[0]
        order = epoch_order(len(train_data), first, 0)
        batches = [_batch(train_data, order[i * task.batch_size:(i + 1) * task.batch_size],
                          device) for i in range(min(repeats + 1, len(order) // task.batch_size))]
        times = {k: [] for k in models}
        for i, batch in enumerate(batches):
            for name, model in models.items():
                step = lambda m=model, o=optimizers[name]: optimizer_step(m, o, batch, 0.0)  # noqa: E731
                seconds = timed(device, step)
                if i:  # the first round warms up
                    times[name].append(seconds)
        with torch.no_grad():
            _, out = trained.eval()(batches[0][0], batches[0][1], record=True)
            mask = None if batches[0][1] is None else batches[0][1][:, None, :].expand(
                *out.logits.shape[1:-1])
            shares = [float(sinkhorn_forward(logits.float(), half_step_count(settings.n_iter),
                                             mask)[1].float().mean()) for logits in out.logits]
        soft, sink = times["softmax"], times["sinkhorn"]
        rows.append({"task": role, "dataset": task.dataset, "device": device.type,
                     "softmax_ms": 1e3 * statistics.median(soft),
                     "sinkhorn_ms": 1e3 * statistics.median(sink),
                     "ratio": statistics.median(b / a for a, b in zip(soft, sink)),
                     "converged_share": statistics.mean(shares),
                     "logit_std": float(torch.stack([l.std() for l in out.logits]).median()),
                     "repeats": len(soft), "threads": torch.get_num_threads()})
    return pd.DataFrame(rows)


def trained_step_sentence(table: pd.DataFrame) -> str:
    """What `trained_step_table` found, in a sentence: the range of the step ratios and the
    task where Sinkhorn costs the most."""
    ratios = table.set_index("task")["ratio"]
    worst = ratios.idxmax()
    return (f"At the trained models' own logits a training step with Sinkhorn attention costs "
            f"between {ratios.min():.2f} and {ratios.max():.2f} times the softmax step on this "
            f"device, the most on {TASKS.get(worst, worst)}.")
