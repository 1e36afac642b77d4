"""Atomic writes, and cache keys that follow the imports: the training key changes with the
source of every module training imports, and with the data, and with nothing else."""

import os
import textwrap
from pathlib import Path

import pytest
import torch

from rankcollapse import files
from rankcollapse.files import atomic_write, atomic_write_text, module_sources
from rankcollapse.training import data_digest


def test_atomic_write_replaces_whole_files_and_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"

    def fails(tmp: Path):
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    with pytest.raises(RuntimeError):
        atomic_write(target, fails)
    assert target.read_text() == "two" and os.listdir(target.parent) == ["out.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_concurrent_writers_get_distinct_temporary_names(tmp_path):
    seen = []
    atomic_write(tmp_path / "x", lambda tmp: seen.append(tmp) or tmp.write_text("a"))
    atomic_write(tmp_path / "x", lambda tmp: seen.append(tmp) or tmp.write_text("b"))
    assert seen[0] != seen[1] and all(p.parent == tmp_path for p in seen)


def write_package(root: Path, modules: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, source in modules.items():
        path = package.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    (package / "__init__.py").write_text("")
    return package


@pytest.mark.parametrize("digest", [b"\xff\xfe not text", b"0" * 64 + b"\n"])
def test_a_digest_that_is_not_text_or_does_not_match_is_a_corrupt_file(tmp_path, digest):
    from rankcollapse.files import CorruptFile, check_verified, write_verified

    path = write_verified(tmp_path / "model.pt", lambda tmp: tmp.write_bytes(b"weights"))
    (tmp_path / "model.pt.sha256").write_bytes(digest)
    with pytest.raises(CorruptFile, match="model.pt"):
        check_verified(path)


def test_module_sources_follow_imports_transitively(tmp_path):
    package = write_package(tmp_path, {
        "train": """
            from typing import TYPE_CHECKING
            from .models import Net
            from . import helpers
            import pkg.sub.deep
            if TYPE_CHECKING:
                from .data import Dataset
            """,
        "models": "from .engine import run\n",
        "engine": "import math\n",
        "helpers": "from typing import TYPE_CHECKING\nif not TYPE_CHECKING:\n    from .runtime import r\n",
        "runtime": "r = 1\n",
        "data": "from .unrelated import y\n",
        "unrelated": "y = 1\n",
        "sub/__init__": "",
        "sub/deep": "from ..engine import run\n",
    })
    (package / "sub" / "__init__.py").write_text("")
    found = {p.relative_to(package).as_posix() for p in module_sources("pkg.train", package)}
    assert found == {"train.py", "models.py", "engine.py", "helpers.py", "runtime.py",
                     "sub/deep.py"}  # `if not TYPE_CHECKING:` does run


def test_module_sources_take_the_c_source_beside_an_imported_module(tmp_path):
    package = write_package(tmp_path, {"train": "from .engine import run\n",
                                       "engine": "run = 1\n", "data": "x = 1\n"})
    (package / "engine.c").write_text("int run;\n")
    (package / "data.c").write_text("int x;\n")  # beside a module nothing imports
    found = {p.relative_to(package).as_posix() for p in module_sources("pkg.train", package)}
    assert found == {"train.py", "engine.py", "engine.c"}


def test_package_files_are_every_file_but_bytecode_and_hidden_files(tmp_path):
    from rankcollapse.files import package_files

    package = write_package(tmp_path, {"train": "x = 1\n", "sub/deep": "y = 1\n"})
    (package / "engine.c").write_text("int x;\n")
    (package / "sub" / "table.csv").write_text("a,b\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"bytecode")
    (package / ".train.py.abc.tmp").write_text("half")  # an atomic write in progress
    found = {p.relative_to(package).as_posix() for p in package_files(package)}
    assert found == {"__init__.py", "train.py", "engine.c", "sub/deep.py", "sub/table.csv"}


def test_the_training_key_takes_its_files_from_the_package_files():
    """One rule says what a source is: the training key's files are package files."""
    from rankcollapse.files import package_files

    assert set(module_sources("rankcollapse.training")) < set(package_files())


def test_the_training_key_covers_what_training_imports_and_nothing_else():
    sources = {p.name for p in module_sources("rankcollapse.training")}
    assert {"training.py", "models.py", "normalizations.py", "_sinkhorn_engine.py",
            "_sinkhorn_native.py", "_sinkhorn_native.c", "masks.py"} <= sources
    assert not sources & {"profiles.py", "plots.py", "stats.py"}
    assert not [p for p in module_sources("rankcollapse.training") if p.parent.name == "data"]
    assert all(p.is_relative_to(files.PACKAGE_ROOT) for p in module_sources("rankcollapse.training"))


def test_the_data_digest_sees_the_tensors():
    class Data:
        x, y, mask = torch.zeros(4, 3), torch.tensor([0, 1, 0, 1]), None
    class Other(Data):
        y = torch.tensor([0, 1, 1, 1])
    class Masked(Data):
        mask = torch.ones(4, 3, dtype=torch.bool)
    digests = {data_digest(d) for d in (Data, Other, Masked)}
    assert len(digests) == 3 and data_digest(Data) == data_digest(Data)
