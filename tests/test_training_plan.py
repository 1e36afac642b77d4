"""`rankcollapse-train`: one training into the shared cache, found there by the chapter."""

from dataclasses import replace

import pytest

from rankcollapse import profiles, training_plan, workers
from rankcollapse.experiments import trained_models as tm
from rankcollapse.profiles import Task

TINY = Task("fashion_mnist", depth=1, d_model=16, n_heads=2, d_ff=32, epochs=1, batch_size=32,
            lr=1e-3, warmup_steps=1, patch=7, train_limit=64)


@pytest.fixture
def tiny(monkeypatch):
    profile = replace(profiles.PROFILES["three-task"], name="tiny", tasks={"pairs": TINY}, depth_sweep=None,
                      train_seeds=(3, 4), n_iter=10, scratch_tasks=(),
                      train_jobs=1)  # spawned workers would not know this profile
    monkeypatch.setitem(profiles.PROFILES, "tiny", profile)
    return profile


def test_list_gives_one_command_per_training(tiny, capsys):
    assert training_plan.main(["--profile", "tiny", "--list", "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"rankcollapse-train --profile tiny --task pairs --normalization {n} "
                     f"--seed {s} --device cpu" for n in ("softmax", "sinkhorn") for s in (3, 4)]
    full, settings = training_plan.planned("full"), profiles.PROFILES["full"]
    sweep = settings.depth_sweep
    new_depths = [d for d in sweep.depths if d != settings.tasks[sweep.task].depth]
    assert len(full) == (len(settings.tasks) * len(settings.train_seeds)
                         + 2 * len(settings.scratch_tasks) * len(settings.scratch_seeds)
                         + len(new_depths) * len(sweep.seeds)) * 2
    assert full[-1].command().endswith(f"--seed {sweep.seeds[-1]} --device cuda --depth "
                                       f"{new_depths[-1]}")
    assert [t.variant for t in full].index("pure-no-ln") < [t.depth for t in full].index(3)
    pure = training_plan.planned("three-task", tuple(training_plan.PURE))
    assert {t.seed for t in pure} == set(profiles.PROFILES["three-task"].scratch_seeds)
    assert {t.variant for t in pure} == set(training_plan.PURE)
    assert tm.seed_counts(tiny) == "2 seeds per normalization"


def test_a_tasks_own_seeds_replace_the_profiles_for_that_task_only(tiny, monkeypatch):
    own = replace(tiny, tasks={"pairs": TINY, "more": replace(TINY, seeds=(7, 8, 9))})
    monkeypatch.setitem(profiles.PROFILES, "tiny", own)
    seeds = {}
    for t in training_plan.planned("tiny"):
        seeds.setdefault((t.task, t.normalization), []).append(t.seed)
    assert seeds == {("pairs", "softmax"): [3, 4], ("pairs", "sinkhorn"): [3, 4],
                     ("more", "softmax"): [7, 8, 9], ("more", "sinkhorn"): [7, 8, 9]}
    assert own.seeds_of("more") == (7, 8, 9) and own.seeds_of("pairs") == (3, 4)
    assert tm.seed_counts(own) == "2 seeds per normalization on pairs and 3 on more"
    assert tm.seed_counts(own, {"more": "More"}) == \
        "2 seeds per normalization on pairs and 3 on More"


def test_trainings_run_side_by_side_in_two_workers(tmp_path, capsys):
    """Two worker processes (spawned: they see only real profiles) train two models into the
    cache; the chapter's own call then loads both, with the same weights as one trained here."""
    import torch

    runs = [training_plan.Training("smoke", "mnist", "softmax", seed) for seed in (0, 1)]
    training_plan.run_all(runs, jobs=2, device="cpu", cache_dir=tmp_path)
    other = training_plan.Training("smoke", "mnist", "sinkhorn", 0)
    found = {t: training_plan.run(t, "cpu", tmp_path) for t in runs + [other]}
    assert found[runs[0]].from_cache and found[runs[1]].from_cache
    assert not found[other].from_cache  # only what was asked for was trained
    threads = torch.get_num_threads()
    torch.set_num_threads(workers.threads_per_job(2))  # the workers' reduction order
    try:
        here = training_plan.run(runs[0], "cpu", tmp_path / "here")
    finally:
        torch.set_num_threads(threads)
    for k, v in here.model.state_dict().items():
        assert torch.equal(v, found[runs[0]].model.state_dict()[k]), k
    assert workers.threads_per_job(1) >= workers.threads_per_job(2) >= 1


def test_the_missing_trainings_come_costliest_first_and_nothing_cached_starts_a_worker(
        tiny, tmp_path, monkeypatch):
    longer = replace(TINY, epochs=3)  # three times the work of TINY
    monkeypatch.setitem(profiles.PROFILES, "tiny",
                        replace(tiny, tasks={"short": TINY, "long": longer}, train_seeds=(3,)))
    plan = training_plan.planned("tiny")
    assert [t.task for t in plan] == ["short", "short", "long", "long"]
    order = training_plan.missing(plan, tmp_path)
    assert [t.task for t in order] == ["long", "long", "short", "short"]  # stable among equals
    assert [t.normalization for t in order[:2]] == ["softmax", "sinkhorn"]
    training_plan.run(order[0], "cpu", tmp_path, quiet=True)
    assert training_plan.missing(plan + plan, tmp_path) == order[1:]  # each once, the cached gone
    for t in order[1:]:
        training_plan.run(t, "cpu", tmp_path, quiet=True)

    def no_workers(*args, **kwargs):
        raise AssertionError("a worker pool was started with nothing to train")

    monkeypatch.setattr(training_plan, "pool", no_workers)
    training_plan.run_all(plan, jobs=2, device="cpu", cache_dir=tmp_path)


def test_the_depth_sweep_trains_each_model_once():
    """The sweep's models at the depth of chapter 5's task, on its data and schedule, are
    chapter 5's own (same task, same seeds): planned once, not twice."""
    settings = profiles.PROFILES["ci"]
    sweep, plan = settings.depth_sweep, training_plan.planned("ci")
    assert len(plan) == len(set(plan))
    shared = [t for t in training_plan.swept(settings) if t.task_of(settings) ==
              settings.tasks[sweep.task] and t.seed in settings.seeds_of(sweep.task)]
    assert shared and not set(shared) & set(plan)
    assert all(replace(t, depth=None) in plan for t in shared)
    swept = {(t.depth, t.normalization, t.seed) for t in training_plan.swept(settings)}
    assert len(swept) == len(sweep.depths) * 2 * len(sweep.seeds)
    assert {t.task_of(settings).depth for t in plan if t.depth} == \
        set(sweep.depths) - {settings.tasks[sweep.task].depth}
    # chapter 5 trains its own models only; the sweep's others are chapter 6's
    assert not [t for t in training_plan.planned("ci", ("complete",), sweep=False) if t.depth]
    with pytest.raises(ValueError, match="sweeps the depths 3, 6, 12, 24; got depth 5"):
        profiles.sweep_task(settings, 5)


def test_jobs_need_all_and_a_positive_count(capsys):
    with pytest.raises(SystemExit):
        training_plan.main(["--task", "mnist", "--normalization", "softmax", "--seed", "0",
                        "--jobs", "2"])
    assert "--jobs needs --all" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        training_plan.main(["--all", "--jobs", "0"])
    assert "jobs must be at least 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        training_plan.run_all([], jobs=0)


def test_one_training_lands_where_the_chapter_looks(tiny, tmp_path, capsys):
    argv = ["--profile", "tiny", "--task", "pairs", "--normalization", "sinkhorn", "--seed",
            "3", "--device", "cpu", "--cache-dir", str(tmp_path)]
    assert training_plan.main(argv) == 0
    assert "sinkhorn seed 3: trained" in capsys.readouterr().out
    # the chapters' one route: everything the profile plans, the missing ones trained
    found = tm.complete_models(tiny, "cpu", tmp_path, quiet=True)
    assert list(found) == ["pairs"] and list(found["pairs"]) == [
        ("softmax", 3), ("softmax", 4), ("sinkhorn", 3), ("sinkhorn", 4)]
    assert training_plan.main(argv) == 0 and "loaded from the cache" in capsys.readouterr().out
    again = training_plan.run(training_plan.Training("tiny", "pairs", "sinkhorn", 3), "cpu", tmp_path)
    assert again.from_cache and again.config == found["pairs"][("sinkhorn", 3)].config


def test_a_pure_training_lands_where_chapter_6_looks(tiny, tmp_path, capsys):
    from rankcollapse.experiments import open_questions as oq

    argv = ["--profile", "tiny", "--task", "pairs", "--normalization", "softmax", "--seed",
            "3", "--device", "cpu", "--cache-dir", str(tmp_path), "--variant", "pure-no-ln"]
    assert training_plan.main(argv) == 0 and "trained" in capsys.readouterr().out
    pure = replace(tiny, scratch_tasks=("pairs",), scratch_seeds=(3,))
    found = oq.scratch_models(pure, "cpu", tmp_path, quiet=True)["pairs"]
    assert set(found) == {"pure attention, LayerNorm", "pure attention, no LayerNorm"}
    assert all(set(models) == {("softmax", 3), ("sinkhorn", 3)} for models in found.values())
    assert training_plan.main(argv) == 0 and "loaded from the cache" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--seed", "-1"], "seed must be in [0, 2**32)"),
    (["--seed", str(2**70)], "seed must be in [0, 2**32)"),
    (["--seed", "1.5"], "seed must be an integer"),
    (["--task", "mnist", "--normalization", "softmax"], "--seed required"),
    (["--task", "imagenet", "--normalization", "softmax", "--seed", "0"], "unknown task"),
])
def test_bad_arguments_are_refused_by_the_parser(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        training_plan.main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("RANKCOLLAPSE_MODELS", raising=False)
    assert str(training_plan.models_dir()) == ".cache/models"
    monkeypatch.setenv("RANKCOLLAPSE_MODELS", str(tmp_path))
    assert training_plan.models_dir() == tmp_path and training_plan.models_dir("x").name == "x"


def test_a_cache_that_cannot_be_written_ends_with_one_line_and_no_traceback(tiny, tmp_path,
                                                                           capsys):
    blocker = tmp_path / "a-file"  # a cache folder that cannot be made: under a file
    blocker.write_text("")
    argv = ["--profile", "tiny", "--task", "pairs", "--normalization", "softmax", "--seed",
            "3", "--device", "cpu", "--cache-dir", str(blocker / "models")]
    assert training_plan.main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(blocker / "models") in err and "writable --cache-dir" in err
