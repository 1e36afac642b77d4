"""Measuring the normalizations: interleaved timings and bytes saved for backward.

Used by `benchmarks/sinkhorn.py`, by the book's appendix and by chapter 2.
Times are ratios against a reference run in the same process, in interleaved pairs, so that
a noisy machine or the allocator's mood moves both sides together.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import pandas as pd
import torch

from . import __version__
from .normalizations import sinkhorn, sinkhorn_reference, softmax

REFERENCE = "log-domain loop (reference)"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved_times(fns: dict[str, Callable[[], object]], repeats: int,
                      device: torch.device, warmup: int = 2) -> dict[str, list[float]]:
    """Wall times in seconds of each function, run in turn `repeats` times (after warm-up)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            times[name].append(time.perf_counter() - start)
    return times


def median_ratio(reference: list[float], other: list[float]) -> float:
    """Median over the interleaved pairs of reference time / other time (speed-up)."""
    return statistics.median(r / o for r, o in zip(reference, other))


def saved_bytes(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> int:
    """Bytes of the tensors autograd saves for backward when computing fn(x) (x requires grad)."""
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x.detach().requires_grad_(True))
    return total


def time_vs_n(ns: list[int], batch: int, n_iter: int, repeats: int,
              device: torch.device) -> pd.DataFrame:
    """Median time of one call of softmax, our Sinkhorn and the log-domain reference on
    `(batch, n, n)` float32 logits, for each n; interleaved as in the benchmark."""
    rows = []
    for n in ns:
        x = torch.randn(batch, n, n, device=device)
        fns = {"softmax": lambda: softmax(x), "sinkhorn": lambda: sinkhorn(x, n_iter),
               "log-domain reference": lambda: sinkhorn_reference(x, n_iter)}
        with torch.no_grad():
            times = interleaved_times(fns, repeats, device, warmup=1)
        rows += [{"n": n, "implementation": k, "seconds": statistics.median(v)}
                 for k, v in times.items()]
    return pd.DataFrame(rows)


def sinkhorn_table(device: torch.device, shape: tuple[int, ...], repeats: int,
                   n_iter: int = 50, scale: float = 2.0) -> pd.DataFrame:
    """The benchmark's table: our Sinkhorn, the log-domain reference and softmax on random
    float32 logits of `shape` (entries N(0, scale^2)): median time, speed-up against the
    reference (median of interleaved ratios), max abs error against the reference, and the
    bytes autograd saves for backward."""
    x = torch.randn(*shape, device=device) * scale
    impls = {REFERENCE: lambda t: sinkhorn_reference(t, n_iter),
             "rankcollapse.sinkhorn": lambda t: sinkhorn(t, n_iter),
             "rankcollapse.softmax": softmax}
    with torch.no_grad():
        times = interleaved_times({k: (lambda f=f: f(x)) for k, f in impls.items()},
                                  repeats, device)
        reference = sinkhorn_reference(x, n_iter)
        errors = {k: float((f(x) - reference).abs().max()) for k, f in impls.items()}
    return pd.DataFrame([{
        "implementation": name, "shape": "x".join(map(str, shape)), "dtype": "float32",
        "device": device.type, "median_ms": 1e3 * statistics.median(times[name]),
        "speedup_vs_reference": median_ratio(times[REFERENCE], times[name]),
        "max_abs_error_vs_reference": errors[name] if "softmax" not in name else float("nan"),
        "saved_for_backward_MiB": saved_bytes(fn, x) / 2**20, "repeats": repeats,
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "rankcollapse": __version__,
    } for name, fn in impls.items()])


# ----------------------------------------------------------------------------- training steps

# The Vision Transformers timed by `train_step_table` (28 x 28 single-channel images).
TRAIN_SHAPES = {
    "ci": dict(depth=6, d_model=64, n_heads=4, patch=7, batch=128),  # 16 + 1 tokens
    "paper": dict(depth=24, d_model=128, n_heads=4, patch=4, batch=32),  # 49 + 1 tokens
}
PHASES = ("forward", "backward", "step")


def _timed(device: torch.device, fn: Callable[[], object]) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def _training_phases(shape: dict, normalization: str, device: torch.device, n_iter: int,
                     seed: int) -> dict[str, Callable[[], float]]:
    """For one ViT: functions that each run one phase of a training step and return its time
    in seconds (forward with the graph built; backward of a fresh forward; the whole
    optimizer step as training does it)."""
    from .models import EncoderConfig, ModelConfig, build_model
    from .training import optimizer_step

    torch.manual_seed(seed)
    encoder = EncoderConfig(d_model=shape["d_model"], n_heads=shape["n_heads"],
                            depth=shape["depth"], d_ff=2 * shape["d_model"],
                            normalization=normalization, n_iter=n_iter)
    model = build_model(ModelConfig("image", 10, encoder, image_size=28, patch=shape["patch"]))
    model = model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape["batch"], 1, 28, 28, generator=g).to(device)
    y = torch.randint(10, (shape["batch"],), generator=g).to(device)
    loss = lambda: torch.nn.functional.cross_entropy(model(x)[0], y)  # noqa: E731

    def backward() -> float:
        value = loss()
        return _timed(device, value.backward)

    return {"forward": lambda: _timed(device, loss), "backward": backward,
            "step": lambda: _timed(device, lambda: optimizer_step(model, optimizer,
                                                                  (x, None, y), 1e-4))}


def train_step_table(shapes: list[str], device: torch.device, repeats: int = 10,
                     n_iter: int = 50, seed: int = 0) -> pd.DataFrame:
    """Sinkhorn against softmax for the same ViT (`TRAIN_SHAPES`), per phase of a training
    step: median times and the median over interleaved rounds of the per-round ratio
    Sinkhorn / softmax (each round runs every phase of both models in turn)."""
    rows = []
    for name in shapes:
        shape = TRAIN_SHAPES[name]
        phases = {norm: _training_phases(shape, norm, device, n_iter, seed)
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
                         f"batch {shape['batch']}", "phase": phase, "device": device.type,
                         "softmax_ms": 1e3 * statistics.median(soft),
                         "sinkhorn_ms": 1e3 * statistics.median(sink),
                         "ratio": statistics.median(b / a for a, b in zip(soft, sink)),
                         "repeats": repeats, "threads": torch.get_num_threads()})
    return pd.DataFrame(rows)
