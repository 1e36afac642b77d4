"""Where the book's pipeline reads and writes (`Project`), the record a successful chapter
execution leaves (`read_record`), and the error a file the book cannot be run or built from
raises (`BookError`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from rankcollapse.profiles import PROFILES


class BookError(RuntimeError):
    """A file the book cannot be run or built from (`_toc.yml` that is not valid, say): the
    message names the file and what to do, and the command prints it as its one line."""


@dataclass(frozen=True)
class Project:
    """Where the pipeline reads and writes, all relative to the repository `root`."""

    root: Path

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def chapters(self) -> Path:
        return self.root / "book" / "chapters"

    @property
    def standins(self) -> Path:
        """The stand-in datasets, shipped as the package `rankcollapse.standins`
        (pyproject.toml maps it to `data/`)."""
        return self.root / "data"

    @property
    def cache(self) -> Path:
        return self.root / ".cache" / "chapters"

    def chapter_names(self) -> list[str]:
        """Names of all chapter sources, `NN_name`, in book order."""
        return sorted(p.stem for p in self.notebooks.glob("[0-9][0-9]_*.py"))

    def source(self, name: str) -> Path:
        return self.notebooks / f"{name}.py"

    def output(self, name: str) -> Path:
        return self.chapters / f"{name}.ipynb"

    def record(self, name: str) -> Path:
        return self.cache / f"{name}.json"


def read_record(project: Project, name: str) -> dict | None:
    """The cache record of the last successful execution of `name`, if any; a record that
    is unreadable, lacks a field or holds one of another kind (`seconds` a string, a profile
    this version does not know) counts as none: the chapter runs again."""
    path = project.record(name)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if _valid_record(record) else None


def _valid_record(record) -> bool:
    """Whether `record` holds what `run_chapter` writes, each field of its kind."""
    if not isinstance(record, dict):
        return False
    seconds, parameters = record.get("seconds"), record.get("parameters")
    return (isinstance(record.get("key"), str) and isinstance(record.get("notebook_sha256"), str)
            and isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
            and math.isfinite(seconds) and seconds >= 0 and isinstance(parameters, dict)
            and isinstance(parameters.get("profile"), str) and parameters["profile"] in PROFILES)
