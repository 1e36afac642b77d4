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
    assert resumed.curve == reference.curve  # the learning curve survives the interruption
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
    saved = torch.load(checkpoint, weights_only=True)["state"]["step"]
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
    assert result.steps > 0 and (run / "checkpoint.pt.corrupt").exists()


# ----------------------------------------------------------------------------- hostile caches


class Payload:
    """Unpickling this runs code: it writes a marker file (what a crafted checkpoint does)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "code ran"))


def forge(path: Path, content: bytes | None = None, obj=None) -> None:
    """Put a file at `path` with a *valid* digest, so that only its content can betray it."""
    from rankcollapse.files import write_verified

    if obj is not None:
        write_verified(path, lambda tmp: torch.save(obj, tmp))
    else:
        write_verified(path, lambda tmp: tmp.write_bytes(content))


def flip_bytes(path: Path, at: int = 200) -> None:
    raw = bytearray(path.read_bytes())
    raw[at:at + 8] = bytes(255 - b for b in raw[at:at + 8])
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("kind", ["random bytes", "text", "no keys", "wrong shapes",
                                  "flipped bytes", "no digest", "binary digest", "code"])
def test_a_hostile_or_broken_checkpoint_is_set_aside_and_never_run(tmp_path, kind):
    data, test = toy(96, 0), toy(32, 1)
    run = tmp_path / config().key(data)
    run.mkdir(parents=True)
    checkpoint, marker = run / "checkpoint.pt", tmp_path / "marker"
    if kind == "random bytes":
        forge(checkpoint, os.urandom(4096))
    elif kind == "text":
        forge(checkpoint, b"not a checkpoint\n")
    elif kind == "no keys":
        forge(checkpoint, obj={"weights": torch.zeros(3)})
    elif kind == "wrong shapes":
        forge(checkpoint, obj={"model": {"head.weight": torch.zeros(1)}, "optimizer": {},
                               "state": {"step": 1, "losses": [], "epoch_loss": 0.0,
                                         "seconds": 0.0}})
    elif kind == "code":
        import pickle
        forge(checkpoint, pickle.dumps({"model": Payload(marker)}, protocol=2))
    else:
        train(config(), data, test, tmp_path, "cpu", quiet=True, stop_after=5)
        if kind == "flipped bytes":
            flip_bytes(checkpoint)
        elif kind == "binary digest":  # not text: once a UnicodeDecodeError naming no file
            (run / "checkpoint.pt.sha256").write_bytes(bytes(range(128, 256)))
        else:
            (run / "checkpoint.pt.sha256").unlink()
    result = train(config(), data, test, tmp_path, "cpu", quiet=True)
    assert result.steps == 18 and not marker.exists()
    assert (run / "checkpoint.pt.corrupt").exists() and (run / "result.json").exists()
    reference = train(config(), data, test, tmp_path / "clean", "cpu", quiet=True)
    for k, v in weights(reference.model).items():
        assert torch.equal(v, weights(result.model)[k]), k


@pytest.mark.parametrize("kind", ["flipped model", "truncated record", "record without fields",
                                  "missing model", "binary record digest"])
def test_a_broken_finished_run_is_set_aside_and_trained_again(tmp_path, kind):
    data, test = toy(96, 0), toy(32, 1)
    first = train(config(), data, test, tmp_path, "cpu", quiet=True)
    run = tmp_path / config().key(data)
    if kind == "flipped model":
        flip_bytes(run / "model.pt")
    elif kind == "truncated record":
        (run / "result.json").write_text((run / "result.json").read_text()[:40])
    elif kind == "record without fields":
        forge(run / "result.json", b'{"test_accuracy": 1.0}')
    elif kind == "binary record digest":
        (run / "result.json.sha256").write_bytes(b"\xff\xfe" * 40)
    else:
        (run / "model.pt").unlink()
    again = train(config(), data, test, tmp_path, "cpu", quiet=True)
    assert not again.from_cache and again.test_accuracy == first.test_accuracy
    assert list(run.glob("*.corrupt"))
    assert train(config(), data, test, tmp_path, "cpu", quiet=True).from_cache


@pytest.mark.parametrize("forged", ["copied", "copied with the key rewritten"])
def test_a_finished_run_of_another_configuration_is_never_served(tmp_path, forged):
    """A softmax run copied under the Sinkhorn key, digests valid (a careless sync between
    machines): the record names another run and another configuration, so it is set aside
    and the Sinkhorn model is trained."""
    import json
    import shutil

    data, test = toy(96, 0), toy(32, 1)
    train(config("softmax"), data, test, tmp_path, "cpu", quiet=True)
    source, target = (tmp_path / config(name).key(data) for name in ("softmax", "sinkhorn"))
    target.mkdir()
    for name in ("model.pt", "model.pt.sha256", "result.json", "result.json.sha256"):
        shutil.copy(source / name, target / name)
    if forged == "copied with the key rewritten":
        record = json.loads((target / "result.json").read_text())
        forge(target / "result.json", json.dumps({**record, "key": target.name}).encode())
    served = train(config("sinkhorn"), data, test, tmp_path, "cpu", quiet=True)
    assert not served.from_cache
    assert served.model.encoder.blocks[0].attn.normalization == "sinkhorn"
    assert (target / "result.json.corrupt").exists()
    assert train(config("sinkhorn"), data, test, tmp_path, "cpu", quiet=True).from_cache


def test_a_cached_accuracy_is_measured_again_on_a_test_set_of_other_content(tmp_path):
    """Same size, same source, other labels: the accuracy is the new test set's."""
    from rankcollapse.training import evaluate

    data, test = toy(96, 0), toy(64, 1)
    first = train(config(), data, test, tmp_path, "cpu", quiet=True)
    flipped = Toy(test.x, 1 - test.y)
    again = train(config(), data, flipped, tmp_path, "cpu", quiet=True)
    assert again.from_cache
    assert again.test_accuracy == evaluate(again.model, flipped, torch.device("cpu"))
    assert again.test_accuracy == pytest.approx(1 - first.test_accuracy)


def test_an_empty_test_set_is_refused_before_training(tmp_path):
    from rankcollapse.training import TrainingError

    with pytest.raises(TrainingError, match="test set of dataset 'toy'.*empty"):
        train(config(), toy(96, 0), toy(0, 1), tmp_path / "runs", "cpu", quiet=True)
    assert not (tmp_path / "runs").exists()


def test_nothing_untrained_is_cached(tmp_path):
    from rankcollapse.training import TrainingError

    with pytest.raises(TrainingError, match="'toy'.*empty"):
        train(config(), toy(0, 0), toy(8, 1), tmp_path / "empty", "cpu", quiet=True)
    with pytest.raises(TrainingError, match="epochs=0"):
        train(config(epochs=0), toy(8, 0), toy(8, 1), tmp_path / "zero", "cpu", quiet=True)
    assert not (tmp_path / "empty").exists() and not (tmp_path / "zero").exists()
    poisoned = toy(96, 0)
    poisoned.x[:] = float("nan")
    with pytest.raises(TrainingError, match="'toy'.*nan.*nothing was cached"):
        train(config(), poisoned, toy(8, 1), tmp_path / "nan", "cpu", quiet=True)
    assert [p.name for p in (tmp_path / "nan").rglob("*") if p.is_file()] == ["lock"]


WRITER = """
import sys
sys.path.insert(0, {tests!r})
from test_training import config, toy, weights
from rankcollapse.training import train
import torch
result = train(config(), toy(96, 0), toy(32, 1), {cache!r}, "cpu", quiet=True)
torch.save(weights(result.model), {out!r})
"""


def test_many_writers_end_with_one_correct_model(tmp_path):
    """Three processes train the same configuration into one cache at the same time."""
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER.format(
        tests=str(Path(__file__).parent), cache=str(cache), out=str(tmp_path / f"w{i}.pt"))],
        stderr=subprocess.PIPE, text=True) for i in range(3)]
    errors = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    reference = weights(train(config(), toy(96, 0), toy(32, 1), tmp_path / "ref", "cpu",
                              quiet=True).model)
    for i in range(3):
        got = torch.load(tmp_path / f"w{i}.pt", weights_only=True)
        assert all(torch.equal(v, got[k]) for k, v in reference.items())
    run = cache / config().key(toy(96, 0))
    names = sorted(p.name for p in run.iterdir())
    assert names == ["lock", "model.pt", "model.pt.sha256", "result.json", "result.json.sha256"]


def test_a_checkpoint_that_fails_halfway_through_loading_leaves_no_trace(tmp_path, capsys):
    """A checkpoint of this run (its state and record intact) with valid model weights and a
    broken optimizer state: set aside, and training starts from the seed's initialisation,
    not from the weights it had loaded."""
    data, test = toy(96, 0), toy(32, 1)
    run = tmp_path / config().key(data)
    train(config(), data, test, tmp_path, "cpu", quiet=True, stop_after=4)
    trained = train(config(), data, test, tmp_path / "other", "cpu", quiet=True)
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    forge(run / "checkpoint.pt", obj={**saved, "model": trained.model.state_dict(),
                                      "optimizer": {"state": "broken"}})
    capsys.readouterr()
    result = train(config(), data, test, tmp_path, "cpu", quiet=True)
    for k, v in weights(trained.model).items():
        assert torch.equal(v, weights(result.model)[k]), k  # the same as a clean run
    assert (run / "checkpoint.pt.corrupt").exists()
    warning = capsys.readouterr().out
    assert "set aside" in warning and "records" not in warning  # it failed on the optimizer


def test_checkpoint_frequency_is_not_part_of_the_key():
    data = toy(8, 0)
    assert config(checkpoint_every=4).key(data) == config(checkpoint_every=7).key(data)
    assert config(epochs=3).key(data) != config(epochs=4).key(data)


def test_the_learning_curve_is_recorded_per_epoch_and_cached(tmp_path):
    from rankcollapse.training import scores

    data, test = toy(96, 0), toy(32, 1)
    result = train(config(epochs=3), data, test, tmp_path, "cpu", quiet=True)
    assert [p["epoch"] for p in result.curve] == [1, 2, 3]
    assert [p["train_loss"] for p in result.curve] == result.losses
    loss, accuracy = scores(result.model, test, torch.device("cpu"), config().heldout)
    assert result.curve[-1]["heldout_accuracy"] == accuracy == result.test_accuracy
    assert abs(result.curve[-1]["heldout_loss"] - loss) < 1e-6
    # the held-out loss against a plain per-example loop
    with torch.no_grad():
        plain = sum(float(torch.nn.functional.cross_entropy(
            result.model(test.x[i:i + 1], None)[0], test.y[i:i + 1])) for i in range(len(test)))
    assert abs(plain / len(test) - loss) < 1e-5
    assert train(config(epochs=3), data, test, tmp_path, "cpu", quiet=True).curve == result.curve


@pytest.mark.parametrize("forged", ["copied", "copied with the key rewritten", "no record"])
def test_a_checkpoint_of_another_run_is_never_resumed(tmp_path, capsys, forged):
    """A softmax checkpoint under the Sinkhorn key, digest valid (a careless sync), or a
    checkpoint that records no run (written before checkpoints recorded theirs): it is set
    aside with a warning saying why, and training starts from the seed."""
    import shutil

    data, test = toy(96, 0), toy(32, 1)
    source, target = (tmp_path / config(name).key(data) for name in ("softmax", "sinkhorn"))
    wanted = config("sinkhorn" if forged.startswith("copied") else "softmax")
    train(config("softmax"), data, test, tmp_path, "cpu", quiet=True, stop_after=5)
    run = target if forged.startswith("copied") else source
    if run == target:
        target.mkdir()
        for name in ("checkpoint.pt", "checkpoint.pt.sha256"):
            shutil.copy(source / name, target / name)
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    if forged == "copied with the key rewritten":
        forge(run / "checkpoint.pt", obj={**saved, "key": target.name})
    elif forged == "no record":
        forge(run / "checkpoint.pt", obj={k: saved[k] for k in ("model", "optimizer", "state")})
    capsys.readouterr()
    result = train(wanted, data, test, tmp_path, "cpu", quiet=True)
    reference = train(wanted, data, test, tmp_path / "clean", "cpu", quiet=True)
    for k, v in weights(reference.model).items():
        assert torch.equal(v, weights(result.model)[k]), k
    assert (run / "checkpoint.pt.corrupt").exists()
    warning = capsys.readouterr().out
    assert f"set aside {run / 'checkpoint.pt'}" in warning
    assert {"copied": "records the run", "copied with the key rewritten": "another configuration",
            "no record": "records no run"}[forged] in warning
