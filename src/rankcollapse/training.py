"""Training with deterministic seeds, atomic checkpoints, resume, and a cache by config hash.

Optimizer: AdamW (betas 0.9, 0.999), linear warm-up over `warmup_steps`, then cosine decay to
zero at the last step; gradient norm clipped at 1. The paper's hyper-parameters are not known
to us: these are this book's choice, recorded in the config (and so in its hash).

Determinism: the batch order of epoch e is a permutation drawn from a generator seeded with
(seed, e), the model is initialized from `seed`, and there is no dropout, so a run that is
killed and resumed from its last checkpoint replays exactly the steps it lost and ends with
the same weights as an uninterrupted run (on the same device and library versions).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from tqdm import tqdm

from .files import (PACKAGE_ROOT, CorruptFile, check_verified, digest_files, file_lock,
                    module_sources, set_aside, write_verified)
from .models import Classifier, ModelConfig, build_model
from .devices import resolve_device

if TYPE_CHECKING:  # training needs only .x, .y, .mask of a dataset
    from .data import Dataset


@dataclass
class TrainConfig:
    model: ModelConfig
    dataset: str
    epochs: int = 5
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 100
    seed: int = 0
    checkpoint_every: int = 200  # steps (not part of the key: it does not change the weights)
    bf16: bool = False  # autocast on CUDA; Sinkhorn itself always runs in float32
    heldout: int = 512  # test examples scored after every epoch (the learning curve)
    extra: dict = field(default_factory=dict)  # data options that change the run (max_len...)

    def key(self, train_data: Dataset) -> str:
        """Hash of what determines the trained weights (16 hex digits): this config, the
        training tensors, and the source of every module this one imports (found from the
        import statements, see `files.module_sources`). The device and the torch version are
        not part of it: weights trained on a GPU are reused on a CPU."""
        fields = {k: v for k, v in asdict(self).items() if k != "checkpoint_every"}
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode())
        digest.update(data_digest(train_data).encode())
        digest.update(digest_files(module_sources(__name__), PACKAGE_ROOT).encode())
        return digest.hexdigest()[:16]


def data_digest(data: Dataset) -> str:
    """sha256 of a dataset's tensors (inputs, labels, mask): a change in how the data are
    read or tokenized changes it; a change in an error message does not."""
    digest = hashlib.sha256()
    for tensor in (data.x, data.y, data.mask):
        if tensor is not None:
            t = tensor.detach().cpu().contiguous()
            digest.update(f"{t.dtype}{tuple(t.shape)}".encode())
            digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@dataclass
class TrainResult:
    model: Classifier
    config: TrainConfig
    test_accuracy: float
    train_seconds: float  # wall time of the training that produced the weights
    steps: int
    losses: list[float]  # mean training loss per epoch
    from_cache: bool
    # per epoch: {"epoch", "train_loss", "heldout_loss", "heldout_accuracy"}, the held-out
    # values on the first `config.heldout` test examples (recorded, never used to stop)
    curve: list[dict] = field(default_factory=list)


# ----------------------------------------------------------------------------- schedule


def learning_rate(step: int, total: int, cfg: TrainConfig) -> float:
    """Linear warm-up to `lr`, then cosine decay to zero at `total` steps."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The sample order of one epoch, a function of (seed, epoch) only."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))


# ----------------------------------------------------------------------------- checkpoints


def _batch(data: Dataset, index: torch.Tensor, device: torch.device):
    x = data.x[index].to(device)
    mask = None if data.mask is None else data.mask[index].to(device)
    return x, mask, data.y[index].to(device)


@torch.no_grad()
def scores(model: Classifier, data: Dataset, device: torch.device, n: int | None = None,
           batch_size: int = 256) -> tuple[float, float]:
    """Mean cross-entropy loss and accuracy (in [0, 1]) of `model` on the first `n` examples
    of `data` (all when None); leaves the model in eval mode."""
    model.eval()
    n = len(data) if n is None else min(n, len(data))
    correct, loss = 0, 0.0
    for start in range(0, n, batch_size):
        x, mask, y = _batch(data, torch.arange(start, min(start + batch_size, n)), device)
        logits = model(x, mask)[0]
        loss += float(torch.nn.functional.cross_entropy(logits.float(), y, reduction="sum"))
        correct += int((logits.argmax(-1) == y).sum())
    return loss / n, correct / n


def evaluate(model: Classifier, data: Dataset, device: torch.device,
             batch_size: int = 256) -> float:
    """Accuracy of `model` on `data`, in [0, 1]."""
    return scores(model, data, device, None, batch_size)[1]


# ----------------------------------------------------------------------------- training


class TrainingError(RuntimeError):
    """Training cannot produce a trained model (no data, no steps, a non-finite loss)."""


def train(cfg: TrainConfig, train_data: Dataset, test_data: Dataset,
          cache_dir: str | Path = ".cache/models", device: str = "auto",
          quiet: bool = False, stop_after: int | None = None) -> TrainResult:
    """Train (or load from the cache) the model of `cfg` on `train_data`.

    The run lives in `cache_dir/<cfg.key(train_data)>/`: `checkpoint.pt` (every
    `checkpoint_every` steps), then `model.pt` and `result.json` when finished, each written
    atomically with its sha256 beside it; the checkpoint and the record name their run (its
    key and configuration). A finished run is loaded, an unfinished one resumes from its
    checkpoint; a file that is unreadable, of the wrong structure, fails its digest or names
    another run (or none) is set aside (`*.corrupt`) with a warning and the work is redone.
    Files hold tensors and plain containers only and are loaded with `weights_only=True`.
    Processes training the same run wait for each other (an advisory lock): the first
    trains, the others load its result. `quiet` prints one line per epoch instead of
    progress bars (for papermill logs). `stop_after` stops after that many steps in this
    call (for tests of resume), returning a result with `steps` < the total and caching
    nothing final.
    """
    _check_trainable(cfg, train_data, test_data)
    run = Path(cache_dir) / cfg.key(train_data)
    dev = resolve_device(device)
    with file_lock(run / "lock"):
        finished = _load_finished(run, cfg, dev, test_data)
        if finished is not None:
            return finished
        return _train(run, cfg, train_data, test_data, dev, quiet, stop_after)


def _check_trainable(cfg: TrainConfig, data: Dataset, test_data: Dataset) -> None:
    """Refuse, naming the dataset and configuration, what would cache an untrained model or
    an accuracy measured on nothing."""
    where = f"dataset {cfg.dataset!r} ({cfg.model.kind} model, {cfg.model.encoder.normalization}, seed {cfg.seed})"
    if len(data) == 0:
        raise TrainingError(f"the training set of {where} is empty: nothing to train on")
    if len(test_data) == 0:
        raise TrainingError(f"the test set of {where} is empty: no accuracy can be measured "
                            f"(and no learning curve); pass a test set with examples")
    if cfg.epochs < 1 or cfg.batch_size < 1:
        raise TrainingError(f"{where}: epochs={cfg.epochs} and batch_size={cfg.batch_size} "
                            f"must be at least 1, or training makes no step")


def _fresh(cfg: TrainConfig, dev: torch.device):
    """The model initialised from the seed, and its optimizer."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model).to(dev)
    return model, torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)


def _drop_checkpoint(run: Path) -> None:
    for name in ("checkpoint.pt", "checkpoint.pt.sha256"):
        (run / name).unlink(missing_ok=True)


def _train(run: Path, cfg: TrainConfig, train_data: Dataset, test_data: Dataset,
           dev: torch.device, quiet: bool, stop_after: int | None) -> TrainResult:
    model, optimizer = _fresh(cfg, dev)
    per_epoch = math.ceil(len(train_data) / cfg.batch_size)
    total = per_epoch * cfg.epochs
    state = {"step": 0, "losses": [], "epoch_loss": 0.0, "seconds": 0.0, "curve": []}
    if (run / "checkpoint.pt").exists():
        saved = _load_checkpoint(run, cfg, model, optimizer, dev)
        if saved is None:  # set aside, perhaps after loading part of it: start from the seed
            model, optimizer = _fresh(cfg, dev)
        else:
            state = saved
    started = time.perf_counter() - state["seconds"]
    bar = tqdm(total=total, initial=state["step"], disable=quiet, desc=f"train {cfg.dataset}")
    model.train()
    while state["step"] < total:
        if stop_after is not None and stop_after <= 0:
            break
        epoch, index_in_epoch = divmod(state["step"], per_epoch)
        order = epoch_order(len(train_data), cfg.seed, epoch)
        index = order[index_in_epoch * cfg.batch_size:(index_in_epoch + 1) * cfg.batch_size]
        loss = optimizer_step(model, optimizer, _batch(train_data, index, dev),
                              learning_rate(state["step"], total, cfg),
                              cfg.bf16 and dev.type == "cuda")
        if not math.isfinite(loss):
            bar.close()
            _drop_checkpoint(run)  # nothing of a diverged run is kept
            raise TrainingError(f"the training loss of dataset {cfg.dataset!r} "
                                f"({cfg.model.encoder.normalization}, seed {cfg.seed}, lr "
                                f"{cfg.lr:g}) is {loss} at step {state['step'] + 1}: the "
                                f"run diverged and nothing was cached")
        state["epoch_loss"] += loss
        state["step"] += 1
        stop_after = None if stop_after is None else stop_after - 1
        bar.update(1)
        if state["step"] % per_epoch == 0:
            _end_epoch(state, per_epoch, model, test_data, cfg, dev, quiet)
        if state["step"] % cfg.checkpoint_every == 0 or state["step"] == total:
            state["seconds"] = time.perf_counter() - started
            _save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                   "state": state, **_identity(run, cfg)}, run / "checkpoint.pt")
    bar.close()
    if state["step"] < total:
        return TrainResult(model, cfg, float("nan"), state["seconds"], state["step"],
                           state["losses"], False, state["curve"])
    return _finish(run, cfg, model, state, test_data, evaluate(model, test_data, dev))


def _end_epoch(state: dict, per_epoch: int, model: Classifier, test_data: Dataset,
               cfg: TrainConfig, dev: torch.device, quiet: bool) -> None:
    """Record the epoch's mean training loss and its held-out point of the learning curve."""
    state["losses"].append(state["epoch_loss"] / per_epoch)
    state["epoch_loss"] = 0.0
    loss, accuracy = scores(model, test_data, dev, cfg.heldout)
    model.train()
    state["curve"].append({"epoch": len(state["losses"]), "train_loss": state["losses"][-1],
                           "heldout_loss": loss, "heldout_accuracy": accuracy})
    if quiet:
        print(f"{cfg.dataset} {cfg.model.encoder.normalization} seed {cfg.seed}: epoch "
              f"{len(state['losses'])}/{cfg.epochs} loss {state['losses'][-1]:.4f}, held-out "
              f"loss {loss:.4f}, accuracy {accuracy:.3f}", flush=True)


def optimizer_step(model: Classifier, optimizer, batch, lr: float, bf16: bool = False) -> float:
    """One optimizer step on `batch`; returns the loss."""
    x, mask, y = batch
    for group in optimizer.param_groups:
        group["lr"] = lr
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=bf16):
        loss = torch.nn.functional.cross_entropy(model(x, mask)[0], y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


def _test_identity(data: Dataset) -> dict:
    """What identifies the test set an accuracy was measured on: its content (a digest of
    its tensors), not only its size and name."""
    return {"test_size": len(data), "test_source": getattr(data, "source", ""),
            "test_digest": data_digest(data)}


def _recorded(cfg: TrainConfig) -> dict:
    """The configuration as `result.json` and the checkpoint record it (JSON values;
    `checkpoint_every`, which does not change the weights, left out)."""
    fields = {k: v for k, v in asdict(cfg).items() if k != "checkpoint_every"}
    return json.loads(json.dumps(fields, default=str))


def _identity(run: Path, cfg: TrainConfig) -> dict:
    """What names the run a file belongs to: its key (the folder's name) and configuration."""
    return {"key": run.name, "config": _recorded(cfg)}


_STATE_KEYS = {"step", "losses", "epoch_loss", "seconds", "curve"}
_RESULT_KEYS = {"test_accuracy", "train_seconds", "steps", "losses", "config", "key",
                "test_size", "test_source", "test_digest", "curve"}


def _save(obj, path: Path) -> None:
    """torch.save, atomically, with the file's sha256 beside it (`files.write_verified`)."""
    write_verified(path, lambda tmp: torch.save(obj, tmp))


def _load(path: Path, device: torch.device):
    """The verified file at `path`, loaded with weights_only=True (tensors and plain
    containers: a crafted file cannot run code). CorruptFile on any failure."""
    check_verified(path)
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # pickle, zip and torch errors are many: any is corruption
        raise CorruptFile(f"{path} cannot be loaded: {type(error).__name__}: {error}") from error


def _load_checkpoint(run: Path, cfg: TrainConfig, model: Classifier, optimizer,
                     device: torch.device) -> dict | None:
    """Restore `model` and `optimizer` from the run's checkpoint and return its state; None
    when there is none, or when it is corrupt or names another run or none (then it is set
    aside, before anything of it is loaded)."""
    path = run / "checkpoint.pt"
    if not path.exists():
        return None
    try:
        saved = _load(path, device)
        if not (isinstance(saved, dict) and {"model", "optimizer", "state"} <= set(saved)
                and isinstance(saved["state"], dict) and _STATE_KEYS <= set(saved["state"])):
            raise CorruptFile(f"{path} does not hold a checkpoint (model, optimizer, state)")
        _check_same_run(path, saved, cfg, run.name)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        return {k: saved["state"][k] for k in _STATE_KEYS}
    except (CorruptFile, RuntimeError, ValueError, KeyError, TypeError) as error:
        set_aside(path, str(error).splitlines()[0])
        return None


def _finish(run: Path, cfg: TrainConfig, model: Classifier, state: dict, test_data: Dataset,
            accuracy: float) -> TrainResult:
    """Write the final weights, then the result record (each atomic, with its digest; the
    record last, so that a record means a complete run), then drop the checkpoint."""
    _save(model.state_dict(), run / "model.pt")
    result = {"test_accuracy": accuracy, "train_seconds": state["seconds"],
              "steps": state["step"], "losses": state["losses"], "curve": state["curve"],
              **_identity(run, cfg), **_test_identity(test_data)}
    write_verified(run / "result.json",
                   lambda tmp: tmp.write_text(json.dumps(result, indent=1, default=str)))
    _drop_checkpoint(run)
    return TrainResult(model.eval(), cfg, accuracy, state["seconds"], state["step"],
                       state["losses"], False, state["curve"])


def _check_same_run(path: Path, recorded: dict, cfg: TrainConfig, key: str) -> None:
    """CorruptFile unless the file at `path` (a finished run's record, a checkpoint), which
    holds `recorded`, belongs to the run asked for: its recorded key is its folder's and its
    recorded configuration the requested one (a run copied under another key, by a careless
    sync between machines, would be served, or resumed, as a model it is not). A file that
    records no run (a checkpoint written before checkpoints recorded theirs) is refused too."""
    if not isinstance(recorded.get("config"), dict) or "key" not in recorded:
        raise CorruptFile(f"{path} records no run (no key and configuration): it cannot be "
                          f"told from another run's")
    if recorded["key"] != key:
        raise CorruptFile(f"{path} records the run {recorded['key']!r}, not {key!r}: it was "
                          f"copied from another run")
    wanted = _recorded(cfg)
    differ = sorted(k for k in set(wanted) | set(recorded["config"])
                    if recorded["config"].get(k) != wanted.get(k))
    if differ:
        raise CorruptFile(f"{path} records another configuration ({differ[0]}: "
                          f"{recorded['config'].get(differ[0])!r}, requested "
                          f"{wanted.get(differ[0])!r})")


def _load_finished(run: Path, cfg: TrainConfig, device: torch.device,
                   test_data: Dataset) -> TrainResult | None:
    """The cached model, or None when the run has not finished or its files are corrupt
    (then they are set aside and the run is redone). Its accuracy is measured again if the
    test set is not the same."""
    record = run / "result.json"
    if not record.exists():
        return None
    try:
        check_verified(record)
        try:
            result = json.loads(record.read_text())
        except ValueError as error:
            raise CorruptFile(f"{record} is not valid JSON ({error})") from error
        if not (isinstance(result, dict) and _RESULT_KEYS <= set(result)):
            raise CorruptFile(f"{record} lacks the fields of a finished run")
        _check_same_run(record, result, cfg, run.name)
        model = build_model(cfg.model).to(device)
        model.load_state_dict(_load(run / "model.pt", device))
    except (CorruptFile, RuntimeError, KeyError, TypeError) as error:
        for name in ("result.json", "model.pt"):
            set_aside(run / name, str(error).splitlines()[0])
        return None
    accuracy = result["test_accuracy"]
    if any(result[k] != v for k, v in _test_identity(test_data).items()):
        accuracy = evaluate(model, test_data, device)
    return TrainResult(model.eval(), cfg, accuracy, result["train_seconds"],
                       result["steps"], result["losses"], True, result["curve"])
