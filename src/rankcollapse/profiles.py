"""Named execution profiles. Notebooks pick a name; every size lives here.

`ci`   : CPU, offline, the whole book in minutes on 2 cores (small sizes, fewer draws).
`full` : the paper's sizes (n = 128 tokens, d_model = 128, 4 heads, 24 layers,
         50 Sinkhorn iterations, 100 paths per depth); meant for one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
    lipschitz_draws: int = 6  # chapter 6: independent random layers per (n, logit scale)


# 12 layers (early and late layers differ), 3 seeds; the text and MNIST stand-ins train on
# their first 5000 and 4000 examples (Fashion-MNIST for 4 epochs), so that the 18 trainings of
# chapter 5 take about 7 minutes on 2 cores and the 12 of chapter 6 about 2.
_CI_TASKS = {
    "text": Task("wordnet4", depth=12, d_model=64, n_heads=4, d_ff=128, epochs=3,
                 batch_size=128, lr=1e-3, warmup_steps=30, max_len=32, train_limit=5000),
    "mnist": Task("mnist10k", depth=12, d_model=64, n_heads=4, d_ff=128, epochs=4,
                  batch_size=128, lr=1e-3, warmup_steps=30, patch=7, train_limit=4000),
    "cats_dogs": Task("fashion_mnist", depth=12, d_model=64, n_heads=4, d_ff=128, epochs=4,
                      batch_size=128, lr=1e-3, warmup_steps=30, patch=7),
}
# The paper's sizes: 24 layers, d_model 128, 4 heads, max length 128, MNIST 4x4 patches,
# Cats and Dogs 16x16 patches (images resized to 128 x 128: 64 patches + <cls>, our choice).
_FULL_TASKS = {
    "text": Task("ag_news", depth=24, d_model=128, n_heads=4, d_ff=256, epochs=5,
                 batch_size=128, lr=5e-4, warmup_steps=1000, max_len=128),
    "mnist": Task("mnist", depth=24, d_model=128, n_heads=4, d_ff=256, epochs=10,
                  batch_size=128, lr=5e-4, warmup_steps=1000, patch=4),
    "cats_dogs": Task("cats_dogs", depth=24, d_model=128, n_heads=4, d_ff=256, epochs=20,
                      batch_size=64, lr=3e-4, warmup_steps=1000, patch=16, image_size=128),
}

PROFILES: dict[str, Profile] = {
    "ci": Profile("ci", n_tokens=32, d_model=32, n_heads=2, depth=12, n_iter=50,
                  n_samples=32, weight_draws=4, n_paths=100, n_pools=12,
                  paths_per_pool=25, tasks=_CI_TASKS, train_seeds=(0, 1, 2), n_eval=128,
                  scratch_tasks=("cats_dogs",), lipschitz_draws=6),
    "full": Profile("full", n_tokens=128, d_model=128, n_heads=4, depth=24, n_iter=50,
                    n_samples=128, weight_draws=4, n_paths=100, n_pools=16,
                    paths_per_pool=100, tasks=_FULL_TASKS, train_seeds=(0, 1, 2),
                    n_eval=512, scratch_tasks=("text", "mnist", "cats_dogs"),
                    lipschitz_draws=16),
}


def get_profile(name: str) -> Profile:
    """The profile called `name`; a ValueError lists the valid names otherwise."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; valid profiles: {', '.join(PROFILES)}")
    return PROFILES[name]
