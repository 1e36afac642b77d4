"""Benchmark: our Sinkhorn against the plain log-domain loop, and softmax, per device.

    .venv/bin/python benchmarks/sinkhorn.py [--repeats 15] [--n-iter 50] [--out benchmarks/results]
                                            [--small]

Prints a table (implementation, shape, dtype, device, time, speed-up vs the log-domain
reference, max abs error vs that reference, bytes saved for backward) and writes it as CSV
(`sinkhorn-<device>.csv`) for the book's appendix. Timing: each implementation runs in turn,
interleaved, `repeats` times after a warm-up; the speed-up is the median of the per-round
ratios, so machine noise and allocator effects hit both sides of each ratio alike. With
`--small`, also the batched vector-times-matrix product of one scaling half-step at small n
(`timing.matvec_table`), which shows why the engine pads kernels below `SMALL_N`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from rankcollapse.files import atomic_write
from rankcollapse._sinkhorn_engine import SMALL_N
from rankcollapse.profiles import get_profile
from rankcollapse.timing import exactness, matvec_table, sinkhorn_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--shape", default="256x128x128")
    parser.add_argument("--n-iter", type=int, default=get_profile("ci").n_iter,
                        help="full Sinkhorn iterations (default: the ci profile's)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--small", action="store_true",
                        help="also time one scaling half-step's product at small n")
    args = parser.parse_args()
    shape = tuple(int(s) for s in args.shape.split("x"))
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        torch.manual_seed(0)
        table = sinkhorn_table(device, shape, args.repeats, args.n_iter)
        print(table.drop(columns=["torch", "threads", "rankcollapse", "repeats"])
              .to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        sink = table.set_index("implementation")
        mem = sink.loc["rankcollapse.sinkhorn", "saved_for_backward_MiB"] / \
            sink.loc["rankcollapse.softmax", "saved_for_backward_MiB"]
        print(f"{device.type}: sinkhorn saves {mem:.2f}x the bytes of softmax for backward")
        sizes = get_profile("ci").appendix
        for s in sizes.scales:
            facts = exactness(device, shape, args.n_iter, scale=s,
                              grad_matrices=sizes.gradient_matrices)
            print(f"{device.type}, logit scale {s:g}: " + ", ".join(
                f"{k} {v:.3g}" for k, v in facts.items()))
        if args.small:
            small = matvec_table([8, 12, 16, 17, 19, SMALL_N, 24, 32], 512, args.repeats, device)
            print(small.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        print()
        path = atomic_write(args.out / f"sinkhorn-{device.type}.csv",
                            lambda tmp: table.to_csv(tmp, index=False))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
