"""Chapter 6's measurements of chapter 5's complete models (C6d, B3, B4, C10), computed in
one call: the forward passes that B4 times first and alone, then the rest side by side in
worker processes where the device is the CPU (`workers.side_by_side`, the profile's
`train_jobs` at a time; one thread each keeps both cores of a small machine busy, where one
process left one mostly idle). Each measurement is the function of this package it names,
with the same arguments as one after another, so the numbers are the same up to the
rounding of a different thread count."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import pandas as pd
import torch

from ...data import Dataset
from ...profiles import Profile
from ...registry import lipschitz_sizes
from ...training import TrainResult
from ...workers import side_by_side
from . import correlation, inference, lipschitz_constants


@dataclass
class Measures:
    """What chapter 6 measures on the complete models (see each function of
    this package): C6d's path products (`mechanism`), B3's swapped normalizations
    (`swap_accuracy`, `swap_residuals`), B4's iteration sweep (`iterations`), and C10's
    Lipschitz constants of random and trained layers, its check of the power iteration
    against the whole Jacobian, and the trained models' sensitivity."""

    mechanism: pd.DataFrame
    swap_accuracy: pd.DataFrame
    swap_residuals: pd.DataFrame
    iterations: pd.DataFrame
    random_lipschitz: pd.DataFrame
    trained_lipschitz: pd.DataFrame
    lipschitz_check: pd.DataFrame
    sensitivity: pd.DataFrame
    check_tokens: int  # the token count of `lipschitz_check`


def measure(settings: Profile, complete: dict[str, dict[tuple[str, int], TrainResult]],
            tests: dict[str, Dataset], device: torch.device, seed: int) -> Measures:
    """Every measurement of `Measures` at the profile's sizes; `complete`: task role ->
    (normalization, training seed) -> chapter 5's model; `tests`: role -> test data."""
    models = {role: {key: r.model for key, r in by_model.items()}
              for role, by_model in complete.items()}
    sinkhorn = {role: {key: r for key, r in by_model.items() if key[0] == "sinkhorn"}
                for role, by_model in complete.items()}
    own = settings.ch6
    times = inference.iteration_times(sinkhorn, tests, settings.n_eval, device,
                                      own.iteration_rounds, own.iterations)
    sizes = lipschitz_sizes(settings)
    check_n = lipschitz_constants.check_tokens(settings.d_model, sizes[0], own.check_entries)
    jobs = settings.train_jobs if device.type == "cpu" else 1
    done = side_by_side({  # the longest first
        "iterations": (inference.iteration_measures, (sinkhorn, tests, settings.n_eval,
                                                      own.accuracy_inputs, device,
                                                      own.iterations)),
        "swap": (inference.swapped, (complete, tests, settings.n_eval, own.accuracy_inputs,
                                     device)),
        "sensitivity": (partial(lipschitz_constants.sensitivity, seed=seed),
                        (models, tests, settings.n_eval)),
        "trained_lipschitz": (lipschitz_constants.trained_lipschitz,
                              (models, tests, own.lipschitz_inputs)),
        "mechanism": (correlation.mechanism, (models, tests, settings.n_eval, settings.n_paths,
                                            seed)),
        "random_lipschitz": (lipschitz_constants.random_lipschitz, (
            settings.d_model, settings.n_heads, own.lipschitz_scales, sizes,
            own.lipschitz_draws, seed, settings.n_iter)),
        "check": (lipschitz_constants.power_iteration_check,
                  (settings.d_model, settings.n_heads, check_n, seed, settings.n_iter)),
    }, jobs)
    swap_accuracy, swap_residuals = done["swap"]
    return Measures(done["mechanism"], swap_accuracy, swap_residuals,
                    inference.iteration_sweep(done["iterations"], times),
                    done["random_lipschitz"],
                    done["trained_lipschitz"], done["check"], done["sensitivity"], check_n)
