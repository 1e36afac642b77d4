"""Measuring the normalizations: interleaved timings and bytes saved for backward.

Used by `benchmarks/sinkhorn.py`, by the book's appendix, by chapter 2 and by `step_timing`.
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
from ._sinkhorn_engine import sinkhorn_forward
from .normalizations import (marginal_errors, sinkhorn, sinkhorn_reference,
                             softmax)
from .verdicts import TOLERANCE

REFERENCE = "log-domain loop (reference)"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, fn: Callable[[], object]) -> float:
    """Seconds `fn` takes on `device`, the device synchronised before and after."""
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def interleaved_times(fns: dict[str, Callable[[], object]], repeats: int,
                      device: torch.device, warmup: int = 2) -> dict[str, list[float]]:
    """Wall times in seconds of each function, run in turn `repeats` times (after warm-up)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timed(device, fn))
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


def matvec_table(ns: list[int], batch: int, repeats: int, device: torch.device
                 ) -> pd.DataFrame:
    """Median time of the batched vector-times-matrix product one scaling half-step of the
    Sinkhorn engine makes, on `(batch, n, n)` float32, for each n (interleaved): on the CPU
    it drops several-fold at n = `SMALL_N`, which is why the torch engine iterates smaller
    kernels padded (the C loops, used on the CPU in float32, pad to whole vectors instead)."""
    fns = {}
    for n in ns:
        k, v = torch.rand(batch, n, n, device=device), torch.rand(batch, 1, n, device=device)
        fns[n] = lambda k=k, v=v: v @ k
    times = interleaved_times(fns, repeats, device)
    return pd.DataFrame([{"n": n, "microseconds": 1e6 * statistics.median(t), "batch": batch,
                          "device": device.type, "threads": torch.get_num_threads()}
                         for n, t in times.items()])


def sinkhorn_table(device: torch.device, shape: tuple[int, ...], repeats: int,
                   n_iter: int, scale: float = 2.0) -> pd.DataFrame:
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


# Column headers of `sinkhorn_table` for readers.
TABLE_HEADERS = {"median_ms": "median time (ms)", "speedup_vs_reference": "speed-up over the reference",
                 "max_abs_error_vs_reference": "largest difference to the reference",
                 "saved_for_backward_MiB": "kept for backward (MiB)"}
EXACTNESS_HEADERS = {
    "forward_max_abs_diff_to_exact": "largest difference to running every iteration",
    "stopped_early_share": "share stopped early (all matrices)",
    "grad_rel_diff_converged": "gradient difference, converged",
    "grad_rel_diff_unconverged": "gradient difference, not converged",
    "converged_share": "share converged (of those checked)"}


def exactness(device: torch.device, shape: tuple[int, ...], n_iter: int, scale: float,
              grad_matrices: int, seed: int = 0) -> dict[str, float]:
    """How far early stopping takes `sinkhorn` from exactly `n_iter` iterations, on random
    float32 logits of `shape` (entries N(0, scale^2)): the largest absolute difference of
    the forward (`early_stop=False` is the exact one), the share of matrices that stopped
    early, and the relative difference of the gradient from autograd through `n_iter`
    unrolled iterations (float64 reference) on `grad_matrices` of them, over those whose
    `n_iter`-iteration marginal error is below `TOLERANCE` and over the others."""

    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(*shape, generator=g) * scale).to(device)
    with torch.no_grad():
        forward = float((sinkhorn(x, n_iter) - sinkhorn(x, n_iter, early_stop=False)).abs().max())
        stopped = float(sinkhorn_forward(x, 2 * n_iter, None)[1].float().mean())
    a = x.reshape(-1, *shape[-2:])[:grad_matrices]
    w = torch.randn(a.shape, generator=g).to(device)
    ours, ref = a.clone().requires_grad_(True), a.double().requires_grad_(True)
    (sinkhorn(ours, n_iter) * w).sum().backward()
    (sinkhorn_reference(ref, n_iter) * w.double()).sum().backward()
    with torch.no_grad():
        errors = marginal_errors(sinkhorn_reference(a.double(), n_iter))
        converged = torch.maximum(*errors) < TOLERANCE

        def rel(chosen: torch.Tensor) -> float:
            if not bool(chosen.any()):
                return float("nan")
            d = ours.grad[chosen].double() - ref.grad[chosen]
            return float(d.norm() / ref.grad[chosen].norm())
    return {"forward_max_abs_diff_to_exact": forward, "stopped_early_share": stopped,
            "grad_rel_diff_converged": rel(converged), "grad_rel_diff_unconverged": rel(~converged),
            "converged_share": float(converged.float().mean())}
