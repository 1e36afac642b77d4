"""Chapter 2, Sinkhorn versus softmax: `run(settings, device, seed)` computes everything the
chapter shows (`SinkhornVsSoftmax`), `figures` draws it, and `experiment` holds the
measurements (convergence, the error after the iterations, row entropies, layers to
collapse) and the claims."""

from .experiment import (ENTROPY_PARITY, QUANTILES, claims, convergence, convergence_curves,
                         counted, entropy_comparison, entropy_gain, entropy_sentence,
                         entropy_table, error_after, error_sentence, layers_to, reach_gaps,
                         reach_sentence, registered_entropy)
from .chapter import SinkhornVsSoftmax, run
from . import figures

__all__ = ["ENTROPY_PARITY", "QUANTILES", "SinkhornVsSoftmax", "claims", "convergence",
           "convergence_curves", "counted", "entropy_comparison", "entropy_gain",
           "entropy_sentence", "entropy_table", "error_after", "error_sentence", "figures",
           "layers_to", "reach_gaps", "reach_sentence", "registered_entropy", "run"]
