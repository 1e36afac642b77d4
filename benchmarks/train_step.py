"""Benchmark: one training step of the same Vision Transformer, Sinkhorn against softmax.

    .venv/bin/python benchmarks/train_step.py [--shapes ci paper] [--repeats 10] [--n-iter 50]
                                              [--out benchmarks/results] [--trained ci]

For each set of shapes (`rankcollapse.step_timing.TRAIN_SHAPES`: the ci profile's and the
paper's) and each phase (forward with the graph built, backward, the whole AdamW step as
training runs it), prints the median time of each normalization and the median over
interleaved rounds of the ratio Sinkhorn / softmax, on the CPU and, when present, on CUDA.
Writes the table as CSV (`train_step-<device>.csv`). With `--trained PROFILE`, also one
step at the trained models' own logits for every task of that profile (chapter 5's cached
Sinkhorn models, the same weights run with each normalization on real batches, interleaved:
`step_timing.trained_step_table`), written to `train_step_trained-<device>.csv`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from rankcollapse.files import atomic_write
from rankcollapse.profiles import get_profile
from rankcollapse.step_timing import TRAIN_SHAPES, train_step_table, trained_step_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=list(TRAIN_SHAPES), choices=TRAIN_SHAPES)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--n-iter", type=int, default=get_profile("ci").n_iter,
                        help="full Sinkhorn iterations (default: the ci profile's)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--trained", metavar="PROFILE", default=None,
                        help="also time steps at the trained models of this profile")
    parser.add_argument("--cache-dir", type=Path, default=None, help="the model cache")
    args = parser.parse_args()
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        table = train_step_table(args.shapes, device, args.repeats, n_iter=args.n_iter)
        print(table.drop(columns=["repeats"]).to_string(index=False,
                                                      float_format=lambda v: f"{v:.3g}"))
        path = atomic_write(args.out / f"train_step-{device.type}.csv",
                            lambda tmp: table.to_csv(tmp, index=False))
        print(f"wrote {path}\n")
        if args.trained:
            trained = trained_step_table(args.trained, device, args.repeats,
                                         cache_dir=args.cache_dir)
            print(trained.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
            path = atomic_write(args.out / f"train_step_trained-{device.type}.csv",
                                lambda tmp: trained.to_csv(tmp, index=False))
            print(f"wrote {path}\n")


if __name__ == "__main__":
    main()
