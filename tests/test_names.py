"""The reader's words: tables show display names, never the library's keys."""

import pandas as pd
import pytest

from rankcollapse.data import DATASETS
from rankcollapse.names import DATASETS as DATASET_NAMES, dataset, quoted, readable


def test_every_dataset_has_a_display_name():
    assert set(DATASETS) <= set(DATASET_NAMES)
    with pytest.raises(KeyError, match="names.DATASETS"):
        dataset("no_such_set")


def test_readable_renames_keys_in_columns_index_and_headers():
    table = pd.DataFrame({"task": ["cats_dogs", "text"], "normalization": ["sinkhorn", "softmax"],
                          "logit_std": [1.0, 2.0]})
    shown = readable(table, {"cats_dogs": "Cats and Dogs", "text": "text classification"})
    assert list(shown.columns) == ["task", "normalization", "logit scale σ"]
    assert list(shown["task"]) == ["Cats and Dogs", "text classification"]
    assert list(shown["normalization"]) == ["Sinkhorn", "softmax"]
    wide = table.pivot(index="logit_std", columns="normalization", values="task")
    shown = readable(wide)
    assert list(shown.columns) == ["Sinkhorn", "softmax"] and shown.index.name == "logit scale σ"
    indexed = readable(table.set_index(["task", "normalization"]), {"text": "text classification"})
    assert ("text classification", "softmax") in indexed.index
    assert table["normalization"].tolist() == ["sinkhorn", "softmax"]  # the input is unchanged


def test_quoted_gives_two_significant_digits():
    assert quoted(2.2204e-16) == "2.2×10⁻¹⁶" and quoted(0.0123) == "0.012" and quoted(1e-7) == "10⁻⁷"
