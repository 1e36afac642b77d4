"""A linear baseline on the same data as the trained Transformers.

Images: multinomial logistic regression on the raw pixels. Text: the same on the bag of
words (the mean of one learned vector of class scores per token id over the real tokens), so
that it sees which tokens occur but not where or next to which. What a Transformer gains over
it is what attention and depth add; on a task that needs one token to find another the
baseline stays far below.
"""

from __future__ import annotations

import torch
from torch import nn

from .data import Dataset


class Linear(nn.Module):
    """Class scores linear in the pixels, or in the token counts divided by the length."""

    def __init__(self, data: Dataset):
        super().__init__()
        n_classes = len(data.classes)
        self.text = data.kind == "text"
        if self.text:
            self.scores = nn.Embedding(len(data.vocab), n_classes)
            nn.init.zeros_(self.scores.weight)
            self.bias = nn.Parameter(torch.zeros(n_classes))
        else:
            self.scores = nn.Linear(data.x[0].numel(), n_classes)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if not self.text:
            return self.scores(x.flatten(1))
        keep = torch.ones_like(x, dtype=torch.bool) if mask is None else mask
        summed = (self.scores(x) * keep[..., None]).sum(1)
        return summed / keep.sum(1, keepdim=True).clamp_min(1) + self.bias


def linear_baseline(train: Dataset, test: Dataset, epochs: int = 30, lr: float = 0.01,
                    batch_size: int = 256, seed: int = 0) -> float:
    """Test accuracy (in [0, 1]) of `Linear` trained with AdamW (weight decay 1e-4) for
    `epochs` passes over `train` in a seeded order; deterministic on the CPU."""
    if len(train) == 0 or len(test) == 0:
        raise ValueError(f"the linear baseline of {train.name!r} needs training and test "
                         f"examples; got {len(train)} and {len(test)}")
    torch.manual_seed(seed)
    model = Linear(train)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for index in torch.randperm(len(train), generator=generator).split(batch_size):
            mask = None if train.mask is None else train.mask[index]
            loss = nn.functional.cross_entropy(model(train.x[index], mask), train.y[index])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        predicted = model(test.x, test.mask).argmax(-1)
    return float((predicted == test.y).double().mean())
