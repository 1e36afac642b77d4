"""The reader's words for the library's keys: normalizations, table headers and the lines
figures draw beside the data. Figures, tables, prose and the ledger all name things here, so
that a key (`sinkhorn`, `logit_std`) never reaches a page.
"""

from __future__ import annotations

import math

import pandas as pd

from .stats import significant

DISPLAY = {"softmax": "softmax", "sinkhorn": "Sinkhorn"}  # how legends and tables name them
LINE_LABELS = {"chance": "chance", "baseline": "linear baseline"}  # lines drawn beside curves
# Datasets as the book names them (the registry's keys are file names).
DATASETS = {"ag_news": "AG's News", "mnist": "MNIST", "cats_dogs": "Cats and Dogs",
            "wordnet4": "WordNet noun glosses", "mnist10k": "10,000 MNIST digits",
            "fashion_mnist": "Fashion-MNIST shirts", "retrieval": "key-value retrieval"}
# The chapters' tasks by role (a profile's `tasks` keys).
TASKS = {"text": "text classification", "mnist": "MNIST digits", "cats_dogs": "Cats and Dogs",
         "retrieval": "key-value retrieval"}
HEADERS = {"normalization": "normalization", "logit_std": "logit scale σ", "task": "task",
           "trained": "trained with", "n_tokens": "tokens n", "n": "tokens n",
           "depth": "depth", "layer": "layer", "seed": "seed", "variant": "model"}


# Rounding floors, marginal errors and timing errors are quoted in prose to this many
# significant digits: their order of magnitude is the message, not their third digit.
QUOTED_DIGITS = 2


def quoted(x: float) -> str:
    """A floor or an error as prose quotes it: `QUOTED_DIGITS` significant digits."""
    return significant(x, QUOTED_DIGITS)


def math_number(x: float) -> str:
    """A threshold as a figure's label writes it: '$10^{-6}$' for a power of ten, else as
    `:g` formats it."""
    exponent = math.log10(x) if x > 0 else math.nan
    return f"$10^{{{exponent:.0f}}}$" if exponent == round(exponent) else f"{x:g}"


def joined(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def bullets(items: dict[str, str]) -> str:
    """A Markdown list, one '- label: sentence' line per item, for a `{glue:md}` block."""
    return "\n".join(f"- {label}: {sentence}" for label, sentence in items.items())


def display(value) -> str:
    """A value as a reader sees it: 'Sinkhorn' capitalised, other values as they are."""
    return DISPLAY.get(value, value) if isinstance(value, str) else value


def dataset(name: str) -> str:
    """A dataset's name as the book says it (`DATASETS`); an unknown key is an error."""
    if name not in DATASETS:
        raise KeyError(f"no display name for dataset {name!r}; add it to names.DATASETS")
    return DATASETS[name]


def readable(table: pd.DataFrame, titles: dict[str, str] | None = None) -> pd.DataFrame:
    """`table` with the reader's headers, normalizations by their display names and, where
    `titles` is given, tasks by their titles (columns and index levels alike)."""
    values = {**DISPLAY, **(titles or {})}

    def word(v):
        return values.get(v, v) if isinstance(v, str) else v

    out = table.copy()
    for column in out.columns:
        if not pd.api.types.is_numeric_dtype(out[column]):
            out[column] = out[column].map(word)
    if not isinstance(out.index, pd.RangeIndex):
        out.index = out.index.map(lambda v: tuple(map(word, v)) if isinstance(v, tuple)
                                  else word(v))
        out.index.names = [HEADERS.get(n, n) for n in out.index.names]
    out.columns.names = [HEADERS.get(n, n) for n in out.columns.names]
    return out.rename(columns=lambda c: HEADERS.get(c, word(c)) if isinstance(c, str) else c)
