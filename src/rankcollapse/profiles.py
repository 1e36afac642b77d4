"""Named execution profiles. Notebooks pick a name; every size lives here.

`ci`   : CPU, offline, the whole book in minutes on 2 cores (small sizes, fewer draws).
`full` : the paper's sizes (n = 128 tokens, d_model = 128, 4 heads, 24 layers,
         50 Sinkhorn iterations, 100 paths per depth); meant for one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .data import record


@dataclass(frozen=True)
class Task:
    """One trained-model experiment: a dataset and the model and schedule trained on it.
    The paper's training hyper-parameters are not known to us; these are this book's."""

    dataset: str  # a name of rankcollapse.data.DATASETS
    depth: int
    d_model: int
    n_heads: int
    d_ff: int
    epochs: int
    batch_size: int
    lr: float
    warmup_steps: int
    max_len: int = 128  # text: tokens, including <cls>
    patch: int = 4  # images: patch side in pixels
    image_size: int | None = None  # images: resize to this side (None: keep)
    train_limit: int | None = None  # use only the first N training samples
    test_limit: int | None = None  # and the first N test samples
    logit_init: float | None = None  # attention-logit scale at initialisation (EncoderConfig)
    seeds: tuple[int, ...] = ()  # this task's training seeds (empty: the profile's train_seeds)


@dataclass(frozen=True)
class LogGrid:
    """`points` values spaced evenly in log10, from 10**low to 10**high."""

    low: float
    high: float
    points: int

    @property
    def values(self) -> np.ndarray:
        return np.logspace(self.low, self.high, self.points)


@dataclass(frozen=True)
class PreciseStack:
    """A small pure-attention stack computed with `digits` significant digits (mpmath):
    `depth` layers, `n_tokens` tokens of width `n_tokens`."""

    depth: int
    n_tokens: int
    digits: int


@dataclass(frozen=True)
class DepthSweep:
    """The book's own experiment (chapter 6): the model of one task (`task`, a key of
    `Profile.tasks`: its data, width, heads and schedule) trained at each of `depths`, with
    `seeds` per normalization; `train_limit` and `epochs`, where given, replace the task's
    (the same for every depth)."""

    task: str
    depths: tuple[int, ...]
    seeds: tuple[int, ...]
    train_limit: int | None = None
    epochs: int | None = None

    def __post_init__(self):
        if len(set(self.depths)) < 2 or min(self.depths) < 2:
            raise ValueError(f"a depth sweep needs at least two depths of at least 2 layers "
                             f"(a second half of the layers); got {self.depths}")


@dataclass(frozen=True)
class Appendix:
    """Chapter 7's sizes: the Sinkhorn kernel timed on random logits of `shape` (batch, n, n),
    `repeats` interleaved rounds, at logit scale `kernel_scale`; its early stop checked at the
    logit `scales` (the gradient on the first `gradient_matrices` of them); one training step
    timed at the `step_shapes` (keys of `step_timing.TRAIN_SHAPES`: 'ci', 'paper'),
    `step_repeats` rounds, and at the trained models' own logits as often."""

    shape: tuple[int, int, int] = (256, 128, 128)
    repeats: int = 7
    kernel_scale: float = 2.0  # the timed logits' standard deviation
    scales: tuple[float, ...] = (1.0, 2.0, 3.0)
    gradient_matrices: int = 16
    step_shapes: tuple[str, ...] = ("ci",)
    step_repeats: int = 10


@dataclass(frozen=True)
class RankCollapseSettings:
    """Chapter 1's sizes (its random stacks take the profile's shape, inputs and draws)."""

    collapse_scales: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0)  # logit scales of the pure stack
    collapse_precise: PreciseStack = PreciseStack(depth=8, n_tokens=8, digits=1200)  # its copy
    layernorm_ranks: tuple[int, ...] = (1, 2, 4, 8)  # affine ranks built into the token sets
    layernorm_draws: int = 20  # token sets per rank
    # the rank-against-entropy contrast: a pure stack at the first logit scale, one with skip
    # connections at the second
    contrast_scales: tuple[float, float] = (0.1, 4.0)
    parts_scale: float = 1.0  # the logit scale of the block-parts figure's stacks


@dataclass(frozen=True)
class SinkhornSettings:
    """Chapter 2's sizes: steps of the convergence curves; float64 logit matrices per logit
    scale for the row error after `n_iter` iterations; the heat maps' one matrix (side,
    logit scale); random logit matrices per scale for the row entropies (C9); the logit
    scales of the pure stacks; the cost figure's token counts, batch and interleaved rounds."""

    convergence_steps: int = 120
    error_draws: int = 256
    heatmap: tuple[int, float] = (12, 1.5)
    entropy_draws: int = 128
    pure_scales: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    entropy_scales: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 5.0)  # row errors and C9
    error_quoted_scales: tuple[float, ...] = (2.0, 3.0, 5.0)  # row errors the prose quotes
    entropy_quoted_scale: float = 3.0  # the entropy difference the prose quotes
    cost_sizes: tuple[int, ...] = (16, 32, 64, 128)
    cost_batch: int = 64
    cost_repeats: int = 5


@dataclass(frozen=True)
class BoundSettings:
    """Chapter 3's sizes: logit sizes eps of the linearization check; input residual sizes s
    of one layer; starting sizes of the float64 stack and of its high-precision copy; the
    regime sweep's logit scales and input residual sizes; the random heads' logit scale."""

    linearization_eps: LogGrid = LogGrid(-4, 0, 13)
    layer_scales: LogGrid = LogGrid(-3, 0.5, 15)
    stack_starts: tuple[float, ...] = (0.01, 0.03, 0.1)
    bound_precise: PreciseStack = PreciseStack(depth=5, n_tokens=8, digits=400)
    bound_starts: tuple[float, ...] = (0.1, 0.3)
    regime_logit_stds: tuple[float, ...] = (0.09, 1.0, 9.0)
    regime_scales: LogGrid = LogGrid(-2, 0.7, 12)
    head_scale: float = 1.0


@dataclass(frozen=True)
class ControlSettings:
    """Chapter 4's sizes (its pools: the profile's `n_pools` and `paths_per_pool`): inputs
    per pool and the control's logit scale; the control sweep's token counts and logit
    scales; the correlations between consecutive layers' logits of test (a); the logit scales
    of test (b)'s random networks and of test (c)'s hidden states."""

    pool_batch: int = 8
    pool_scale: float = 1.0
    control_sizes: tuple[int, ...] = (16, 32, 64)
    control_scales: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    rhos: tuple[float, ...] = (0.0, 0.5, 0.9, 0.99)
    network_scales: tuple[float, ...] = (1.0, 4.0)
    hidden_scales: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True)
class OpenQuestionSettings:
    """Chapter 6's sizes: test inputs for the accuracies of B1, B3 and B4; B4's iteration
    counts at inference (0.5: one half-step, i.e. softmax) and its interleaved timing rounds
    per model and count (the table shows the mean over seeds of each model's median); C10's
    logit scales and independent random layers per (n, logit scale) of the random layers,
    test inputs per trained model, and the largest input (tokens x width) whose whole
    Jacobian checks the power iteration: it takes that many backward passes, so it stays
    seconds at every profile."""

    accuracy_inputs: int = 500
    iterations: tuple[float, ...] = (0.5, 1, 2, 3, 5, 10, 20, 50)
    iteration_rounds: int = 3
    lipschitz_scales: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    lipschitz_draws: int = 6
    lipschitz_inputs: int = 2
    check_entries: int = 2048


@dataclass(frozen=True)
class Profile:
    name: str
    n_tokens: int  # sequence length n
    d_model: int
    n_heads: int
    depth: int  # number of attention layers in the random-weight stacks
    n_iter: int  # full Sinkhorn iterations (one row + one column normalization each)
    n_samples: int  # random inputs per configuration
    weight_draws: int  # independent random weights per configuration (chapters 1, 2)
    n_paths: int  # sampled attention paths per depth (trained models, chapter 5)
    n_pools: int  # independent pools of random matrices or random networks (chapter 4)
    paths_per_pool: int  # sampled paths per depth in each pool (chapter 4)
    tasks: dict[str, Task] = field(default_factory=dict)  # chapter 5: role -> task
    train_seeds: tuple[int, ...] = (0,)  # one model per seed and normalization
    n_eval: int = 256  # test inputs analysed per model in chapter 5
    scratch_tasks: tuple[str, ...] = ()  # chapter 6: tasks whose models are also trained pure
    scratch_seeds: tuple[int, ...] = (0,)  # chapter 6: the seeds trained pure (of train_seeds)
    train_jobs: int = 1  # trainings run at once on the device (`training_plan.run_all`)
    depth_sweep: DepthSweep | None = None  # chapter 6: one task trained at several depths
    ch1: RankCollapseSettings = RankCollapseSettings()  # chapter 1's own sizes
    ch2: SinkhornSettings = SinkhornSettings()  # chapter 2's
    ch3: BoundSettings = BoundSettings()  # chapter 3's
    ch4: ControlSettings = ControlSettings()  # chapter 4's
    ch6: OpenQuestionSettings = OpenQuestionSettings()  # chapter 6's
    # Chapter 7. What is timed, at which sizes, how often.
    appendix: Appendix = Appendix()

    def seeds_of(self, role: str) -> tuple[int, ...]:
        """The training seeds of the task `role` (one model per seed and normalization): its
        own, else the profile's `train_seeds`."""
        return self.tasks[role].seeds or self.train_seeds

    def __post_init__(self):
        if self.depth_sweep is not None and self.depth_sweep.task not in self.tasks:
            raise ValueError(f"profile {self.name!r}: the depth sweep's task "
                             f"{self.depth_sweep.task!r} is not one of its tasks "
                             f"({', '.join(self.tasks) or 'none'}); name one of them, or set "
                             "depth_sweep=None")


# The retrieval task's models start at this attention-logit scale (this book's choice): in
# the regime where softmax and Sinkhorn differ (chapter 3), which PyTorch's default
# initialisation (about 0.3) does not reach on this task. Measured on the ci task: trained
# from it, every layer's logit scale stays between 2.7 and 3.1, at test accuracy 0.99.
SHARP_START = 3.0

# The paper's depth, 24 layers, at width 48 (4 heads), on two of its tasks: the MNIST stand-in
# on its first 2,000 training digits for 17 epochs, and the retrieval task (whose attention
# must find one token) on its 8,000 examples for 10. Measured on one thread at depth 24: MNIST
# for 30 epochs, 160 s (softmax) and 192 s (Sinkhorn), the held-out loss no longer falling
# from about epoch 18 (accuracy 0.87; with 8,000 digits, 0.95 but four times the time); for 20
# epochs (cosine decay to zero), flat over the last four. Retrieval for 10 epochs, 139 s and
# 172 s, accuracy flat from epoch 8 (0.99) but its held-out loss still falling by 5-7% over
# the last two epochs in 3 of 10 models: near 0.02-0.03 nats, a fall of about 0.002 nats,
# under the plateau criterion's absolute floor (chapter 5). Trained for 12 epochs, the 10
# models' held-out accuracy had reached 0.98-0.996 by epoch 8 and their held-out loss fell
# by at most 0.0013 nats over the last two (test accuracy 0.990-0.995): the two epochs more
# bought nothing the criterion or the accuracy sees, at a sixth of the task's training time.
# Seeds: C4a's detectable ratio (the registry's power statement) depends on the spread of the
# per-seed mean log ratio between trained models; measured on 5 MNIST seeds it was sd 0.31
# (0.27 with four times the test inputs: the spread lies between models, not inputs), so a
# detectable ratio of at most 1.3 needs 12 or more seeds there: 18 seeds gave sd 0.24 and
# 1.21, 16 gave sd 0.25 and 1.23, their first 12 sd 0.22 and 1.25, their first 10 sd 0.24
# and 1.31. MNIST trains 12 seeds (the fewest that detect 1.3; each seed's pair of models costs
# about a minute of the book on two cores) for 17 epochs: at 15 epochs, 1 of 36
# models missed chapter 5's plateau criterion (Sinkhorn seed 1, held-out loss 0.742, 0.687,
# 0.686 over its last three epochs: still settling, its training loss falling 10%) and the
# depth-6 Sinkhorn seed 4 of the sweep fell 5.0%; at 17 epochs the same models end flat
# (0.627, 0.626; 0.475, 0.474), as does Sinkhorn seed 0 (0.714 to 0.707), at accuracy 0.83
# instead of 0.81 for seed 1. The retrieval task's spread is 0.006, and 5 seeds detect 1.10. The text and Cats stand-ins at this depth would double chapter 5's time: `ci`
# leaves them to `full` (at depth 6 they had taken a fifth of it). The depth sweep below
# trains the MNIST model at 3, 6, 12 and 24 layers on the same data and schedule; its 24
# layers are chapter 5's models (seeds 0-4).
_CI_TASKS = {
    "mnist": Task("mnist10k", depth=24, d_model=48, n_heads=4, d_ff=96, epochs=17,
                  batch_size=128, lr=2e-3, warmup_steps=30, patch=7, train_limit=2000,
                  seeds=tuple(range(12))),
    "retrieval": Task("retrieval", depth=24, d_model=48, n_heads=4, d_ff=96, epochs=10,
                      batch_size=128, lr=2e-3, warmup_steps=30, max_len=17,
                      logit_init=SHARP_START),
}
_CI_SWEEP = DepthSweep("mnist", depths=(3, 6, 12, 24), seeds=tuple(range(5)))
# The paper's sizes: 24 layers, d_model 128, 4 heads, max length 128, MNIST 4x4 patches,
# Cats and Dogs 16x16 patches (images resized to 128 x 128: 64 patches + <cls>, our choice).
_FULL_TASKS = {
    "text": Task("ag_news", depth=24, d_model=128, n_heads=4, d_ff=256, epochs=5,
                 batch_size=128, lr=5e-4, warmup_steps=1000, max_len=128),
    "mnist": Task("mnist", depth=24, d_model=128, n_heads=4, d_ff=256, epochs=10,
                  batch_size=128, lr=5e-4, warmup_steps=1000, patch=4),
    "cats_dogs": Task("cats_dogs", depth=24, d_model=128, n_heads=4, d_ff=256, epochs=20,
                      batch_size=64, lr=3e-4, warmup_steps=1000, patch=16, image_size=128),
    "retrieval": Task("retrieval", depth=24, d_model=128, n_heads=4, d_ff=256, epochs=20,
                      batch_size=128, lr=5e-4, warmup_steps=100, max_len=17,
                      logit_init=SHARP_START),
}

PAPER_SHAPES = _FULL_TASKS  # the paper's model shapes per task (the `full` profile trains them)

PROFILES: dict[str, Profile] = {
    "ci": Profile("ci", n_tokens=32, d_model=32, n_heads=2, depth=12, n_iter=50,
                  n_samples=32, weight_draws=4, n_paths=100, n_pools=12,
                  paths_per_pool=25, tasks=_CI_TASKS, train_seeds=tuple(range(5)), n_eval=128,
                  scratch_tasks=("mnist",), scratch_seeds=(0, 1, 2), train_jobs=2,
                  depth_sweep=_CI_SWEEP,
                  # B4's forward passes timed once per model and number of iterations: the
                  # mean over 17 Sinkhorn models averages the noise (3 rounds took 24 s more)
                  ch6=OpenQuestionSettings(iteration_rounds=1)),
    "full": Profile("full", n_tokens=128, d_model=128, n_heads=4, depth=24, n_iter=50,
                    n_samples=128, weight_draws=4, n_paths=100, n_pools=16,
                    paths_per_pool=100, tasks=_FULL_TASKS, train_seeds=(0, 1, 2, 3, 4),
                    n_eval=512, scratch_tasks=("text", "mnist", "cats_dogs"),
                    scratch_seeds=(0, 1, 2, 3, 4), train_jobs=4,
                    ch1=RankCollapseSettings(layernorm_draws=100),
                    ch2=SinkhornSettings(entropy_draws=512),
                    ch4=ControlSettings(pool_batch=16, control_sizes=(64, 128, 256)),
                    ch6=OpenQuestionSettings(lipschitz_draws=16),
                    appendix=Appendix(step_shapes=("ci", "paper")),  # and the paper's shapes
                    # the depth sweep at the paper's width on MNIST: its 24 layers are chapter
                    # 5's models (seeds 0-4), trained once
                    depth_sweep=DepthSweep("mnist", depths=(3, 6, 12, 24),
                                           seeds=(0, 1, 2, 3, 4))),
}


# Every chapter's code path at the ci profile's shapes in a few minutes (tiny data, one epoch,
# few draws): a check that the book runs, whose numbers mean nothing.
PROFILES["smoke"] = replace(
    PROFILES["ci"], name="smoke", n_samples=8, n_paths=10, n_pools=4, paths_per_pool=5,
    ch1=replace(PROFILES["ci"].ch1, layernorm_draws=4),
    ch2=replace(PROFILES["ci"].ch2, entropy_draws=32),
    ch6=replace(PROFILES["ci"].ch6, lipschitz_draws=2),
    n_eval=16, train_seeds=(0, 1, 2), scratch_seeds=(0, 1),
    tasks={role: replace(task, epochs=1, train_limit=256, seeds=())
           for role, task in _CI_TASKS.items()},
    depth_sweep=DepthSweep("mnist", depths=(2, 4), seeds=(0, 1, 2)))


# The `full` profile's every path (its tasks, model shapes, depths, token counts, seeds and
# chapter structure) at tiny data, one epoch and few draws, on the offline stand-ins of its
# datasets (same classes and image sizes), so that the CPU walks what the first GPU run of
# `full` will: a check that the book runs, whose numbers mean nothing.
PROFILES["full-smoke"] = replace(
    PROFILES["full"], name="full-smoke", n_samples=4, weight_draws=2, n_paths=6, n_pools=3,
    ch1=replace(PROFILES["full"].ch1, layernorm_draws=4),
    ch2=replace(PROFILES["full"].ch2, entropy_draws=16),
    ch4=replace(PROFILES["full"].ch4, pool_batch=4),
    ch6=replace(PROFILES["full"].ch6, lipschitz_draws=2, iteration_rounds=1),
    paths_per_pool=4, n_eval=8, train_seeds=(0, 1, 2), scratch_seeds=(0, 1), train_jobs=2,
    # the appendix's code at small sizes; a step at the paper's shapes (the same code as at
    # the ci shapes) took 256 s on 2 busy cores even at 2 rounds: it is left to `full`. One
    # timed round after the warm-up walks every path (the two step tables took 340 s of
    # this profile's 19 minutes at 2 rounds, on the torch engine).
    appendix=replace(PROFILES["full"].appendix, shape=(16, 128, 128), repeats=2,
                     step_shapes=("ci",), step_repeats=1),
    # the sweep's every path at its shallowest and deepest depth (its middle depths take
    # the same code: 12 trainings fewer)
    depth_sweep=replace(PROFILES["full"].depth_sweep, depths=(3, 24), seeds=(0, 1, 2)),
    tasks={role: replace(task, dataset=record(task.dataset).stand_in or task.dataset,
                         epochs=1, train_limit=32, test_limit=16, batch_size=16,
                         warmup_steps=1)
           for role, task in _FULL_TASKS.items()})


def sweep_task(settings: Profile, depth: int) -> Task:
    """The depth sweep's model of `depth` (a ValueError where the profile has no sweep or the
    depth is not one of its depths): the sweep's task at that depth, with the sweep's
    training size and epochs where it sets them."""
    sweep = settings.depth_sweep
    if sweep is None or depth not in sweep.depths:
        raise ValueError(f"profile {settings.name!r} sweeps "
                         + (f"the depths {', '.join(map(str, sweep.depths))}" if sweep else
                            "no depths") + f"; got depth {depth}")
    task = settings.tasks[sweep.task]
    return replace(task, depth=depth, train_limit=sweep.train_limit or task.train_limit,
                   epochs=sweep.epochs or task.epochs)


def get_profile(name: str) -> Profile:
    """The profile called `name`; a ValueError lists the valid names otherwise."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; valid profiles: {', '.join(PROFILES)}")
    return PROFILES[name]
