"""Files that cannot be half-written, silently stale or silently corrupt: atomic writes,
digests, files verified against their recorded digest, an advisory lock for many writers,
and the source files a package holds or a module depends on (for cache keys).
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

PACKAGE_ROOT = Path(__file__).resolve().parent  # src/rankcollapse
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read the process's umask without changing it


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call `write(tmp)` with a fresh temporary path beside `path`, then rename it to `path`.

    A reader never sees a half-written file, and several writers of the same path never
    share a temporary name: the last complete file wins. On failure nothing is left behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a cached file is like any other
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """`atomic_write` of a UTF-8 text."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# ----------------------------------------------------------------------------- source closure


def module_path(module: str, root: Path = PACKAGE_ROOT) -> Path:
    """The source file of `module` ("rankcollapse.x.y") inside the package at `root`."""
    parts = module.split(".")[1:]
    base = root.joinpath(*parts)
    package = base / "__init__.py"
    return package if package.is_file() else base.with_suffix(".py")


def _is_type_checking(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` or `if typing.TYPE_CHECKING:`, exactly (not `if not ...`)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path, module: str, package: str, root: Path) -> set[str]:
    """Modules of `package` imported by the source at `path` (module name `module`), at run
    time: imports under `if TYPE_CHECKING:` do not execute and do not count. In
    `from base import a, b`, a name that is a module of `base` counts as that module; `base`
    itself counts when some name is not a module (an attribute defined in `base`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == package)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = module.split(".")
                parent = parent if is_package else parent[:-1]
                base = ".".join(parent[: len(parent) - node.level + 1]
                                + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] == package:
                names = [f"{base}.{a.name}" for a in node.names]
                submodules = [n for n in names if module_path(n, root).is_file()]
                found.update(submodules)
                if len(submodules) < len(names):
                    found.add(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def package_files(root: Path = PACKAGE_ROOT) -> list[Path]:
    """Every file of the package at `root` that can change a number, sorted: its modules (of
    sub-packages too), the C sources they compile and any package data. That is every file
    under `root` but Python's bytecode caches and hidden files (an atomic write's temporary
    file, an editor's swap file): a source nobody thought of is counted, not missed."""
    def counts(path: Path) -> bool:
        parts = path.relative_to(root).parts
        return path.is_file() and "__pycache__" not in parts \
            and not any(part.startswith(".") for part in parts)
    return sorted(p for p in root.rglob("*") if counts(p))


def module_sources(module: str, root: Path = PACKAGE_ROOT) -> list[Path]:
    """Source files of `module` and of every module of its package it imports, transitively,
    found from the import statements (not a hand-written list), sorted: the `package_files`
    of those modules, each module's file with the files of the same name beside it
    (`_sinkhorn_native.c`: what `_sinkhorn_native.py` compiles).

    A package's `__init__.py` counts only when something defined in it is imported.
    """
    package = module.split(".")[0]
    todo, seen = [module], set()
    while todo:
        name = todo.pop()
        path = module_path(name, root)
        if name in seen or not path.is_file():
            continue
        seen.add(name)
        todo.extend(_imports(path, name, package, root) - seen)
    modules = {module_path(name, root).with_suffix("") for name in seen}
    return [p for p in package_files(root) if p.with_suffix("") in modules]


def digest_files(paths, root: Path) -> str:
    """sha256 over the relative names and the bytes of `paths`."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(Path(path).relative_to(root)).encode() + b"\0")
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


# ----------------------------------------------------------------------------- verified files


class CorruptFile(RuntimeError):
    """A cached file is missing its digest, fails it, or does not hold what it should."""


def _digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def write_verified(path: str | Path, write: Callable[[Path], object]) -> Path:
    """`atomic_write` the file, then its sha256 beside it (`<name>.sha256`), also atomically.
    A crash between the two leaves a file without its digest, which `check_verified`
    refuses: the work is redone, never trusted."""
    path = atomic_write(path, write)
    atomic_write_text(_digest_path(path), sha256_file(path) + "\n")
    return path


def check_verified(path: str | Path) -> Path:
    """`path` if its recorded sha256 matches its bytes; CorruptFile naming the problem
    otherwise (missing file, missing digest, a digest that is not text, mismatch)."""
    path, digest = Path(path), _digest_path(Path(path))
    if not path.is_file():
        raise CorruptFile(f"{path} is missing")
    if not digest.is_file():
        raise CorruptFile(f"{path} has no recorded digest ({digest.name})")
    try:
        expected = digest.read_bytes().decode("ascii").strip()
    except UnicodeDecodeError as error:
        raise CorruptFile(f"{digest} is not a text digest ({error.reason} at byte "
                          f"{error.start})") from error
    actual = sha256_file(path)
    if actual != expected:
        raise CorruptFile(f"{path}: sha256 {actual} differs from the recorded {expected}")
    return path


def set_aside(path: str | Path, reason: str) -> None:
    """Move `path` (and its digest) to `<name>.corrupt`, kept for inspection and never used
    again, with a one-line warning saying why."""
    path = Path(path)
    for p in (path, _digest_path(path)):
        if p.exists():
            os.replace(p, p.with_name(p.name + ".corrupt"))
    print(f"warning: set aside {path} ({reason}); the work is redone", flush=True)


@contextmanager
def file_lock(path: str | Path):
    """An exclusive advisory lock (fcntl) on `path`, held inside the `with` block: other
    processes taking the same lock wait. Created if missing; never deleted (deleting a lock
    file another process holds open would let a third one in)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
