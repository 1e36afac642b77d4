"""environment.yml (conda) must pin exactly what pyproject.toml pins, extras included."""

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def pyproject_pins() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"].values()
    return set(project["dependencies"]).union(*extras)


def environment_pins() -> set[str]:
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    return {p for p in pip if not p.startswith("-e")}


def test_environment_pins_match_pyproject():
    assert environment_pins() == pyproject_pins()


def test_environment_installs_the_project_and_python_311():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in environment["dependencies"]
    assert "-e ." in next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
