"""The library's layers: chapter modules (`rankcollapse.experiments`) build on the library,
never the other way round, and every import is at the top of its module, where a reader (and
the import order) sees it."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
LIBRARY = ROOT / "rankcollapse"
PACKAGES = (LIBRARY, ROOT / "rankcollapse_book")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, name: str | None = None) -> set[str]:
    """Every module that `path` (the module `name`, by default its own) imports anywhere in
    its body, relative imports made absolute."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] \
                if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found |= {module} | {f"{module}.{a.name}" for a in node.names}
    return found


def nested_imports(path: Path) -> list[int]:
    """Line numbers of imports inside a function or class body (TYPE_CHECKING blocks and the
    module's top level are allowed)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines += [n.lineno for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return lines


def test_no_library_module_imports_a_chapter_module():
    chapters = "rankcollapse.experiments"
    offenders = {module_name(p): sorted(m for m in imported(p) if m.startswith(chapters))
                 for p in LIBRARY.rglob("*.py") if not module_name(p).startswith(chapters)}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_a_relative_import_of_a_chapter_module(tmp_path):
    """The checks can fail: a relative import inside a function is found and resolved."""
    source = tmp_path / "timing.py"
    source.write_text("def f():\n    from .experiments.trained_models import load_task\n")
    assert "rankcollapse.experiments.trained_models" in imported(source, "rankcollapse.timing")
    assert nested_imports(source) == [2]


def test_no_imports_inside_functions():
    offenders = {module_name(p): nested_imports(p) for package in PACKAGES
                 for p in package.rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}
