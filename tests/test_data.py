"""rankcollapse.data: real loaders on small fixtures in the real formats (written here into
tmp_path), the committed stand-ins, the tokenizer, and the errors. Nothing touches the network:
every test that could download replaces `data.downloads._fetch`."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import re
import shutil
import struct
import urllib.error
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from rankcollapse import data
from rankcollapse.data import downloads
from rankcollapse.data import text as text_module
from rankcollapse.data import ChecksumError, DataError, Tokenizer, UnsafeArchiveError
from rankcollapse.files import write_verified


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any download attempt fails the test, unless the test installs its own `_fetch`."""
    def refuse(url, dest):
        raise AssertionError(f"a test tried to download {url}")
    monkeypatch.setattr(downloads, "_fetch", refuse)


def install(monkeypatch, root: Path, key: str, payload: bytes) -> Path:
    """Put `payload` at `<root>/<key>` as if downloaded, and make it the expected file."""
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    set_digest(monkeypatch, key, hashlib.sha256(payload).hexdigest())
    return path


def set_digest(monkeypatch, key: str, digest: str) -> None:
    """Make `digest` the expected sha256 of the file `key` ("<dataset>/<file>")."""
    dataset, file = key.split("/", 1)
    monkeypatch.setitem(data.DATASETS[dataset].files, file, digest)


# ----------------------------------------------------------------------------- fixtures


def ag_csv(rows: list[tuple[int, str, str]]) -> bytes:
    """An AG's News CSV: every field quoted, as in the real files."""
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8")


AG_TRAIN = [
    (1, "Talks resume", 'Leaders met in Geneva, "again", to talk peace.'),
    (2, "Cup final", "The home team won 3-1, after extra time."),
    (3, "Stocks fall", "Shares slid as oil rose; investors, worried, sold."),
    (4, "New chip", "A faster processor, the maker said, ships soon."),
    (1, "Election", "Voters went to the polls again in a tense, close race."),
    (2, "Tennis", "She won the race for the open in straight sets."),
    (3, "Merger", "Two banks agreed to merge, creating a giant."),
    (4, "Space probe", "The probe ships images of the moon."),
]
AG_TEST = [(2, "Marathon", "He won the race, again."), (4, "Software", "A zebra update ships.")]


def idx_gz(array: np.ndarray, magic: int) -> bytes:
    """A gzip IDX file: big-endian magic, big-endian dims, uint8 data."""
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return gzip.compress(header + array.astype(np.uint8).tobytes())


def digits(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` 28x28 images whose pixels all equal 20 * label, so image/label pairing is checkable."""
    labels = np.random.default_rng(seed).integers(0, 10, n).astype(np.uint8)
    return np.repeat(labels * 20, 28 * 28).reshape(n, 28, 28), labels


def jpeg(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (24, 20), color).save(out, "JPEG")
    return out.getvalue()


CAT, DOG = (220, 30, 30), (30, 30, 220)
PET_CORRUPT = {"PetImages/Cat/666.jpg": b"",  # empty, as in the real archive
               "PetImages/Dog/11702.jpg": jpeg(DOG)[:200],  # truncated
               "PetImages/Cat/note.jpg": b"not an image at all"}


def pet_zip() -> bytes:
    """A small PetImages archive: 20 cats (red), 20 dogs (blue), three undecodable .jpg files
    and a Thumbs.db, as the real one holds."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for i in range(20):
            archive.writestr(f"PetImages/Cat/{i}.jpg", jpeg(CAT))
            archive.writestr(f"PetImages/Dog/{i}.jpg", jpeg(DOG))
        for name, payload in PET_CORRUPT.items():
            archive.writestr(name, payload)
        archive.writestr("PetImages/Dog/Thumbs.db", b"\x00" * 64)
        archive.writestr("readme[1].txt", "PetImages")
    return out.getvalue()


def zip_with(member: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("PetImages/Cat/0.jpg", jpeg(CAT))
        archive.writestr(member, "pwned")
    return out.getvalue()


# ----------------------------------------------------------------------------- AG's News


@pytest.fixture
def ag_root(tmp_path, monkeypatch) -> Path:
    install(monkeypatch, tmp_path, "ag_news/train.csv", ag_csv(AG_TRAIN))
    install(monkeypatch, tmp_path, "ag_news/test.csv", ag_csv(AG_TEST))
    monkeypatch.setattr(text_module, "AG_NEWS_ROWS", {"train": len(AG_TRAIN), "test": len(AG_TEST)})
    return tmp_path


def test_ag_news_loads_labels_text_and_shares_the_training_vocabulary(ag_root):
    train = data.load("ag_news", "train", ag_root, max_len=16)
    test = data.load("ag_news", "test", ag_root, max_len=16)
    assert train.kind == "text" and train.classes == ["World", "Sports", "Business", "Sci/Tech"]
    assert train.x.shape == (8, 16) and train.x.dtype == torch.int64
    assert train.mask.shape == (8, 16) and train.mask.dtype == torch.bool
    assert sorted(train.y.tolist()) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert test.vocab.itos == train.vocab.itos  # built from the training split
    # Quoted commas stay inside their field; title and description are joined.
    decoded = {test.vocab.decode(row): label for row, label in zip(test.x, test.y.tolist())}
    # Words seen only once in training, or only in the test split, are <unk>.
    assert decoded == {"<cls> <unk> <unk> won the race again": 1,
                       "<cls> <unk> a <unk> <unk> ships": 3}
    assert len(data.load("ag_news", "train", ag_root, limit=3)) == 3


def test_ag_news_row_count_and_format_are_checked(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(ag_csv(AG_TRAIN))
    with pytest.raises(DataError, match="8 rows, expected 120000"):
        data.read_ag_news_csv(path, expected_rows=120_000)
    path.write_bytes(ag_csv([(5, "t", "d")]))
    with pytest.raises(DataError, match="row 1"):
        data.read_ag_news_csv(path)


# ----------------------------------------------------------------------------- MNIST


def install_mnist(monkeypatch, root: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    sets = {"train": digits(12, seed=1), "test": digits(5, seed=2)}
    for split, (images, labels) in sets.items():
        images_file, labels_file = data.MNIST_FILES[split]
        install(monkeypatch, root, f"mnist/{images_file}", idx_gz(images, data.IDX_IMAGES))
        install(monkeypatch, root, f"mnist/{labels_file}", idx_gz(labels, data.IDX_LABELS))
    return sets


def test_mnist_loads_idx_files(tmp_path, monkeypatch):
    sets = install_mnist(monkeypatch, tmp_path)
    for split, (images, labels) in sets.items():
        ds = data.load("mnist", split, tmp_path)
        assert ds.kind == "image" and ds.mask is None and len(ds.classes) == 10
        assert ds.x.shape == (len(labels), 1, 28, 28) and ds.x.dtype == torch.float32
        assert 0.0 <= ds.x.min() and ds.x.max() <= 1.0
        assert sorted(ds.y.tolist()) == sorted(labels.tolist())
        pixels = (ds.x * 255).round().to(torch.uint8)
        assert torch.equal(pixels[:, 0, 0, 0], ds.y.to(torch.uint8) * 20)  # pairs kept
    resized = data.load("mnist", "test", tmp_path, image_size=14, limit=2)
    assert resized.x.shape == (2, 1, 14, 14)


def test_read_idx_rejects_wrong_magic_and_truncation(tmp_path):
    images, labels = digits(3, seed=0)
    path = tmp_path / "f.gz"
    path.write_bytes(idx_gz(labels, data.IDX_LABELS))
    with pytest.raises(DataError, match="magic number 2049, expected 2051"):
        data.read_idx(path, data.IDX_IMAGES)
    path.write_bytes(gzip.compress(gzip.decompress(idx_gz(images, data.IDX_IMAGES))[:-10]))
    with pytest.raises(DataError, match="truncated"):
        data.read_idx(path, data.IDX_IMAGES)


def test_download_goes_through_fetch_and_is_verified(tmp_path, monkeypatch):
    images, _ = digits(4, seed=3)
    payload = idx_gz(images, data.IDX_IMAGES)
    key = "mnist/t10k-images-idx3-ubyte.gz"
    set_digest(monkeypatch, key, hashlib.sha256(payload).hexdigest())
    calls = []

    def fetch(url, dest):
        calls.append(url)
        dest.write_bytes(payload)
    monkeypatch.setattr(downloads, "_fetch", fetch)
    path = downloads._ensure_file("mnist", "t10k-images-idx3-ubyte.gz", tmp_path)
    assert calls == [data.DATASETS["mnist"].urls["t10k-images-idx3-ubyte.gz"]]
    assert path == tmp_path / key
    assert path.read_bytes() == payload and not list(path.parent.glob("*.part"))
    downloads._ensure_file("mnist", "t10k-images-idx3-ubyte.gz", tmp_path)  # valid: no download
    assert len(calls) == 1


def test_checksum_mismatch_names_file_and_digests_and_sets_file_aside(tmp_path, monkeypatch):
    install_mnist(monkeypatch, tmp_path)
    key = "mnist/train-labels-idx1-ubyte.gz"
    path = tmp_path / key
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    set_digest(monkeypatch, key, "0" * 64)
    with pytest.raises(ChecksumError) as err:
        data.load("mnist", "train", tmp_path)
    assert str(path) in str(err.value) and "0" * 64 in str(err.value) and actual in str(err.value)
    assert not path.exists() and path.with_name(path.name + ".corrupt").exists()


@pytest.mark.parametrize("error, words", [
    (urllib.error.URLError("Temporary failure in name resolution"),
     ("`full` profile", "`ci` profile", "'wordnet4'", "name resolution")),
    # a bad URL or a malformed Content-Length: it used to escape without advice, .part left
    (ValueError("invalid literal for int() with base 10: 'lots'"),
     ("could not be downloaded", "invalid literal", "`ci` profile")),
], ids=["network down", "ValueError"])
def test_a_failed_download_explains_profiles_and_manual_path(tmp_path, monkeypatch, error,
                                                             words):
    def failing(url, dest):
        dest.write_bytes(b"partial")
        raise error
    monkeypatch.setattr(downloads, "_fetch", failing)
    with pytest.raises(DataError) as err:
        data.load("ag_news", "train", tmp_path)
    message = str(err.value)
    path = tmp_path / "ag_news" / "train.csv"
    for part in (*words, str(path), data.DATASETS["ag_news"].urls["train.csv"]):
        assert part in message
    assert not path.exists() and not path.with_name("train.csv.part").exists()


# ----------------------------------------------------------------------------- Cats and Dogs


def test_cats_dogs_extracts_decodes_splits_and_counts_corrupt_files(tmp_path, monkeypatch):
    install(monkeypatch, tmp_path, f"cats_dogs/{data.CATS_DOGS_ZIP}", pet_zip())
    names = [f"{c}/{i}.jpg" for c in ("Cat", "Dog") for i in range(20)]
    corrupt = [name.removeprefix("PetImages/") for name in PET_CORRUPT]
    total = 0
    for split in data.SPLITS:
        ds = data.load("cats_dogs", split, tmp_path, image_size=16)
        expected = [n for n in names if data.cats_dogs_split(n) == split]
        assert len(ds) == len(expected) > 0
        assert ds.skipped == sum(data.cats_dogs_split(n) == split for n in corrupt)
        assert f"{ds.skipped} undecodable files skipped" in ds.source
        assert ds.x.shape == (len(expected), 3, 16, 16) and ds.x.dtype == torch.float32
        assert 0.0 <= ds.x.min() and ds.x.max() <= 1.0
        assert ds.y.tolist().count(0) == sum(n.startswith("Cat") for n in expected)
        red_minus_blue = ds.x[:, 0].mean((1, 2)) - ds.x[:, 2].mean((1, 2))
        assert torch.equal(red_minus_blue < 0, ds.y == 1)  # cats red, dogs blue
        total += len(ds) + ds.skipped
    assert total == len(names) + len(corrupt)
    assert data.load("cats_dogs", "train", tmp_path, limit=4).x.shape == (4, 3, 64, 64)


@pytest.mark.parametrize("member", ["../evil.txt", "ABSOLUTE"])
def test_safe_extract_refuses_paths_outside_the_target(tmp_path, member):
    outside = tmp_path / "outside" / "evil.txt"
    member = str(outside) if member == "ABSOLUTE" else member
    archive = tmp_path / "bad.zip"
    archive.write_bytes(zip_with(member))
    dest = tmp_path / "outside" / "dest"
    with pytest.raises(UnsafeArchiveError, match=re.escape(f"member {member!r}")):
        data.safe_extract(archive, dest)
    assert not dest.exists() and not outside.exists()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["bad.zip"]


def test_cats_dogs_refuses_a_malicious_archive(tmp_path, monkeypatch):
    install(monkeypatch, tmp_path, f"cats_dogs/{data.CATS_DOGS_ZIP}", zip_with("../../evil.txt"))
    with pytest.raises(UnsafeArchiveError, match="evil.txt"):
        data.load("cats_dogs", "train", tmp_path)
    assert not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "cats_dogs" / "extracted").exists()


def zipped(members: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=method) as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    return out.getvalue()


def test_safe_extract_refuses_a_zip_bomb_before_writing_anything(tmp_path, monkeypatch):
    monkeypatch.setattr(downloads, "MAX_MEMBER_BYTES", 2**20)
    bomb = tmp_path / "bomb.zip"
    bomb.write_bytes(zipped({"big.bin": b"\x00" * (8 * 2**20)}))  # 8 MiB in about 8 KiB
    assert bomb.stat().st_size < 64 * 2**10
    with pytest.raises(UnsafeArchiveError, match="declares 8,388,608 bytes, more than"):
        data.safe_extract(bomb, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    monkeypatch.setattr(downloads, "MAX_MEMBER_BYTES", 2**30)
    monkeypatch.setattr(downloads, "MAX_ARCHIVE_BYTES", 3 * 2**20)
    many = tmp_path / "many.zip"
    many.write_bytes(zipped({f"{i}.bin": b"\x00" * 2**20 for i in range(4)}))
    with pytest.raises(UnsafeArchiveError, match="above 3,145,728 bytes"):
        data.safe_extract(many, tmp_path / "out")


@pytest.mark.parametrize("change", [-10, +10])
def test_safe_extract_refuses_a_member_whose_data_disagree_with_its_declared_size(tmp_path,
                                                                                  change):
    payload = bytes(range(256)) * 4
    raw = bytearray(zipped({"a.bin": payload, "b.bin": b"second"}, zipfile.ZIP_STORED))
    central = raw.index(b"PK\x01\x02")  # first central-directory entry: a.bin
    for offset in (central + 20, central + 24):  # its compressed and uncompressed sizes
        raw[offset:offset + 4] = (len(payload) + change).to_bytes(4, "little")
    archive = tmp_path / "lying.zip"
    archive.write_bytes(bytes(raw))
    with pytest.raises(UnsafeArchiveError, match="'a.bin'"):
        data.safe_extract(archive, tmp_path / "out")


def test_an_extracted_folder_is_trusted_only_while_it_matches_its_manifest(tmp_path,
                                                                          monkeypatch, capsys):
    install(monkeypatch, tmp_path, f"cats_dogs/{data.CATS_DOGS_ZIP}", pet_zip())
    first = data.load("cats_dogs", "test", tmp_path, image_size=16)
    folder = tmp_path / "cats_dogs" / "extracted"
    assert data.verify_extracted(folder)
    photo = next((folder / "PetImages" / "Cat").glob("*.jpg"))
    photo.write_bytes(jpeg(DOG))  # a tampered file: a dog where a cat was
    assert data.verify_extracted(folder)  # this process verified it once already
    monkeypatch.setattr(downloads, "_VERIFIED", set())  # a new process
    assert not data.verify_extracted(folder)
    again = data.load("cats_dogs", "test", tmp_path, image_size=16)
    assert "does not match its manifest; extracting it again" in capsys.readouterr().out
    assert torch.equal(again.x, first.x) and data.verify_extracted(folder)
    (folder / data.MANIFEST).unlink()  # an extraction that never finished writing it
    monkeypatch.setattr(downloads, "_VERIFIED", set())
    assert not data.verify_extracted(folder)


# ----------------------------------------------------------------------------- arguments


def test_unknown_dataset_lists_the_valid_names_and_bad_split_or_limit_raise():
    with pytest.raises(ValueError) as err:
        data.load("imagenet", "train")
    assert all(name in str(err.value) for name in data.DATASETS)
    with pytest.raises(ValueError, match="valid splits: train, test"):
        data.load("mnist10k", "validation")
    with pytest.raises(ValueError, match="limit"):
        data.load("mnist10k", "train", limit=0)


def test_data_root_prefers_argument_then_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKCOLLAPSE_DATA", str(tmp_path / "env"))
    assert data.data_root(tmp_path / "arg") == tmp_path / "arg"
    assert data.data_root() == tmp_path / "env"
    monkeypatch.delenv("RANKCOLLAPSE_DATA")
    assert data.data_root() == Path.home() / ".cache" / "rankcollapse"


def test_every_real_dataset_has_a_stand_in_and_every_file_a_checksum():
    records = data.DATASETS.values()
    real = {r.name: r.stand_in for r in records if r.urls}
    assert set(real) == {"ag_news", "mnist", "cats_dogs"}
    assert all(data.DATASETS[s].stands_in_for == name for name, s in real.items())
    assert {r.name for r in records} == set(real) | set(real.values()) | {"retrieval"}
    for r in records:
        assert set(r.urls) <= set(r.files) and r.kind in ("text", "image") and r.classes
        assert all(len(digest) == 64 for digest in r.files.values())
        assert r.source and r.license and r.obtain and r.description


# ----------------------------------------------------------------------------- tokenizer


def test_tokenizer_vocabulary_order_cap_and_encoding():
    tok = Tokenizer.from_texts(["b a b", "c b a", "d e", "c e"], max_size=5)
    assert tok.itos == ["<pad>", "<unk>", "<cls>", "b", "a"]  # by count, ties alphabetical
    assert Tokenizer.from_texts(["b a b", "c b a", "d"]).itos[3:] == ["b", "a"]  # min_freq 2
    ids, mask = tok.encode(["A b, zzz!", "b b b b b b"], max_len=4)
    assert ids.tolist() == [[2, 4, 3, 1], [2, 3, 3, 3]]  # <cls> first, <unk>, truncation
    assert mask.tolist() == [[True] * 4, [True] * 4]
    ids, mask = tok.encode([""], max_len=3)
    assert ids.tolist() == [[2, 0, 0]] and mask.tolist() == [[True, False, False]]
    with pytest.raises(ValueError, match="max_len"):
        tok.encode(["a"], max_len=0)


# ----------------------------------------------------------------------------- stand-ins


def image_hashes(x: torch.Tensor) -> set[str]:
    pixels = (x * 255).round().to(torch.uint8).numpy()
    return {hashlib.sha256(image.tobytes()).hexdigest() for image in pixels}


@pytest.mark.parametrize("name,n_classes,sizes", [("mnist10k", 10, (8000, 2000)),
                                                  ("fashion_mnist", 2, (4000, 1000))])
def test_image_stand_ins(name, n_classes, sizes):
    train, test = data.load(name, "train"), data.load(name, "test")
    assert (len(train), len(test)) == sizes and len(train.classes) == n_classes
    for ds in (train, test):
        assert ds.x.shape[1:] == (1, 28, 28) and ds.x.dtype == torch.float32
        assert 0.0 <= ds.x.min() and ds.x.max() <= 1.0 and ds.x.max() > 0.9
        counts = torch.bincount(ds.y, minlength=n_classes)
        assert counts.min() >= 0.75 * counts.max()  # balanced-ish
        assert name in ds.source and "stand-in" in ds.source
    assert not image_hashes(train.x) & image_hashes(test.x)
    assert len(image_hashes(train.x)) == len(train)
    first = train.y[:100]  # the fixed order mixes the classes in any prefix
    assert len(first.unique()) == n_classes


def test_wordnet4_stand_in_and_its_tokenizer():
    train, test = data.load("wordnet4", "train"), data.load("wordnet4", "test")
    assert (len(train), len(test)) == (10_000, 2_000)
    assert train.classes == ["animal", "artifact", "person", "plant"]
    assert torch.bincount(train.y).tolist() == [2500] * 4
    assert torch.bincount(test.y).tolist() == [500] * 4
    assert test.vocab.itos == train.vocab.itos
    for ds in (train, test):
        assert ds.x.shape == (len(ds), 128) and ds.mask.shape == (len(ds), 128)
        assert (ds.x[:, 0] == Tokenizer.CLS).all()
        assert ds.x.max() < len(ds.vocab) and ds.x.min() >= 0
        assert torch.equal(ds.mask, ds.x != Tokenizer.PAD)
        assert (ds.mask[:, :-1] >= ds.mask[:, 1:]).all()  # padding only at the end
    assert not set(text_module._read_wordnet4("train")[0]) & set(text_module._read_wordnet4("test")[0])
    short = data.load("wordnet4", "test", max_len=8, tokenizer=train.vocab, limit=5)
    assert short.x.shape == (5, 8) and short.vocab is train.vocab


def test_stand_in_files_are_verified_and_documented(tmp_path, monkeypatch):
    for record in data.DATASETS.values():
        if record.stands_in_for:
            folder = data.standin_dir() / record.name
            (digest,) = record.files.values()
            assert digest in (folder / "PROVENANCE.md").read_text()
            assert (folder / "LICENSE").stat().st_size > 500
    shutil.copytree(data.standin_dir() / "mnist10k", tmp_path / "mnist10k")
    monkeypatch.setattr(downloads, "standin_dir", lambda: tmp_path)
    with open(tmp_path / "mnist10k" / "mnist10k.npz", "r+b") as f:
        f.seek(1000)
        f.write(b"\xff" * 8)
    with pytest.raises(ChecksumError, match="git checkout -- data/mnist10k"):
        data.load("mnist10k", "train")
    (tmp_path / "mnist10k" / "mnist10k.npz").unlink()
    with pytest.raises(DataError, match="is missing"):
        data.load("mnist10k", "train")


# ----------------------------------------------------------------------------- integrity


def test_only_the_files_the_manifest_lists_are_loaded(tmp_path, monkeypatch):
    install(monkeypatch, tmp_path, f"cats_dogs/{data.CATS_DOGS_ZIP}", pet_zip())
    split = data.cats_dogs_split("Cat/extra.jpg")
    first = data.load("cats_dogs", split, tmp_path, image_size=16)
    folder = tmp_path / "cats_dogs" / "extracted"
    (folder / "PetImages" / "Cat" / "extra.jpg").write_bytes(jpeg(DOG))  # dropped in later
    for process in ("same", "new"):
        if process == "new":
            monkeypatch.setattr(downloads, "_VERIFIED", set())
        assert data.verify_extracted(folder)  # the listed files still match
        again = data.load("cats_dogs", split, tmp_path, image_size=16)
        assert len(again) == len(first) and torch.equal(again.x, first.x)


@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")  # zipfile's, when writing
@pytest.mark.parametrize("second", ["PetImages/Cat/0.jpg", "PetImages/Cat/./0.jpg"])
def test_safe_extract_refuses_two_members_for_the_same_file(tmp_path, monkeypatch, second):
    members = [("PetImages/Cat/0.jpg", jpeg(CAT)), ("PetImages/Dog/0.jpg", jpeg(DOG)),
               (second, jpeg(DOG))]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, payload in members:
            archive.writestr(name, payload)
    zip_path = install(monkeypatch, tmp_path, f"cats_dogs/{data.CATS_DOGS_ZIP}", out.getvalue())
    with pytest.raises(UnsafeArchiveError) as err:
        data.load("cats_dogs", "train", tmp_path)
    message = str(err.value)
    assert str(zip_path) in message and f"member {second!r}" in message and "twice" in message
    assert not list((tmp_path / "cats_dogs").glob("extracted*"))  # nothing was extracted


def test_safe_extract_refuses_a_name_the_manifest_cannot_record(tmp_path):
    archive = tmp_path / "newline.zip"
    archive.write_bytes(zip_with("PetImages/Cat/a\nb.jpg"))
    with pytest.raises(UnsafeArchiveError, match="line break"):
        data.safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("manifest", [b"\xff\xfe\x80 not text\n", b"no separators here\n",
                                      b"0123  not-a-size  PetImages/Cat/0.jpg\n"])
def test_a_malformed_manifest_counts_as_not_matching(tmp_path, monkeypatch, capsys, manifest):
    install(monkeypatch, tmp_path, f"cats_dogs/{data.CATS_DOGS_ZIP}", pet_zip())
    first = data.load("cats_dogs", "test", tmp_path, image_size=16)
    folder = tmp_path / "cats_dogs" / "extracted"
    write_verified(folder / data.MANIFEST, lambda tmp: tmp.write_bytes(manifest))  # digest fits
    monkeypatch.setattr(downloads, "_VERIFIED", set())  # a new process
    assert not data.verify_extracted(folder)
    again = data.load("cats_dogs", "test", tmp_path, image_size=16)
    out = capsys.readouterr().out
    assert f"{folder / data.MANIFEST}" in out and "extracting it again" in out
    assert torch.equal(again.x, first.x) and data.verify_extracted(folder)


def test_a_binary_manifest_digest_counts_as_not_matching(tmp_path, monkeypatch, capsys):
    install(monkeypatch, tmp_path, f"cats_dogs/{data.CATS_DOGS_ZIP}", pet_zip())
    first = data.load("cats_dogs", "test", tmp_path, image_size=16)
    folder = tmp_path / "cats_dogs" / "extracted"
    digest = folder / f"{data.MANIFEST}.sha256"
    digest.write_bytes(bytes(range(256)))
    monkeypatch.setattr(downloads, "_VERIFIED", set())  # a new process
    again = data.load("cats_dogs", "test", tmp_path, image_size=16)
    assert data.MANIFEST in capsys.readouterr().out
    assert torch.equal(again.x, first.x)
    monkeypatch.setattr(downloads, "_VERIFIED", set())  # and every later process trusts it again
    assert data.verify_extracted(folder)


def bad_standin(monkeypatch, tmp_path, name: str, write) -> Path:
    """The stand-in file of `name` as `write(path)` makes it, with its sha256 made the
    expected one: a bad rebuild."""
    (file,) = data.DATASETS[name].files
    path = tmp_path / name / file
    path.parent.mkdir()
    write(path)
    set_digest(monkeypatch, f"{name}/{file}", hashlib.sha256(path.read_bytes()).hexdigest())
    monkeypatch.setattr(downloads, "standin_dir", lambda: tmp_path)
    return path


def npz_arrays(n_train=6, n_test=3) -> dict[str, np.ndarray]:
    images = np.zeros((n_train + n_test, 28, 28), np.uint8)
    labels = np.arange(n_train + n_test) % 10
    return {"x_train": images[:n_train], "y_train": labels[:n_train],
            "x_test": images[n_train:], "y_test": labels[n_train:]}


@pytest.mark.parametrize("change,problem", [
    ({}, None),
    ({"y_train": np.array([0, 1, 2, 3, 4, 12])}, "train split: labels 0 .. 12, outside 0 .. 9"),
    ({"y_test": np.array([-1, 0, 1])}, "test split: labels -1 .. 1, outside 0 .. 9"),
    ({"x_test": np.zeros((0, 28, 28), np.uint8), "y_test": np.zeros(0, np.int64)},
     "test split: no example"),
    ({"y_train": np.arange(5)}, "train split: 6 examples but 5 labels"),
    ({"y_train": np.eye(6, 10)}, "labels are float64 (6, 10), expected integers"),
    ({"x_train": np.zeros((6, 28, 28))}, "images are float64 (6, 28, 28), expected uint8"),
    ({"x_train": np.zeros((6, 784), np.uint8)}, "images are uint8 (6, 784), expected uint8"),
    ({"x_test": None, "y_test": None}, "lacks the arrays ['x_test', 'y_test']"),
])
def test_an_image_stand_in_is_checked_for_content(tmp_path, monkeypatch, change, problem):
    arrays = {k: v for k, v in {**npz_arrays(), **change}.items() if v is not None}
    path = bad_standin(monkeypatch, tmp_path, "mnist10k", lambda p: np.savez(p, **arrays))
    if problem is None:
        assert (len(data.load("mnist10k", "train")), len(data.load("mnist10k", "test"))) == (6, 3)
        return
    for split in data.SPLITS:  # a bad rebuild is refused whichever split is asked for first
        with pytest.raises(DataError) as err:
            data.load("mnist10k", split)
        assert str(path) in str(err.value) and problem in str(err.value)
        assert "build_standins.py" in str(err.value)


def wordnet_csv(rows) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["split", "label", "synset", "title", "description"])
    writer.writerows(rows)
    return gzip.compress(out.getvalue().encode("utf-8"))


WORDNET = [("train", "animal", "1", "cat", "a feline"), ("train", "plant", "2", "fern", "a plant"),
           ("test", "person", "3", "poet", "a writer")]


@pytest.mark.parametrize("rows,problem", [
    (WORDNET, None),
    (WORDNET + [("train", "mineral", "4", "quartz", "a rock")], "row 5: label 'mineral'"),
    (WORDNET + [("valid", "animal", "4", "dog", "a canine")], "row 5: split 'valid'"),
    (WORDNET + [("train", "animal", "4")], "row 5: expected one value in each of the columns"),
    (WORDNET[:2], "test split: no example"),
])
def test_the_text_stand_in_is_checked_for_content(tmp_path, monkeypatch, rows, problem):
    path = bad_standin(monkeypatch, tmp_path, "wordnet4",
                       lambda p: p.write_bytes(wordnet_csv(rows)))
    if problem is None:
        assert sorted(data.load("wordnet4", "train").y.tolist()) == [0, 3]
        return
    for split in data.SPLITS:
        with pytest.raises(DataError) as err:
            data.load("wordnet4", split)
        assert str(path) in str(err.value) and problem in str(err.value)
        assert "build_standins.py" in str(err.value)


def test_mnist_files_that_do_not_belong_together_are_refused(tmp_path, monkeypatch):
    install_mnist(monkeypatch, tmp_path)
    labels_file = data.MNIST_FILES["test"][1]
    install(monkeypatch, tmp_path, f"mnist/{labels_file}", idx_gz(digits(4, seed=5)[1],
                                                                   data.IDX_LABELS))
    with pytest.raises(DataError, match=f"{labels_file}, test split: 5 examples but 4 labels"):
        data.load("mnist", "test", tmp_path)


# ----------------------------------------------------------------------------- unreadable files


def standin_bytes(name: str) -> bytes:
    (file,) = data.DATASETS[name].files
    return (data.standin_dir() / name / file).read_bytes()


def scrambled(payload: bytes) -> bytes:
    """`payload` with a run of bytes in its middle overwritten: compressed data that no longer
    decompress."""
    middle = len(payload) // 2
    return payload[:middle] + bytes(range(256)) * 4 + payload[middle + 1024:]


@pytest.mark.parametrize("name,damage", [
    ("mnist10k", lambda b: b[: len(b) // 2]),  # truncated: no central directory
    ("mnist10k", lambda b: b[:-100]),
    ("mnist10k", scrambled),
    ("mnist10k", lambda b: b"not an archive"),  # numpy would try to unpickle it
    ("fashion_mnist", lambda b: b[: len(b) - 30_000]),
    ("wordnet4", lambda b: b[: len(b) // 2]),  # gzip stream ends early
    ("wordnet4", scrambled),
    ("wordnet4", lambda b: b"not gzip"),
    ("wordnet4", lambda b: gzip.compress(b"split,label,synset,title,description\n\xe9\n")),
])
def test_an_unreadable_stand_in_with_a_matching_checksum_names_the_file_and_the_remedy(
        tmp_path, monkeypatch, name, damage):
    """A file recorded corrupt (its sha256 matches) used to fail inside zipfile, lzma, zlib
    or gzip, or with numpy's advice to unpickle it."""
    payload = damage(standin_bytes(name))
    path = bad_standin(monkeypatch, tmp_path, name, lambda p: p.write_bytes(payload))
    with pytest.raises(DataError) as err:
        data.load(name, "train")
    message = str(err.value)
    assert str(path) in message and "cannot be read" in message
    assert f"git checkout -- data/{name}" in message and "build_standins.py" in message


def test_a_truncated_archive_with_a_matching_checksum_is_named_with_the_remedy(tmp_path,
                                                                            monkeypatch):
    zip_path = install(monkeypatch, tmp_path, f"cats_dogs/{data.CATS_DOGS_ZIP}",
                       pet_zip()[:5000])
    with pytest.raises(DataError, match=rf"{re.escape(str(zip_path))} cannot be read as a zip "
                                        r"archive .*Delete it and download it again"):
        data.load("cats_dogs", "train", tmp_path)
    assert not list((tmp_path / "cats_dogs").glob("extracted*"))


def test_a_non_utf8_byte_in_ag_news_names_the_file_line_and_byte(tmp_path):
    """The real CSVs are UTF-8 (torchtext and Hugging Face read them so): a Latin-1 byte
    means another file or a re-encoded one, refused rather than guessed at."""
    path = tmp_path / "train.csv"
    path.write_bytes(ag_csv(AG_TRAIN[:2]) + '"3","Caf\u00e9","Prices rise."\n'.encode("latin-1"))
    with pytest.raises(DataError, match=rf"{re.escape(str(path))}, line 3: byte 0xe9 .*not "
                                        r"UTF-8.*delete it to download it again"):
        data.read_ag_news_csv(path)


def renamed_last(payload: bytes, name: str) -> bytes:
    """`payload`, a zip archive, with its last member renamed to `name` in both its local
    header and the central directory: names `zipfile` refuses to write, such as ""."""
    raw, new = bytearray(payload), name.encode()
    local = raw.rfind(b"PK\x03\x04")
    (old,) = struct.unpack_from("<H", raw, local + 26)
    raw[local + 30: local + 30 + old] = new
    struct.pack_into("<H", raw, local + 26, len(new))
    central = raw.rfind(b"PK\x01\x02")
    struct.pack_into("<H", raw, central + 28, len(new))
    raw[central + 46: central + 46 + old] = new
    end = raw.rfind(b"PK\x05\x06")
    size, offset = struct.unpack_from("<II", raw, end + 12)
    struct.pack_into("<II", raw, end + 12, size + len(new) - old, offset + len(new) - old)
    return bytes(raw)


@pytest.mark.parametrize("member", ["", "a/..", "PetImages/Cat/..", "PetImages/.", ".."])
def test_safe_extract_refuses_a_member_that_names_no_file(tmp_path, member):
    """"" used to fail with an IndexError inside zipfile, "a/.." with IsADirectoryError."""
    archive = tmp_path / "odd.zip"
    archive.write_bytes(renamed_last(zip_with("placeholder"), member))
    with pytest.raises(UnsafeArchiveError, match=re.escape(f"{archive}: member {member!r}")):
        data.safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_read_idx_names_a_corrupt_compressed_stream(tmp_path):
    """Zeros over the deflate stream used to escape as zlib.error."""
    images = np.random.default_rng(0).integers(0, 3, (40, 28, 28))
    payload = idx_gz(images, data.IDX_IMAGES)
    path = tmp_path / "f.gz"
    path.write_bytes(payload[:1000] + b"\x00" * 1024 + payload[2024:])
    with pytest.raises(DataError, match=rf"{re.escape(str(path))}: not a readable gzip file "
                                        r".*delete it to download it again"):
        data.read_idx(path, data.IDX_IMAGES)
