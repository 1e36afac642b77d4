"""Estimate the training time of `make book PROFILE=full` on this machine.

    .venv/bin/python benchmarks/full_profile_estimate.py [--steps 5] [--device auto]

Times a few optimizer steps of every model the `full` profile trains (24 layers, width 128,
4 heads; the paper's shapes) on random data of the real datasets' shapes, and multiplies by
the profile's epochs, steps per epoch and seeds. Prints one line per model and the total.
"""

from __future__ import annotations

import argparse

from rankcollapse.devices import resolve_device
from rankcollapse.profiles import get_profile
from rankcollapse.step_timing import training_estimate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--profile", default="full")
    args = parser.parse_args()
    table = training_estimate(get_profile(args.profile), resolve_device(args.device), args.steps)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    settings = get_profile(args.profile)
    hours = table.estimated_hours.sum()
    print(f"estimated training time of profile {args.profile} on {table.device[0]}: "
          f"{hours:.1f} hours one after another (analyses not included); with "
          f"{settings.train_jobs} trainings side by side (`train_jobs`) at most "
          f"{hours:.1f} and at best {hours / settings.train_jobs:.1f} hours: how close to the "
          f"best depends on how much of the device one small model leaves idle, which this "
          f"estimate does not measure")


if __name__ == "__main__":
    main()
