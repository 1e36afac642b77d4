"""What a task trains: its data (the real splits, or random examples of its shape for smoke
tests and timing) and the training configuration of one model of it, complete or trained as
pure attention (`SCRATCH`, chapter 6's B1).

Below the chapters: `training_plan` (the command that trains one model) and `timing` use it as
the chapter modules do, so that no library module imports a chapter's.
"""

from __future__ import annotations

import torch

from .data import VOCAB_SIZE, Dataset, Tokenizer, load
from .data import record as dataset_record
from .models import EncoderConfig, ModelConfig, Switches
from .profiles import Task
from .training import TrainConfig

# Trained that way from the first step (B1). LayerNorm on and off; the head's final
# LayerNorm stays (see `models.Classifier`).
SCRATCH = {"pure attention, LayerNorm": Switches(skip=False, ffn=False),
           "pure attention, no LayerNorm": Switches(skip=False, ffn=False, layernorm=False)}
# The command line's names for them (`rankcollapse-train --variant`).
PURE = {"pure-ln": "pure attention, LayerNorm", "pure-no-ln": "pure attention, no LayerNorm"}


def load_task(task: Task, root=None) -> tuple[Dataset, Dataset]:
    """Train and test splits of the task's dataset (text shares the training vocabulary),
    limited to the task's `train_limit` and `test_limit` first examples."""
    options = dict(max_len=task.max_len, image_size=task.image_size)
    train_data = load(task.dataset, "train", root, limit=task.train_limit, **options)
    test_data = load(task.dataset, "test", root, tokenizer=train_data.vocab, limit=task.test_limit,
                     **options)
    return train_data, test_data


def synthetic_data(task: Task, n: int, seed: int = 0) -> Dataset:
    """`n` random examples shaped like `task`'s dataset (token ids and padding, or images of
    its channels and size): for smoke tests and timing, never for results."""
    rec = dataset_record(task.dataset)
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(len(rec.classes), (n,), generator=g)
    if rec.kind == "text":
        vocab = Tokenizer(list(Tokenizer.SPECIALS) + [f"w{i}" for i in range(VOCAB_SIZE - 3)])
        ids = torch.randint(3, VOCAB_SIZE, (n, task.max_len), generator=g)
        lengths = torch.randint(1, task.max_len + 1, (n, 1), generator=g)
        mask = torch.arange(task.max_len)[None, :] < lengths
        ids = ids.masked_fill(~mask, Tokenizer.PAD)
        ids[:, 0] = Tokenizer.CLS
        return Dataset(rec.name, "train", ids, y, mask, list(rec.classes), "text",
                       "synthetic (random token ids)", vocab)
    side = task.image_size or rec.side
    x = torch.rand(n, rec.channels, side, side, generator=g)
    return Dataset(rec.name, "train", x, y, None, list(rec.classes), "image",
                   "synthetic (random pixels)")


def train_config(task: Task, data: Dataset, normalization: str, seed: int,
                 n_iter: int, switches: Switches | None = None) -> TrainConfig:
    """The `TrainConfig` of one model of `task` (the model shape follows the data), trained
    complete or, with `switches`, with parts of every block switched off during training."""
    encoder = EncoderConfig(d_model=task.d_model, n_heads=task.n_heads, depth=task.depth,
                            d_ff=task.d_ff, normalization=normalization, n_iter=n_iter,
                            switches=switches or Switches(), logit_init=task.logit_init)
    if data.kind == "text":
        model = ModelConfig("text", len(data.classes), encoder,
                            vocab_size=len(data.vocab), max_len=task.max_len)
    else:
        channels, side = data.x.shape[1], data.x.shape[-1]
        model = ModelConfig("image", len(data.classes), encoder, image_size=side,
                            patch=task.patch, channels=channels)
    return TrainConfig(model=model, dataset=data.name, epochs=task.epochs,
                       batch_size=task.batch_size, lr=task.lr, warmup_steps=task.warmup_steps,
                       seed=seed, extra={"train_size": len(data), "source": data.source})
