"""The library's layers: chapter modules (`rankcollapse.experiments`) build on the library,
never the other way round, and every import is at the top of its module, where a reader (and
the import order) sees it; and chapter cells size nothing."""

import ast
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1] / "src"
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
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


def typed_numbers(source: str) -> list[tuple[int, object]]:
    """(line, value) of every number typed in `source` other than 0 and an index: a size,
    a scale or a count a chapter cell would be deciding instead of its profile."""
    tree = ast.parse(source)
    indices = {id(n) for s in ast.walk(tree) if isinstance(s, ast.Subscript)
               for n in ast.walk(s.slice)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and type(node.value) in (int, float, complex)
            and node.value != 0 and id(node) not in indices]


def test_chapter_cells_type_no_numbers():
    """Chapters size nothing: every count, scale and size a code cell uses comes from the
    profile or the library (the only numbers typed are 0 and indices)."""
    offenders = {}
    for source in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
        for cell in jupytext.read(source).cells:
            if cell.cell_type == "code" and "parameters" not in cell.metadata.get("tags", []):
                if found := typed_numbers(cell.source):
                    offenders.setdefault(source.name, []).extend(v for _, v in found)
    assert not offenders, f"numbers typed in chapter cells (move them to the profile): {offenders}"


def test_the_check_sees_typed_numbers():
    """The check can fail: sizes, scales and keywords are found; 0 and indices are not."""
    source = "x = sweep(draws=256, scale=1.0)\ny = table[1] + rows[-1]\nz = f(0)\nw = range(1, n)"
    assert sorted(typed_numbers(source)) == [(1, 1.0), (1, 256), (4, 1)]


# The library's public calls keep the paper's 50 iterations as a documented default
# (`rc.sinkhorn(logits)` works); the book's own code must never lean on it, or a profile's
# count would be silently ignored. name -> position of `n_iter` among the positional arguments
ITERATED = {"sinkhorn": 1, "sinkhorn_reference": 1, "normalize": 2, "SelfAttention": 3,
            "EncoderConfig": None}


def calls_without_n_iter(source: str) -> list[tuple[int, str]]:
    """(line, name) of every call of an `ITERATED` function that passes no iteration count
    (neither at its position nor as `n_iter=`, nor through `**`); `normalize` of a literal
    "softmax" needs none."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        if name not in ITERATED:
            continue
        position = ITERATED[name]
        given = any(k.arg in ("n_iter", None) for k in node.keywords) or (
            position is not None and len(node.args) > position)
        softmax = name == "normalize" and len(node.args) > 1 and \
            isinstance(node.args[1], ast.Constant) and node.args[1].value == "softmax"
        if not (given or softmax):
            found.append((node.lineno, name))
    return found


def test_the_books_code_always_passes_the_iteration_count():
    offenders = {module_name(p): found for package in PACKAGES for p in package.rglob("*.py")
                 if (found := calls_without_n_iter(p.read_text()))}
    assert offenders == {}, f"calls that fall back on the default of 50 iterations: {offenders}"


def test_the_iteration_check_sees_a_missing_count():
    source = ("a = sinkhorn(x)\nb = sinkhorn(x, k)\nc = rc.normalize(x, 'sinkhorn')\n"
              "d = normalize(x, 'softmax')\ne = EncoderConfig(d_model=8)\n"
              "f = EncoderConfig(n_iter=k)\ng = SelfAttention(8, 2, 'sinkhorn', **kw)")
    assert calls_without_n_iter(source) == [(1, "sinkhorn"), (3, "normalize"),
                                            (5, "EncoderConfig")]
