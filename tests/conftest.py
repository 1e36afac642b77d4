import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import settings

from rankcollapse import profiles
from rankcollapse.profiles import Task

# No deadlines: these machines are noisy. CI runs a fixed set of examples (derandomized).
settings.register_profile("default", max_examples=25, deadline=None)
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")


# The verdict layer's tests (registry, ledger, chapters' claims) were written for a profile of
# three tasks (text, MNIST, Cats and Dogs: the 6-layer, width-48 models `ci` trained before it
# moved to the paper's depth) and three seeds, and their written-out tables hold the family
# sizes and levels that follow from it. They name that profile, "three-task", explicitly; "ci"
# is the book's own profile everywhere.
REAL_CI = profiles.PROFILES["ci"]
_SMALL = dict(depth=6, d_model=48, n_heads=4, d_ff=96, batch_size=128, lr=2e-3, warmup_steps=30)
THREE_TASKS = replace(
    REAL_CI, name="three-task",
    tasks={"text": Task("wordnet4", epochs=8, max_len=20, train_limit=4000, **_SMALL),
           "mnist": Task("mnist10k", epochs=14, patch=7, **_SMALL),
           "cats_dogs": Task("fashion_mnist", epochs=8, patch=7, **_SMALL)},
    train_seeds=(0, 1, 2), scratch_tasks=("cats_dogs",), scratch_seeds=(0, 1, 2))


@pytest.fixture(autouse=True)
def three_task_profile(monkeypatch):
    """The test profile, known by its own name while a test runs (`get_profile`)."""
    monkeypatch.setitem(profiles.PROFILES, THREE_TASKS.name, THREE_TASKS)


def pytest_collection_modifyitems(items):
    """Under `make mutation`, run the quickest tests first.

    mutmut stops a mutant's run at its first failing test (`-x`) and hands pytest the covering
    tests in alphabetical order, so a mutant that a 0.1 s test kills could first sit through the
    registry's calibration simulations (about 50 s). Reordering changes no verdict, only how soon
    it comes. The durations are the ones mutmut recorded beside the mutated copy of the tests.
    """
    stats = Path(__file__).resolve().parent.parent / "mutmut-stats.json"
    if "MUTANT_UNDER_TEST" not in os.environ or not stats.exists():
        return
    durations = json.loads(stats.read_text()).get("duration_by_test", {})
    items.sort(key=lambda item: durations.get(item.nodeid, 0.0))
