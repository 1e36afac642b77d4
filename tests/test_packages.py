"""Two packages: the science library `rankcollapse` imports nothing of the book tooling and
works with its core dependencies alone; every third-party package it imports is declared."""

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCIENCE = ROOT / "src" / "rankcollapse"
TOOLING = ("rankcollapse_book", "papermill", "jupytext", "nbformat", "myst_nb", "IPython",
           "yaml", "jupyter_book", "jupyter_client", "sphinx", "traitlets")
DIST_NAMES = {"PIL": "pillow"}  # import name -> distribution name, where they differ


def science_modules() -> list[str]:
    names = []
    for path in sorted(SCIENCE.rglob("*.py")):
        parts = path.relative_to(SCIENCE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return [n for n in names if not n.startswith("rankcollapse.standins")]


def top_level_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_science_package_imports_no_tooling():
    offenders = {str(p.relative_to(ROOT)): sorted(top_level_imports(p) & set(TOOLING))
                 for p in SCIENCE.rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_every_third_party_import_is_a_core_dependency():
    declared = {d.split("==")[0].lower() for d in
                tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    used = set().union(*(top_level_imports(p) for p in SCIENCE.rglob("*.py")))
    third_party = {DIST_NAMES.get(m, m).lower() for m in used - stdlib - {"rankcollapse"}}
    assert third_party <= declared, third_party - declared


BLOCK = """
import importlib, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"{{name}} is book tooling, not a core dependency")
sys.meta_path.insert(0, Block())
for module in {modules!r}:
    importlib.import_module(module)
import rankcollapse as rc, torch
assert rc.sinkhorn(torch.randn(2, 4, 4)).shape == (2, 4, 4)
print("imported", len({modules!r}), "modules")
"""


def test_every_science_module_imports_without_the_tooling_installed():
    modules = science_modules()
    script = BLOCK.format(blocked=set(TOOLING), modules=modules)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT / "tests")
    assert done.returncode == 0, done.stderr
    assert f"imported {len(modules)} modules" in done.stdout


def test_the_public_face():
    import rankcollapse as rc

    for name in ("softmax", "sinkhorn", "SelfAttention", "relative_residual", "build_model"):
        assert callable(getattr(rc, name)), name


@pytest.mark.slow
def test_pip_install_without_extras_then_import_every_module(tmp_path):
    """A real, non-editable install into a fresh virtual environment (core dependencies
    only), then every science module, a stand-in dataset and the Sinkhorn engine's C loops
    (compiled from the installed source) from the installed package."""
    source = tmp_path / "source"  # pip builds in the source tree: keep the checkout clean
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".cache", "_build", "build", "*.egg-info", "chapters", "__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(source)], check=True,
                   capture_output=True)
    script = ("import importlib\n"
              f"for m in {science_modules()!r}: importlib.import_module(m)\n"
              "from rankcollapse.data import load, standin_dir\n"
              "assert 'site-packages' in str(standin_dir())\n"
              "from rankcollapse import _sinkhorn_native as native\n"
              "assert native.available() and 'site-packages' in str(native.SOURCE)\n"
              "print(len(load('mnist10k', 'test')))\n")
    environment = {**os.environ, "RANKCOLLAPSE_NATIVE_DIR": str(tmp_path / "native")}
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, env=environment)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2000"
    tooling = subprocess.run([str(python), "-c", "import papermill"], capture_output=True)
    assert tooling.returncode != 0  # the extras were really not installed


def test_every_package_of_the_source_tree_is_installed():
    """The wheel holds the packages pyproject.toml lists: a package folder left out of the
    list would import from a checkout and be missing from an installation."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(p.parent.relative_to(ROOT / "src").parts)
             for p in (ROOT / "src").rglob("__init__.py") if ".egg-info" not in str(p)}
    assert found | {"rankcollapse.standins"} == listed
