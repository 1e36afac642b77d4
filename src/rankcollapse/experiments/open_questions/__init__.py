"""Chapter 6, the questions the paper left open: `run(settings, device, seed)` computes
everything the chapter shows (`OpenQuestions`), `figures` draws it. One module per question:
`scratch` (B1, pure attention trained from scratch), `correlation` (C6d, the paper's
hypothesis, with the correlation along a path broken), `inference` (B3, the normalization
swapped at inference; B4, how many Sinkhorn iterations inference needs) and
`lipschitz_constants` (C10); `model_measures` runs the measurements of chapter 5's models
side by side. B5, the depth sweep, is the package `depth_sweep`."""

from .scratch import (SCRATCH_PARTS, ScratchStudy, scratch_analysis, scratch_claim,
                      scratch_comparisons, scratch_models, scratch_study, training_contrast)
from .correlation import (MODES, mechanism, mechanism_claim, mechanism_comparisons,
                          mechanism_data, mechanism_paths, mode_paths)
from .inference import (HALF_STEP, SWAP_PARTS, attention_set, iteration_claim,
                        iteration_measures, iteration_sweep, iteration_times, swap_claim,
                        swap_comparisons, swapped)
from .lipschitz_constants import (POWER, check_tokens, lipschitz_claim, power_iteration_check,
                                  random_lipschitz, sensitivity, trained_lipschitz)
from .model_measures import Measures, measure
from .chapter import OpenQuestions, run
from . import figures

__all__ = ["HALF_STEP", "MODES", "POWER", "SCRATCH_PARTS", "SWAP_PARTS", "Measures",
           "OpenQuestions", "ScratchStudy", "attention_set", "check_tokens", "figures",
           "iteration_claim", "iteration_measures", "iteration_sweep", "iteration_times",
           "lipschitz_claim", "measure", "mechanism", "mechanism_claim",
           "mechanism_comparisons", "mechanism_data", "mechanism_paths", "mode_paths",
           "power_iteration_check", "random_lipschitz", "run", "scratch_analysis",
           "scratch_claim", "scratch_comparisons", "scratch_models", "scratch_study",
           "sensitivity", "swap_claim", "swap_comparisons", "swapped", "trained_lipschitz",
           "training_contrast"]
