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
