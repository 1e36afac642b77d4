"""The `full-smoke` profile: the `full` profile's tasks, model shapes (24 layers, width 128,
128 text tokens, 4x4 and 16x16 patches), seeds and chapter structure, at tiny data and
draws (`rankcollapse-book run --profile full-smoke --device cpu` runs every chapter so)."""

import shutil
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from rankcollapse.profiles import PROFILES
from rankcollapse_book import pipeline
from test_chapters import CHAPTER_NUMBERS

# Chapters 5 to 7 train and read the models (the appendix times a step of chapter 5's): under
# full-smoke their notebooks, which call each chapter's `run`, are walked through Jupyter,
# about 6.5 minutes on a core and a half (tests/test_chapters.py runs them under smoke).
# Chapters 1 to 4's `run` tests/test_chapters.py calls under full-smoke too.
WALKS = {"walk_trained": ("05", "06", "07")}


def test_the_walk_and_the_run_tests_cover_every_chapter_once():
    chapters = [c[:2] for c in pipeline.Project(Path(__file__).resolve().parents[1])
                .chapter_names()]
    walked = [n for walk in WALKS.values() for n in walk]
    assert sorted(walked + list(CHAPTER_NUMBERS)) == chapters


def test_full_smoke_keeps_the_full_profiles_shapes_and_structure():
    full, smoke = PROFILES["full"], PROFILES["full-smoke"]
    same = ("n_tokens", "d_model", "n_heads", "depth", "n_iter", "scratch_tasks")
    assert all(getattr(smoke, f) == getattr(full, f) for f in same)
    assert smoke.tasks.keys() == full.tasks.keys()
    shape = ("depth", "d_model", "n_heads", "d_ff", "max_len", "patch", "image_size")
    for role, task in smoke.tasks.items():
        real = full.tasks[role]
        assert all(getattr(task, f) == getattr(real, f) for f in shape), role
        assert replace(task, dataset=real.dataset, epochs=real.epochs,
                       train_limit=None, test_limit=None, batch_size=real.batch_size,
                       warmup_steps=real.warmup_steps) == real
    assert len(smoke.train_seeds) >= 3 and len(smoke.scratch_seeds) >= 2
    # what the appendix times is the profile's to say, not its name's
    assert full.appendix.step_shapes == ("ci", "paper") and smoke.appendix.step_shapes == ("ci",)


def test_the_appendix_times_shapes_it_knows():
    from rankcollapse.step_timing import TRAIN_SHAPES

    for profile in PROFILES.values():
        assert set(profile.appendix.step_shapes) <= set(TRAIN_SHAPES), profile.name


@pytest.mark.slow
@pytest.mark.parametrize("walk", WALKS)
def test_every_chapter_runs_under_full_smoke(walk, tmp_path, monkeypatch):
    """Every chapter executes to its end on the `full` profile's paths (about 7 minutes on
    2 cores), in a copy of the book's sources with its own model cache, on
    the code path a GPU takes: the torch Sinkhorn engine (RANKCOLLAPSE_NATIVE=0 switches the
    C loops off; a GPU never runs them), at the full profile's shapes (24 layers, 128 padded
    text tokens, and trained, sharp attention in its backward)."""
    root = Path(__file__).resolve().parents[1]
    for part in ("notebooks", "book", "_toc.yml", "_config.yml", "pyproject.toml"):
        source = root / part
        if source.is_dir():
            shutil.copytree(source, tmp_path / part, ignore=shutil.ignore_patterns("*.ipynb"))
        else:
            shutil.copy(source, tmp_path / part)
    monkeypatch.setenv("RANKCOLLAPSE_MODELS", str(tmp_path / "models"))
    monkeypatch.setenv("RANKCOLLAPSE_NATIVE", "0")  # inherited by every chapter's kernel
    chapters = [c for c in pipeline.Project(tmp_path).chapter_names() if c[:2] in WALKS[walk]]
    assert len(chapters) == len(WALKS[walk])
    code = pipeline.main(["run", "--profile", "full-smoke", "--device", "cpu", *chapters],
                         pipeline.Project(tmp_path))
    executed = sorted((tmp_path / "book" / "chapters").glob("*.ipynb"))
    assert code == 0 and [p.stem for p in executed] == chapters
    for notebook in executed:
        outputs = [o for c in nbformat.read(notebook, as_version=4).cells
                   for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], notebook.name
