"""The datasets' files: real files downloaded on first use and verified against their
sha256 before every use, the shipped stand-ins checked the same way, the examples of a file
checked against its record, and archives extracted safely (no member outside its folder, no
zip bomb) with a manifest that is checked before the folder is trusted again."""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.request
import zipfile
import zlib
from importlib import resources
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..files import CorruptFile, check_verified, file_lock, sha256_file, write_verified
from .records import ChecksumError, DataError, DatasetRecord, UnsafeArchiveError, record

FETCH_TIMEOUT_S = 60


def standin_dir() -> Path:
    """Where the stand-ins' files are: the package data folder `rankcollapse/standins`, which
    is the repository's `data/` (mapped by pyproject.toml) in a source checkout and a copy of
    it in an installed wheel."""
    return Path(str(resources.files("rankcollapse.standins")))



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

