"""Key-value retrieval: a synthetic task that needs one token to find another.

Each example is a query token followed by `KEYS` items in random order. An item is one
token standing for a (key, value) pair; every key occurs exactly once, with a value drawn
uniformly from `VALUES`. The label is the value of the item whose key is the query's. The
query sits where a text's `<cls>` token sits, so its final state is the one the classifier
reads: it must attend to the single matching item among `KEYS`, and no other token tells it
the answer alone: it lies in the pairing of the query with its item, which a linear model
of the bag of tokens cannot form (about a quarter of right answers, against 1/8 for chance). Generated from a fixed seed per split, the same on every machine. `data.load("retrieval", split)` returns it as a dataset.
"""

from __future__ import annotations

import torch

KEYS = 16  # items per example (every key once)
VALUES = 8  # classes
SIZES = {"train": 8000, "test": 2000}
_SEEDS = {"train": 1, "test": 2}


def words() -> list[str]:
    """The tokens after the special ones: one query token per key, then one per
    (key, value) item."""
    return [f"q{k}" for k in range(KEYS)] + [f"k{k}v{v}" for k in range(KEYS)
                                             for v in range(VALUES)]


def generate(split: str, first: int, limit: int | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """One split's token ids `(N, 1 + KEYS)` (no padding; ids from `first` on are `words()`)
    and labels in `range(VALUES)`; the first `limit` examples when given."""
    g = torch.Generator().manual_seed(_SEEDS[split])
    keys = torch.argsort(torch.rand(SIZES[split], KEYS, generator=g), 1)[:limit]
    values = torch.randint(VALUES, (SIZES[split], KEYS), generator=g)[:limit]
    query = torch.randint(KEYS, (SIZES[split],), generator=g)[:limit]
    items = first + KEYS + keys * VALUES + values
    x = torch.cat([(first + query)[:, None], items], 1)
    y = values.gather(1, (keys == query[:, None]).int().argmax(1, keepdim=True))[:, 0]
    return x, y
