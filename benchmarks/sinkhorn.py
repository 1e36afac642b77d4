"""Benchmark: our Sinkhorn against the plain log-domain loop, and softmax, per device.

    .venv/bin/python benchmarks/sinkhorn.py [--repeats 15] [--out benchmarks/results]

Prints a table (implementation, shape, dtype, device, time, speed-up vs the log-domain
reference, max abs error vs that reference, bytes saved for backward) and writes it as CSV
(`sinkhorn-<device>.csv`) for the book's appendix. Timing: each implementation runs in turn,
interleaved, `repeats` times after a warm-up; the speed-up is the median of the per-round
ratios, so machine noise and allocator effects hit both sides of each ratio alike.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import pandas as pd
import torch

from rankcollapse import __version__
from rankcollapse.attention import sinkhorn, softmax
from rankcollapse.bench import interleaved_times, log_domain_sinkhorn, median_ratio, saved_bytes

N_ITER = 50


def bench_device(device: torch.device, shape: tuple[int, ...], repeats: int) -> pd.DataFrame:
    x = torch.randn(*shape, device=device, generator=None) * 2.0
    impls = {
        "log-domain loop (reference)": lambda t: log_domain_sinkhorn(t, N_ITER),
        "rankcollapse.sinkhorn": lambda t: sinkhorn(t, N_ITER),
        "rankcollapse.softmax": softmax,
    }
    with torch.no_grad():
        times = interleaved_times({k: (lambda f=f: f(x)) for k, f in impls.items()},
                                  repeats, device)
        reference = log_domain_sinkhorn(x, N_ITER)
        errors = {k: float((f(x) - reference).abs().max()) for k, f in impls.items()}
    ref_times = times["log-domain loop (reference)"]
    rows = []
    for name, fn in impls.items():
        rows.append({
            "implementation": name, "shape": "x".join(map(str, shape)), "dtype": "float32",
            "device": device.type, "median_ms": 1e3 * statistics.median(times[name]),
            "speedup_vs_reference": median_ratio(ref_times, times[name]),
            "max_abs_error_vs_reference": errors[name] if "softmax" not in name else float("nan"),
            "saved_for_backward_MiB": saved_bytes(fn, x) / 2**20,
            "repeats": repeats, "torch": torch.__version__, "threads": torch.get_num_threads(),
            "rankcollapse": __version__,
        })
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--shape", default="256x128x128")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    shape = tuple(int(s) for s in args.shape.split("x"))
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    args.out.mkdir(parents=True, exist_ok=True)
    for device in devices:
        torch.manual_seed(0)
        table = bench_device(device, shape, args.repeats)
        print(table.drop(columns=["torch", "threads", "rankcollapse", "repeats"])
              .to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        sink = table.set_index("implementation")
        mem = sink.loc["rankcollapse.sinkhorn", "saved_for_backward_MiB"] / \
            sink.loc["rankcollapse.softmax", "saved_for_backward_MiB"]
        print(f"{device.type}: sinkhorn saves {mem:.2f}x the bytes of softmax for backward\n")
        path = args.out / f"sinkhorn-{device.type}.csv"
        table.to_csv(path.with_suffix(".tmp"), index=False)
        path.with_suffix(".tmp").replace(path)  # atomic: a killed run leaves the old file
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
