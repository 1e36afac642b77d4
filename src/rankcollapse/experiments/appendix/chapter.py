"""Chapter 7 as a function of its profile: the Sinkhorn kernel against the log-domain
reference and softmax, what its early stop changes, and a whole training step at random and
at trained logits, timed on `device` at the profile's sizes (`settings.appendix`). The
notebook shows them; it computes nothing."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from ...names import math_number, quoted
from ...profiles import Profile
from ...step_timing import WEIGHTS, train_step_table, trained_step_sentence, trained_step_table
from ...timing import EXACTNESS_HEADERS, REFERENCE, exactness, sinkhorn_table
from ...verdicts import TOLERANCE


@dataclass(frozen=True)
class Performance:
    """What chapter 7 shows."""

    kernel: pd.DataFrame  # time, error and memory per implementation (`sinkhorn_table`)
    exactness: pd.DataFrame  # what stopping early changes, per logit scale
    steps: pd.DataFrame  # a training step per shape, weights and phase (`train_step_table`)
    trained_steps: pd.DataFrame  # a step at each task's trained logits (`trained_step_table`)
    glue: dict[str, object]  # numbers the prose states
    text: dict[str, str]  # sentences the prose states (Markdown)


def run(settings: Profile, device: torch.device, seed: int) -> Performance:
    """Chapter 7 under `settings` on `device`, random logits and weights from `seed`; the
    trained steps read the first Sinkhorn model of each task from the model cache (training
    it there if it is missing)."""
    torch.manual_seed(seed)
    sizes = settings.appendix
    kernel = sinkhorn_table(device, sizes.shape, repeats=sizes.repeats, n_iter=settings.n_iter,
                            scale=sizes.kernel_scale)
    rows = kernel.set_index("implementation")
    ours, softmax = rows.loc["rankcollapse.sinkhorn"], rows.loc["rankcollapse.softmax"]
    early = pd.DataFrame({s: exactness(device, sizes.shape, settings.n_iter, scale=s,
                                       grad_matrices=sizes.gradient_matrices)
                          for s in sizes.scales}).T.rename(columns=EXACTNESS_HEADERS)
    steps = train_step_table(list(sizes.step_shapes), device, repeats=sizes.step_repeats,
                             n_iter=settings.n_iter, seed=seed)
    trained = trained_step_table(settings.name, device, repeats=sizes.step_repeats)
    # the whole step at the ci shapes, once per kind of weights (`WEIGHTS`, in its order)
    whole = steps[(steps["phase"] == "step") & (steps["shapes"] == "ci")].set_index(
        "weights")["ratio"]
    at_init, at_scale = (whole[w] for w in WEIGHTS)
    glue = {"app_speedup": ours["speedup_vs_reference"],
            "app_error": quoted(ours["max_abs_error_vs_reference"]),
            "app_memory": ours["saved_for_backward_MiB"] / softmax["saved_for_backward_MiB"],
            "app_reference_memory": rows.loc[REFERENCE, "saved_for_backward_MiB"]
            / ours["saved_for_backward_MiB"],
            "app_batch": sizes.shape[0], "app_n": sizes.shape[-1], "app_repeats": sizes.repeats,
            "app_scales": len(sizes.scales), "app_step_repeats": sizes.step_repeats,
            "app_kernel_scale": sizes.kernel_scale, "app_n_iter": settings.n_iter,
            "app_gradient_matrices": sizes.gradient_matrices,
            "app_step_scale": WEIGHTS[next(reversed(WEIGHTS))],
            "app_step_init": at_init, "app_step_trained": at_scale}
    return Performance(kernel, early.rename_axis("logit scale"), steps, trained, glue,
                       {"app_trained_steps": trained_step_sentence(trained),
                        "app_tolerance": math_number(TOLERANCE)})
