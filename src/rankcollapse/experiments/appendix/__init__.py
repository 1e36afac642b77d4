"""Chapter 7, the appendix on the Sinkhorn implementation's speed and memory: `run(settings,
device, seed)` times and checks everything the chapter shows (`Performance`). The timings
themselves are `timing` (the kernel) and `step_timing` (a training step), which the
benchmarks share."""

from .chapter import Performance, run

__all__ = ["Performance", "run"]
