"""The trainings a profile needs, and a command that runs exactly one of them.

    rankcollapse-train --profile full --task mnist --normalization sinkhorn --seed 1 --device cuda
    rankcollapse-train --profile full --task mnist --normalization softmax --seed 0 --variant pure-ln
    rankcollapse-train --profile full --list        # one command line per training

Each training writes its model into the shared model cache (`models_dir()`: the
`--cache-dir` option, else $RANKCOLLAPSE_MODELS, else `.cache/models` in the working
directory), under the same key the chapters compute (the complete models of chapter 5; with
`--variant`, chapter 6's models trained as pure attention), so that any scheduler (a
Slurm job array, one process per GPU) can run a profile's trainings in parallel and
`make book PROFILE=full` then trains only what is missing. Trainings of the same model wait
for each other; a finished one is loaded, not repeated.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .devices import DEVICES, resolve_device
from .normalizations import NORMALIZATIONS
from .profiles import PROFILES, get_profile

SEED_RANGE = (0, 2**32)  # what torch and numpy generators accept


def models_dir(cache_dir: str | Path | None = None) -> Path:
    """Where trained models are cached: `cache_dir`, else $RANKCOLLAPSE_MODELS, else
    `.cache/models` in the working directory (the repository root, for the book)."""
    return Path(cache_dir or os.environ.get("RANKCOLLAPSE_MODELS") or ".cache/models")


# What a model is trained as: complete (chapter 5), or pure attention with and without the
# blocks' LayerNorm (chapter 6: the `open_questions.SCRATCH` variant each name stands for).
PURE = {"pure-ln": "pure attention, LayerNorm", "pure-no-ln": "pure attention, no LayerNorm"}
VARIANTS = ("complete", *PURE)


@dataclass(frozen=True)
class Training:
    profile: str
    task: str
    normalization: str
    seed: int
    variant: str = "complete"

    def command(self, device: str = "cuda") -> str:
        variant = "" if self.variant == "complete" else f" --variant {self.variant}"
        return (f"rankcollapse-train --profile {self.profile} --task {self.task} "
                f"--normalization {self.normalization} --seed {self.seed} --device {device}"
                + variant)


def planned(profile: str) -> list[Training]:
    """Every training the chapters of `profile` need, in their order: chapter 5's complete
    models, then chapter 6's pure ones for the profile's `scratch_tasks`."""
    settings = get_profile(profile)
    complete = [Training(settings.name, task, name, seed) for task in settings.tasks
                for name in NORMALIZATIONS for seed in settings.train_seeds]
    pure = [Training(settings.name, task, name, seed, variant) for task in settings.scratch_tasks
            for variant in PURE for name in NORMALIZATIONS for seed in settings.train_seeds]
    return complete + pure


def run(training: Training, device: str = "auto", cache_dir: str | Path | None = None,
        quiet: bool = False):
    """Train (or load) one model into the cache; returns its `TrainResult`."""
    from .experiments.open_questions import SCRATCH
    from .experiments.trained_models import load_task, train_config
    from .training import train

    settings = get_profile(training.profile)
    task = settings.tasks[training.task]
    train_data, test_data = load_task(task)
    switches = SCRATCH[PURE[training.variant]] if training.variant in PURE else None
    cfg = train_config(task, train_data, training.normalization, training.seed, settings.n_iter,
                       switches)
    return train(cfg, train_data, test_data, models_dir(cache_dir), device, quiet=quiet)


def seed_argument(text: str) -> int:
    """argparse type: an integer seed in [0, 2**32)."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer; got {text!r}") from None
    if not SEED_RANGE[0] <= seed < SEED_RANGE[1]:
        raise argparse.ArgumentTypeError(f"seed must be in [0, 2**32); got {seed}")
    return seed


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="rankcollapse-train",
                                  description="Train exactly one model of a profile into the "
                                              "shared model cache, or list them all.")
    cli.add_argument("--profile", choices=list(PROFILES), default="ci")
    cli.add_argument("--list", action="store_true",
                     help="print one command line per training the profile needs, and exit")
    cli.add_argument("--task", help="a task of the profile, e.g. mnist")
    cli.add_argument("--normalization", choices=NORMALIZATIONS)
    cli.add_argument("--seed", type=seed_argument, help="training seed, in [0, 2**32)")
    cli.add_argument("--device", choices=DEVICES, default="auto")
    cli.add_argument("--variant", choices=VARIANTS, default="complete",
                     help="complete (chapter 5), or pure attention with or without LayerNorm "
                          "(chapter 6)")
    cli.add_argument("--cache-dir", type=Path, default=None,
                     help="model cache (default: $RANKCOLLAPSE_MODELS, else .cache/models)")
    return cli


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    if args.list:
        print("\n".join(t.command(args.device if args.device != "auto" else "cuda")
                        for t in planned(args.profile)))
        return 0
    missing = [f"--{k}" for k in ("task", "normalization", "seed") if getattr(args, k) is None]
    if missing:
        cli.error(f"{', '.join(missing)} required (or --list)")
    tasks = list(get_profile(args.profile).tasks)
    if args.task not in tasks:
        cli.error(f"unknown task {args.task!r} for profile {args.profile}; valid: "
                  f"{', '.join(tasks)}")
    try:
        resolve_device(args.device)
    except ValueError as error:
        cli.error(str(error))
    result = run(Training(args.profile, args.task, args.normalization, args.seed, args.variant),
                 args.device, args.cache_dir, quiet=True)
    state = "loaded from the cache" if result.from_cache else "trained"
    print(f"{args.task} {args.normalization} seed {args.seed}: {state}, test accuracy "
          f"{result.test_accuracy:.4f}, {result.steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
