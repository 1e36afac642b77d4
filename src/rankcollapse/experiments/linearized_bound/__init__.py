"""Chapter 3, the first-order theory of one attention layer put to the test: `run(settings,
device, seed)` computes everything the chapter shows (`LinearizedBound`), `figures` draws
it, and `experiment` holds the measurements (linearization error, the cubic law and its
constant, the depth bound, the regime's edge, the first-order gap) and the claims."""

from .experiment import (CUBIC_WINDOW, LINEARIZATION_ORDER, LINEARIZATION_WINDOW, PRECISE_HEADS,
                         REGIME_TOLERANCE, BoundCheck, RegimeEdge, bound_check, bound_sentence,
                         checked_points, claims, cubic_slopes, depth_table, digit_growth,
                         first_order_gap, gap_sentence, gap_slope, linearization_errors,
                         linearization_slopes, measured_constants, one_layer_table, order_guide,
                         precise_stack, regime_edge, regime_sweep, shared_token_input, slopes,
                         stack_table)
from .chapter import LinearizedBound, run
from . import figures

__all__ = ["CUBIC_WINDOW", "LINEARIZATION_ORDER", "LINEARIZATION_WINDOW", "PRECISE_HEADS",
           "REGIME_TOLERANCE", "BoundCheck", "LinearizedBound", "RegimeEdge", "bound_check",
           "bound_sentence", "checked_points", "claims", "cubic_slopes", "depth_table",
           "digit_growth", "figures", "first_order_gap", "gap_sentence", "gap_slope",
           "linearization_errors", "linearization_slopes", "measured_constants",
           "one_layer_table", "order_guide", "precise_stack", "regime_edge", "regime_sweep",
           "run", "shared_token_input", "slopes", "stack_table"]
