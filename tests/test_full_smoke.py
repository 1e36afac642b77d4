"""The `full-smoke` profile: the `full` profile's tasks, model shapes (24 layers, width 128,
128 text tokens, 4x4 and 16x16 patches), seeds and chapter structure, at tiny data and
draws (`rankcollapse-book run --profile full-smoke --device cpu` runs every chapter so)."""

from dataclasses import replace

from rankcollapse.profiles import PROFILES


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
