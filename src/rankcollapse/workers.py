"""Work shared out over worker processes on one machine: the trainings of a profile
(`training_plan.run_all`) and independent measurements of trained models (chapter 6).

Workers are spawned, so that CUDA and the thread pools start fresh in each, and each gets
`threads_per_job` CPU threads: on a small machine, two processes of one thread each keep
both cores busy where one process of two threads leaves one mostly idle on small tensors.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import torch


def threads_per_job(jobs: int) -> int:
    """CPU threads for each of `jobs` worker processes: the cores shared out, at least one."""
    return max(1, (os.cpu_count() or 1) // jobs)


def start_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def pool(jobs: int) -> ProcessPoolExecutor:
    """`jobs` spawned worker processes with `threads_per_job(jobs)` threads each."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1; got {jobs}")
    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=start_worker, initargs=(threads_per_job(jobs),))


def _call(payload: bytes) -> bytes:
    function, arguments = pickle.loads(payload)
    return pickle.dumps(function(*arguments))


def side_by_side(calls: dict[str, tuple[Callable, tuple]], jobs: int) -> dict[str, object]:
    """Each call `name -> (function, arguments)` run once and its result returned under its
    name: `jobs` at a time in worker processes, started in the order given (longest first
    keeps the workers evenly busy), or one after another in this process where `jobs` is 1.
    The functions must be importable and their arguments picklable; the first error is
    raised here. Arguments and results travel as plain pickles (a tensor's bytes): the
    multiprocessing pickler would share every tensor's storage through a file descriptor of
    its own, and a few dozen models exceed the limit on open files."""
    if jobs == 1:
        return {name: function(*arguments) for name, (function, arguments) in calls.items()}
    with pool(jobs) as workers:
        futures = {name: workers.submit(_call, pickle.dumps(call))
                   for name, call in calls.items()}
        try:
            return {name: pickle.loads(future.result()) for name, future in futures.items()}
        except BaseException:
            for future in futures.values():
                future.cancel()
            raise
