"""The generated parts of the Reproduce page: the profiles' settings, from
`rankcollapse.profiles`, and the chapters' execution times, from this build's run records.

`write_reproduce_parts` writes `book/profiles.md` and `book/times.md`, which
`book/reproduce.md` includes, so that neither table can drift from the code or the build.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from rankcollapse.names import TASKS
from rankcollapse.data import record as dataset_record
from rankcollapse.files import atomic_write_text
from rankcollapse.profiles import (PROFILES, Appendix, BoundSettings, ControlSettings, DepthSweep,
                                   LogGrid, OpenQuestionSettings, PreciseStack, Profile,
                                   RankCollapseSettings, SinkhornSettings)

PROFILES_PART, TIMES_PART = Path("book") / "profiles.md", Path("book") / "times.md"
# The chapters' own settings records on `Profile`: one row per field of each.
CHAPTER_SETTINGS = {"ch1": RankCollapseSettings, "ch2": SinkhornSettings, "ch3": BoundSettings,
                    "ch4": ControlSettings, "ch6": OpenQuestionSettings}
LABELS = {  # Profile field, or a field of a chapter's settings -> what it sets (chapter)
    "n_tokens": "tokens per sequence, random inputs (chapters 1-4)",
    "d_model": "width of the random-weight stacks (chapters 1, 2, 4)",
    "n_heads": "attention heads, random-weight stacks",
    "depth": "layers in random-weight stacks",
    "n_iter": "Sinkhorn iterations",
    "n_samples": "random inputs per setting",
    "weight_draws": "random weight draws per setting (chapters 1, 2)",
    "n_paths": "sampled attention paths per depth, trained models (chapter 5)",
    "n_pools": "independent pools of random matrices or networks (chapters 4, 5)",
    "paths_per_pool": "sampled paths per depth in each pool",
    "train_seeds": "training seeds per task and normalization, where a task sets none (chapter 5)",
    "n_eval": "test inputs analysed per trained model (chapters 5, 6)",
    "scratch_tasks": "tasks also trained as pure attention (chapter 6)",
    "scratch_seeds": "training seeds of the pure-attention models (chapter 6)",
    "train_jobs": "trainings run at once, sharing the device (chapters 5, 6)",
    "lipschitz_draws": "random layers per setting, Lipschitz constants (chapter 6)",
    "lipschitz_inputs": "test inputs per trained model, Lipschitz constants (chapter 6)",
    "iteration_rounds": "interleaved timing rounds per model and iteration count (chapter 6)",
    "accuracy_inputs": "test inputs for the accuracies of B1, B3 and B4 (chapter 6)",
    "iterations": "Sinkhorn iteration counts at inference, B4; 0.5 is softmax (chapter 6)",
    "lipschitz_scales": "logit scales of the random layers, Lipschitz constants (chapter 6)",
    "check_entries": "largest input (tokens × width) whose whole Jacobian checks the power "
                     "iteration (chapter 6)",
    "depth_sweep": "one task trained at several depths (chapter 6)",
    "collapse_scales": "logit scales of the pure stacks (chapter 1)",
    "collapse_precise": "high-precision pure stack (chapter 1)",
    "layernorm_ranks": "affine ranks of the token sets, LayerNorm check (chapter 1)",
    "layernorm_draws": "token sets per rank, LayerNorm check (chapter 1)",
    "convergence_steps": "steps of the convergence curves (chapter 2)",
    "error_draws": "random logit matrices per scale, row error after the iterations (chapter 2)",
    "heatmap": "side and logit scale of the heat maps' matrix (chapter 2)",
    "entropy_draws": "random logit matrices per scale, row entropy (chapter 2)",
    "pure_scales": "logit scales of the pure stacks (chapter 2)",
    "cost_sizes": "token counts of the cost figure (chapter 2)",
    "cost_batch": "matrices per timed call, cost figure (chapter 2)",
    "cost_repeats": "interleaved rounds, cost figure (chapter 2)",
    "linearization_eps": "logit sizes of the linearization check (chapter 3)",
    "layer_scales": "input residual sizes of the one-layer law (chapter 3)",
    "stack_starts": "starting residuals of the float64 stacks (chapter 3)",
    "bound_precise": "high-precision stack of the depth bound (chapter 3)",
    "bound_starts": "starting residuals of the depth bound (chapter 3)",
    "regime_logit_stds": "logit scales of the regime sweep (chapter 3)",
    "regime_scales": "weight scales of the regime sweep (chapter 3)",
    "pool_batch": "matrices per batch of the random-matrix pools (chapter 4)",
    "control_sizes": "sequence lengths of the random-matrix control (chapter 4)",
    "control_scales": "logit scales of the random-matrix control (chapter 4)",
    "rhos": "correlations across layers, correlated control (chapter 4)",
    "network_scales": "logit scales of the random networks, path products (chapter 4)",
    "hidden_scales": "logit scales of the random networks, hidden states (chapter 4)",
    "contrast_scales": "logit scales of the rank-against-entropy contrast (chapter 1)",
    "parts_scale": "logit scale of the block-parts stacks (chapter 1)",
    "entropy_scales": "logit scales of the row errors and row entropies, C9 (chapter 2)",
    "error_quoted_scales": "logit scales whose row errors the prose quotes (chapter 2)",
    "entropy_quoted_scale": "logit scale whose entropy difference the prose quotes (chapter 2)",
    "head_scale": "logit scale of the random heads (chapter 3)",
    "pool_scale": "logit scale of the control's random matrices (chapter 4)",
    "appendix": "what the appendix times, at which sizes, how often (chapter 7)",
}
TASK_ROWS = {  # chapter 5, per task: label -> how to read it from the Task
    "dataset": lambda t: f"`{t.dataset}`",
    "layers, width, heads, FFN width": lambda t: f"{t.depth}, {t.d_model}, {t.n_heads}, {t.d_ff}",
    "epochs, batch size, learning rate": lambda t: f"{t.epochs}, {t.batch_size}, {t.lr:g}",
    "training examples": lambda t: f"first {t.train_limit:,}" if t.train_limit else "all",
    "training seeds": lambda t: _seeds(t.seeds) if t.seeds else "the profile's",
    "input": lambda t: (f"{t.max_len} tokens" if dataset_record(t.dataset).kind == "text" else
                        f"{t.patch}x{t.patch} patches"
                        + (f" of {t.image_size}x{t.image_size} images" if t.image_size else "")),
}


def _seeds(seeds: tuple[int, ...]) -> str:
    """'0, 1, 2', or '0-17 (18 seeds)' for a longer run of consecutive seeds."""
    if len(seeds) > 5 and list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]} ({len(seeds)} seeds)"
    return ", ".join(map(str, seeds))


def _value(profile: Profile, name: str) -> str:
    """The setting `name` of `profile` in words; `name` may be a chapter's ('ch2.heatmap')."""
    value = profile
    for part in name.split("."):
        value = getattr(value, part)
    if isinstance(value, LogGrid):
        return f"{value.points} values, 10^{value.low:g} to 10^{value.high:g}"
    if isinstance(value, PreciseStack):
        return f"{value.depth} layers, n = {value.n_tokens}, {value.digits} digits"
    if isinstance(value, Appendix):
        batch, n, _ = value.shape
        return (f"{batch} logit matrices of {n} × {n} at logit scale {value.kernel_scale:g}, "
                f"{value.repeats} rounds; early stop checked at logit scales "
                f"{', '.join(f'{x:g}' for x in value.scales)}, the gradient on "
                f"{value.gradient_matrices} of the matrices; training steps at the "
                f"{' and '.join(value.step_shapes)} shapes, {value.step_repeats} "
                f"round{'s' * (value.step_repeats != 1)}")
    if isinstance(value, DepthSweep):
        changed = "".join(f", {label} {v:,}" for label, v in (
            ("first training examples", value.train_limit), ("epochs", value.epochs)) if v)
        return (f"`{value.task}` at {', '.join(map(str, value.depths))} layers, seeds "
                f"{', '.join(map(str, value.seeds))}{changed}")
    if value is None:
        return "none"
    return ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def setting_names() -> list[str]:
    """Every setting the table shows, in the order of `Profile`: a chapter's own settings
    record (`CHAPTER_SETTINGS`) as one row per field, named 'ch2.heatmap'."""
    names = []
    for f in fields(Profile):
        if f.name in CHAPTER_SETTINGS:
            names += [f"{f.name}.{g.name}" for g in fields(CHAPTER_SETTINGS[f.name])]
        elif f.name in LABELS:
            names.append(f.name)
    return names


def profiles_table(profiles: dict[str, Profile] = PROFILES) -> str:
    """Every setting of every profile, chapter 5's tasks included (MyST markdown)."""
    names = list(profiles)
    head = ["| setting | " + " | ".join(f"`{n}`" for n in names) + " |",
            "| --- |" + " --- |" * len(names)]
    rows = [f"| {LABELS[name.split('.')[-1]]} (`{name}`) | "
            + " | ".join(_value(profiles[n], name) for n in names) + " |"
            for name in setting_names()]
    roles = list(dict.fromkeys(r for p in profiles.values() for r in p.tasks))
    for role in roles:
        for label, read in TASK_ROWS.items():
            rows.append(f"| chapter 5, {TASKS.get(role, role)} (`{role}`): {label} | "
                        + " | ".join(read(profiles[n].tasks[role]) if role in profiles[n].tasks
                                     else "–" for n in names) + " |")
    return "\n".join(head + rows) + "\n"


def times_table(records: dict[str, dict | None]) -> str:
    """The chapters' execution times as recorded by the run that produced this build."""
    lines = ["| chapter | executed in | profile | device |", "| --- | --- | --- | --- |"]
    total = 0.0
    for chapter, record in records.items():
        if not record:
            lines.append(f"| {chapter} | not executed | – | – |")
            continue
        total += record["seconds"]
        parameters = record.get("parameters", {})
        lines.append(f"| {chapter} | {record['seconds']:.0f} s | "
                     f"`{parameters.get('profile', '?')}` | {parameters.get('device', '?')} |")
    lines.append(f"| **all chapters** | **{total / 60:.1f} min** | | |")
    return "\n".join(lines) + "\n"


def write_reproduce_parts(root: Path, records: dict[str, dict | None]) -> None:
    """Write the two parts `book/reproduce.md` includes."""
    atomic_write_text(root / PROFILES_PART, profiles_table())
    atomic_write_text(root / TIMES_PART, times_table(records))
