"""Training: determinism, atomic checkpoints, resume after a kill, the cache by config hash."""

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from rankcollapse.models import EncoderConfig, ModelConfig
from rankcollapse.training import TrainConfig, epoch_order, learning_rate, train


@dataclass
class Toy:
    """A tiny separable image task: the class is the sign of the mean pixel."""

    x: torch.Tensor
    y: torch.Tensor
    mask: None = None

    def __len__(self):
        return len(self.y)


def toy(n: int, seed: int) -> Toy:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.rand(n, 1, 8, 8, generator=g) * 0.5 + 0.5 * y[:, None, None, None]
    return Toy(x, y)


def config(normalization="softmax", epochs=3, checkpoint_every=4) -> TrainConfig:
    encoder = EncoderConfig(d_model=16, n_heads=2, depth=2, d_ff=32,
                            normalization=normalization, n_iter=10)
    model = ModelConfig("image", 2, encoder, image_size=8, patch=4, channels=1)
    return TrainConfig(model=model, dataset="toy", epochs=epochs, batch_size=16, lr=3e-3,
                       warmup_steps=3, checkpoint_every=checkpoint_every)


def weights(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_schedule_and_order():
    cfg = config()
    lrs = [learning_rate(s, 20, cfg) for s in range(20)]
    assert lrs[0] < lrs[2] == pytest.approx(cfg.lr) and lrs[-1] < 0.05 * cfg.lr
    assert torch.equal(epoch_order(10, 0, 1), epoch_order(10, 0, 1))
    assert not torch.equal(epoch_order(10, 0, 1), epoch_order(10, 0, 2))


@pytest.mark.parametrize("normalization", ["softmax", "sinkhorn"])
def test_training_learns_and_is_deterministic(tmp_path, normalization):
    data, test = toy(96, 0), toy(64, 1)
    a = train(config(normalization), data, test, tmp_path / "a", "cpu", quiet=True)
    b = train(config(normalization), data, test, tmp_path / "b", "cpu", quiet=True)
    assert a.test_accuracy > 0.8 and not a.from_cache
    for k, v in weights(a.model).items():
        assert torch.equal(v, weights(b.model)[k])
    cached = train(config(normalization), data, test, tmp_path / "a", "cpu", quiet=True)
    assert cached.from_cache and cached.test_accuracy == a.test_accuracy
    changed = train(config(normalization, epochs=2), data, test, tmp_path / "a", "cpu",
                    quiet=True)
    assert not changed.from_cache  # another config, another hash


def test_interrupted_run_resumes_to_the_same_weights(tmp_path):
    data, test = toy(96, 0), toy(32, 1)
    reference = train(config(), data, test, tmp_path / "ref", "cpu", quiet=True)
    partial = train(config(), data, test, tmp_path / "run", "cpu", quiet=True, stop_after=7)
    assert partial.steps == 7  # checkpoint at step 4: steps 5-7 are lost and replayed
    resumed = train(config(), data, test, tmp_path / "run", "cpu", quiet=True)
    assert resumed.steps == reference.steps
    for k, v in weights(reference.model).items():
        assert torch.equal(v, weights(resumed.model)[k]), k


KILL_SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
from test_training import config, toy
from rankcollapse.training import train
import rankcollapse.training as t
step = t.optimizer_step
def slow_step(*a, **k):
    time.sleep(0.05)  # so that the kill lands mid-run
    return step(*a, **k)
t.optimizer_step = slow_step
train(config(epochs=6), toy(96, 0), toy(32, 1), {cache!r}, "cpu", quiet=True)
"""


def test_killed_process_resumes_to_the_same_weights(tmp_path):
    data, test = toy(96, 0), toy(32, 1)
    reference = train(config(epochs=6), data, test, tmp_path / "ref", "cpu", quiet=True)
    cache = tmp_path / "run"
    script = KILL_SCRIPT.format(tests=str(Path(__file__).parent), cache=str(cache))
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    checkpoint = cache / config(epochs=6).key(data) / "checkpoint.pt"
    deadline = time.time() + 60
    while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert checkpoint.exists(), "the child never wrote a checkpoint"
    saved = torch.load(checkpoint, weights_only=False)["state"]["step"]
    assert 0 < saved < reference.steps
    resumed = train(config(epochs=6), data, test, cache, "cpu", quiet=True)
    for k, v in weights(reference.model).items():
        assert torch.equal(v, weights(resumed.model)[k]), k


def test_cached_model_is_evaluated_again_on_another_test_set(tmp_path):
    data = toy(96, 0)
    first = train(config(), data, toy(64, 1), tmp_path, "cpu", quiet=True)
    other = toy(16, 5)
    again = train(config(), data, other, tmp_path, "cpu", quiet=True)
    assert again.from_cache
    from rankcollapse.training import evaluate
    assert again.test_accuracy == evaluate(again.model, other, torch.device("cpu"))
    assert train(config(), data, toy(64, 1), tmp_path, "cpu", quiet=True).test_accuracy \
        == first.test_accuracy


def test_unreadable_checkpoint_is_set_aside(tmp_path):
    data, test = toy(96, 0), toy(32, 1)
    run = tmp_path / config().key(data)
    run.mkdir(parents=True)
    (run / "checkpoint.pt").write_bytes(b"")  # what a crash mid-write could leave
    result = train(config(), data, test, tmp_path, "cpu", quiet=True)
    assert result.steps > 0 and (run / "checkpoint.corrupt").exists()
