"""Chapter 4, the paper's random-matrix control and what it leaves out: `run(settings,
device, seed)` computes everything the chapter shows (`RandomMatrixControl`), `figures`
draws it, and `experiment` holds the measurements (pools of random attention, path products,
the control's sweep, correlated logits, random networks, their hidden states) and the
claims, which chapter 5 reuses for its random control."""

from .experiment import (HIDDEN_TASKS, PARITY_BAND, ChainTest, PoolMaker, advantage,
                         beyond_control, chain_test, claims, control_label, control_sweep,
                         correlated_sentence, correlated_test, correlation_label,
                         hidden_state_comparisons, hidden_state_panels, hidden_state_stacks,
                         network_label, network_pool, paired_paths, path_depths,
                         path_residuals, pooled_paths, random_logits, random_pool,
                         registered_paths, sweep_depths, sweep_sentence, verdicts,
                         with_identity_layers)
from .chapter import CONTROL_KEYS, RandomMatrixControl, run
from . import figures

__all__ = ["CONTROL_KEYS", "HIDDEN_TASKS", "PARITY_BAND", "ChainTest", "PoolMaker",
           "RandomMatrixControl", "advantage", "beyond_control", "chain_test", "claims",
           "control_label", "control_sweep", "correlated_sentence", "correlated_test",
           "correlation_label", "figures", "hidden_state_comparisons", "hidden_state_panels",
           "hidden_state_stacks", "network_label", "network_pool", "paired_paths",
           "path_depths", "path_residuals", "pooled_paths", "random_logits", "random_pool",
           "registered_paths", "run", "sweep_depths", "sweep_sentence", "verdicts",
           "with_identity_layers"]
