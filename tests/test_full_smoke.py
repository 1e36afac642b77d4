"""The `full-smoke` profile: the `full` profile's tasks, model shapes (24 layers, width 128,
128 text tokens, 4x4 and 16x16 patches), seeds and chapter structure, at tiny data and
draws (`rankcollapse-book run --profile full-smoke --device cpu` runs every chapter so)."""

from dataclasses import replace

import pytest
import torch

from rankcollapse.profiles import PROFILES, get_profile
from test_chapters import TRAINED, chapter_id, check_result


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


@pytest.fixture(scope="module")
def full_smoke(tmp_path_factory):
    """The `full-smoke` profile with a model cache of its own, shared by the trained chapters
    in chapter order (chapter 6 reads chapter 5's models, the appendix times a step of
    them), on the code path a GPU takes: the torch Sinkhorn engine (RANKCOLLAPSE_NATIVE=0
    switches the C loops off, in the training workers too; a GPU never runs them)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RANKCOLLAPSE_MODELS", str(tmp_path_factory.mktemp("models")))
        patch.setenv("RANKCOLLAPSE_NATIVE", "0")
        yield get_profile("full-smoke")


@pytest.mark.slow
@pytest.mark.parametrize("chapter", TRAINED, ids=chapter_id)
def test_trained_chapter_runs_under_full_smoke(chapter, full_smoke):
    """Chapters 5-7's `run` on the full profile's shapes (24 layers, 128 padded text tokens,
    trained and sharp attention in Sinkhorn's backward) at tiny data: about 7 minutes on a
    core and a half, so CI runs it beside tests/test_chapters.py (chapters 1-4 are there)."""
    check_result(chapter, TRAINED, chapter.run(full_smoke, torch.device("cpu"), seed=0),
                 full_smoke)
