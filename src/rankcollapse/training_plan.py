"""The trainings a profile needs, and a command that runs exactly one of them.

    rankcollapse-train --profile full --task mnist --normalization sinkhorn --seed 1 --device cuda
    rankcollapse-train --profile full --task mnist --normalization softmax --seed 0 --variant pure-ln
    rankcollapse-train --profile ci --task mnist --normalization softmax --seed 0 --depth 12
    rankcollapse-train --profile full --list        # one command line per training
    rankcollapse-train --profile full --all --jobs 4 --device cuda   # all, 4 at a time

Each training writes its model into the shared model cache (`models_dir()`: the
`--cache-dir` option, else $RANKCOLLAPSE_MODELS, else `.cache/models` in the working
directory), under the same key the chapters compute (the complete models of chapter 5; with
`--variant`, chapter 6's models trained as pure attention; with `--depth`, the models of
chapter 6's depth sweep), so that any scheduler (a
Slurm job array, one process per GPU) can run a profile's trainings in parallel and
`make book PROFILE=full` then trains only what is missing. Trainings of the same model wait
for each other; a finished one is loaded, not repeated. `--all --jobs N` (and `run_all`, which
the chapters call) runs N trainings at once in worker processes that share the device, each
with `workers.threads_per_job` CPU threads: small models use a GPU, or two CPU cores, better side by
side than one after another.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import sys
from concurrent.futures import as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from .devices import DEVICES, resolve_device
from .normalizations import NORMALIZATIONS
from .profiles import PROFILES, Profile, Task, get_profile, sweep_task
from .tasks import PURE, SCRATCH, load_task, train_config
from .data import Dataset, data_root
from .training import TrainConfig, TrainResult, train
from .workers import pool

SEED_RANGE = (0, 2**32)  # what torch and numpy generators accept


def models_dir(cache_dir: str | Path | None = None) -> Path:
    """Where trained models are cached: `cache_dir`, else $RANKCOLLAPSE_MODELS, else
    `.cache/models` in the working directory (the repository root, for the book)."""
    return Path(cache_dir or os.environ.get("RANKCOLLAPSE_MODELS") or ".cache/models")


# What a model is trained as: complete (chapter 5), or pure attention with and without the
# blocks' LayerNorm (chapter 6: the `tasks.SCRATCH` variant each of `tasks.PURE` stands for).
VARIANTS = ("complete", *PURE)


@dataclass(frozen=True)
class Training:
    profile: str
    task: str
    normalization: str
    seed: int
    variant: str = "complete"
    depth: int | None = None  # a depth of the profile's depth sweep (its task's model there)

    def command(self, device: str = "cuda") -> str:
        variant = "" if self.variant == "complete" else f" --variant {self.variant}"
        depth = "" if self.depth is None else f" --depth {self.depth}"
        return (f"rankcollapse-train --profile {self.profile} --task {self.task} "
                f"--normalization {self.normalization} --seed {self.seed} --device {device}"
                + variant + depth)

    def task_of(self, settings: Profile) -> Task:
        """The task this training trains: the profile's, or the depth sweep's at `depth`."""
        return settings.tasks[self.task] if self.depth is None else \
            sweep_task(settings, self.depth)


def planned(profile: str | Profile, variants=VARIANTS, sweep: bool = True) -> list[Training]:
    """Every training the chapters of `profile` (its name, or the profile itself) need, in
    their order: chapter 5's complete models, then chapter 6's pure ones for the profile's
    `scratch_tasks` and `scratch_seeds` (only those of `variants`), then (unless `sweep` is
    False: chapter 5 trains only its own) the depth sweep's models that chapter 5 has not
    trained already."""
    settings = profile if isinstance(profile, Profile) else get_profile(profile)
    complete = [Training(settings.name, task, name, seed) for task in settings.tasks
                for name in NORMALIZATIONS for seed in settings.seeds_of(task)]
    pure = [Training(settings.name, task, name, seed, variant) for task in settings.scratch_tasks
            for variant in PURE for name in NORMALIZATIONS for seed in settings.scratch_seeds]
    new = [t for t in swept(settings) if sweep and not (
        t.task_of(settings) == settings.tasks[t.task] and t.seed in settings.seeds_of(t.task))]
    return [t for t in complete + pure + new if t.variant in variants]


def swept(settings: Profile) -> list[Training]:
    """Every model of the profile's depth sweep (chapter 6), one per (depth, normalization,
    seed); none where it has no sweep."""
    sweep = settings.depth_sweep
    return [] if sweep is None else [
        Training(settings.name, sweep.task, name, seed, depth=depth)
        for depth in sweep.depths for name in NORMALIZATIONS for seed in sweep.seeds]


@functools.lru_cache(maxsize=None)
def _task_data(task: Task, root: Path) -> tuple[Dataset, Dataset]:
    """`load_task`, read once per process and data root: a chapter loads or checks dozens
    of models of the same few tasks (reading the MNIST stand-in took 0.2 s each time)."""
    return load_task(task, root)


def task_data(task: Task) -> tuple[Dataset, Dataset]:
    """The training and test data of `task` (see `load_task`), from this process's copy."""
    return _task_data(task, data_root())


def _config(training: Training, task: Task, train_data: Dataset) -> TrainConfig:
    """The configuration `training` trains `task` with, on its training data."""
    switches = SCRATCH[PURE[training.variant]] if training.variant in PURE else None
    return train_config(task, train_data, training.normalization, training.seed,
                        get_profile(training.profile).n_iter, switches)


def run(training: Training, device: str = "auto", cache_dir: str | Path | None = None,
        quiet: bool = False):
    """Train (or load) one model into the cache; returns its `TrainResult`."""
    task = training.task_of(get_profile(training.profile))
    train_data, test_data = task_data(task)
    cfg = _config(training, task, train_data)
    return train(cfg, train_data, test_data, models_dir(cache_dir), device, quiet=quiet)


def missing(trainings: list[Training], cache_dir: str | Path | None = None) -> list[Training]:
    """The trainings whose finished model the cache lacks (a model that is there but fails
    its checks is found, and trained again, when it is loaded), the costliest first: so that
    side by side, no long training starts last while the other workers have nothing left.
    The cost is the training's work in token-layers (epochs x examples x tokens x layers)."""
    costs = {}
    for training in dict.fromkeys(trainings):
        task = training.task_of(get_profile(training.profile))
        train_data = task_data(task)[0]
        cfg = _config(training, task, train_data)
        # `training.train` writes result.json last: a run with one has finished
        if not (models_dir(cache_dir) / cfg.key(train_data) / "result.json").is_file():
            model = cfg.model
            tokens = model.max_len if model.kind == "text" else \
                1 + (model.image_size // model.patch) ** 2
            costs[training] = cfg.epochs * len(train_data) * tokens * model.encoder.depth
    return sorted(costs, key=costs.get, reverse=True)


def _train_one(training: Training, device: str, cache_dir: str | Path | None) -> str:
    """One training (in a worker, or in this process), silently: the epoch lines of
    workers side by side would interleave, and a book's trainings would fill a chapter's
    output with a thousand of them; `run_all`'s bar counts the finished models and names the
    last with its test accuracy."""
    with contextlib.redirect_stdout(io.StringIO()):
        result = run(training, device, cache_dir, quiet=True)
    depth = "" if training.depth is None else f" depth {training.depth}"
    return f"{training.task}{depth} {training.normalization} seed {training.seed}: " \
           f"{result.test_accuracy:.3f}"


def run_all(trainings: list[Training], jobs: int = 1, device: str = "auto",
            cache_dir: str | Path | None = None, quiet: bool = False) -> None:
    """Train every one of `trainings` that the cache does not hold yet, `jobs` at a time in
    worker processes (spawned, so that CUDA and the threads start fresh in each), each with
    `workers.threads_per_job(jobs)` threads; with `jobs` 1, one after another in this process.
    The results are in the cache: load them with `run` (or the chapters' own calls). A
    failing training stops the rest and raises its error here."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1; got {jobs}")
    trainings = missing(trainings, cache_dir)
    if not trainings:
        return  # nothing to train: no worker started
    bar = tqdm(total=len(trainings), desc="trainings", disable=quiet)
    if jobs == 1:
        for training in trainings:
            bar.set_postfix_str(_train_one(training, device, cache_dir), refresh=False)
            bar.update(1)
        bar.close()
        return
    with pool(jobs) as workers:
        futures = [workers.submit(_train_one, t, device, cache_dir) for t in trainings]
        try:
            for done in as_completed(futures):
                bar.set_postfix_str(done.result(), refresh=False)  # shown by the update
                bar.update(1)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        finally:
            bar.close()


def ensure(wanted: list[Training], jobs: int = 1, device: str = "auto",
           cache_dir: str | Path | None = None, quiet: bool = False) -> dict[Training, TrainResult]:
    """Every training of `wanted`, trained where the cache lacks it (`run_all`, `jobs` at a
    time) and then loaded, in the order given: the one route from a profile's plan to its
    trained models (the chapters, the depth sweep and `rankcollapse-train` all go through
    `run`, so a model trained by any of them is found by the others)."""
    run_all(wanted, jobs, device, cache_dir, quiet)
    return {t: run(t, device, cache_dir, quiet=True) for t in wanted}


def seed_argument(text: str) -> int:
    """argparse type: an integer seed in [0, 2**32)."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer; got {text!r}") from None
    if not SEED_RANGE[0] <= seed < SEED_RANGE[1]:
        raise argparse.ArgumentTypeError(f"seed must be in [0, 2**32); got {seed}")
    return seed


def jobs_argument(text: str) -> int:
    """argparse type: a number of worker processes, at least 1."""
    try:
        jobs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"jobs must be an integer; got {text!r}") from None
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"jobs must be at least 1; got {jobs}")
    return jobs


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="rankcollapse-train",
                                  description="Train exactly one model of a profile into the "
                                              "shared model cache, or list them all.")
    cli.add_argument("--profile", choices=list(PROFILES), default="ci")
    cli.add_argument("--list", action="store_true",
                     help="print one command line per training the profile needs, and exit")
    cli.add_argument("--all", action="store_true",
                     help="run every training the profile needs (the missing ones)")
    cli.add_argument("--jobs", type=jobs_argument, default=1,
                     help="with --all: trainings at once, sharing the device (default 1)")
    cli.add_argument("--task", help="a task of the profile, e.g. mnist")
    cli.add_argument("--normalization", choices=NORMALIZATIONS)
    cli.add_argument("--seed", type=seed_argument, help="training seed, in [0, 2**32)")
    cli.add_argument("--device", choices=DEVICES, default="auto")
    cli.add_argument("--variant", choices=VARIANTS, default="complete",
                     help="complete (chapter 5), or pure attention with or without LayerNorm "
                          "(chapter 6)")
    cli.add_argument("--depth", type=int, default=None,
                     help="a depth of the profile's depth sweep: its task's model at that "
                          "depth (chapter 6)")
    cli.add_argument("--cache-dir", type=Path, default=None,
                     help="model cache (default: $RANKCOLLAPSE_MODELS, else .cache/models)")
    return cli


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns 0, or 1 with one line saying why when a file cannot be written or
    read (a model cache that is not writable, say)."""
    cli = parser()
    args = cli.parse_args(argv)
    try:
        return _main(cli, args)
    except OSError as error:
        cache = models_dir(args.cache_dir)
        where = str(getattr(error, "filename", "") or "")
        hint = (f" (the model cache {cache}: choose a writable --cache-dir or "
                f"$RANKCOLLAPSE_MODELS)" if where.startswith(str(cache)) else "")
        print(f"rankcollapse-train: {error}{hint}", file=sys.stderr)
        return 1


def _main(cli: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.list:
        print("\n".join(t.command(args.device if args.device != "auto" else "cuda")
                        for t in planned(args.profile)))
        return 0
    if args.all:
        run_all(planned(args.profile), args.jobs, args.device, args.cache_dir)
        return 0
    if args.jobs != 1:
        cli.error("--jobs needs --all (one training runs in one process)")
    missing = [f"--{k}" for k in ("task", "normalization", "seed") if getattr(args, k) is None]
    if missing:
        cli.error(f"{', '.join(missing)} required (or --list, or --all)")
    tasks = list(get_profile(args.profile).tasks)
    if args.task not in tasks:
        cli.error(f"unknown task {args.task!r} for profile {args.profile}; valid: "
                  f"{', '.join(tasks)}")
    if args.depth is not None:
        try:
            sweep_task(get_profile(args.profile), args.depth)
        except ValueError as error:
            cli.error(str(error))
        if args.variant != "complete":
            cli.error("--depth trains the depth sweep's complete models; leave out --variant")
        if args.task != get_profile(args.profile).depth_sweep.task:
            cli.error(f"the depth sweep of profile {args.profile} trains task "
                      f"{get_profile(args.profile).depth_sweep.task!r}; got {args.task!r}")
    try:
        resolve_device(args.device)
    except ValueError as error:
        cli.error(str(error))
    result = run(Training(args.profile, args.task, args.normalization, args.seed, args.variant,
                          args.depth), args.device, args.cache_dir, quiet=True)
    state = "loaded from the cache" if result.from_cache else "trained"
    print(f"{args.task} {args.normalization} seed {args.seed}: {state}, test accuracy "
          f"{result.test_accuracy:.4f}, {result.steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
