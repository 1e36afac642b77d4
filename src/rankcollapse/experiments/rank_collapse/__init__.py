"""Chapter 1, rank collapse in random-weight attention stacks: `run(settings, device, seed)`
computes everything the chapter shows (`RankCollapse`), `figures` draws it, and
`experiment` holds the measurements (stacks swept layer by layer, residual and entropy
summaries, the high-precision stack, the LayerNorm check, the claim), which chapters 2, 4, 5
and 6 reuse."""

from .experiment import (EXAMPLE_DECIMALS, EXAMPLE_TOKENS, GROWTH_MIN_LOST, GROWTH_MIN_RESIDUAL,
                         claims, contrast_configs, contrast_sentence, deepest_drawn,
                         depth_profile, digits_lost, entropy_summary, example_table,
                         example_tokens, final_entropies, final_residuals, fit_points,
                         growth_factors, growth_window, layernorm_rank_check, layernorm_sentence,
                         layernorm_summary, layers_above_floor, log_summary,
                         low_affine_rank_tokens, parts_sentence, precise_collapse,
                         precise_digits_lost, random_tokens, sweep)
from .chapter import PARTS, RankCollapse, run
from . import figures

__all__ = ["EXAMPLE_DECIMALS", "EXAMPLE_TOKENS", "GROWTH_MIN_LOST", "GROWTH_MIN_RESIDUAL",
           "PARTS", "RankCollapse", "claims", "contrast_configs", "contrast_sentence",
           "deepest_drawn", "depth_profile", "digits_lost", "entropy_summary", "example_table",
           "example_tokens", "figures", "final_entropies", "final_residuals", "fit_points",
           "growth_factors", "growth_window", "layernorm_rank_check", "layernorm_sentence",
           "layernorm_summary", "layers_above_floor", "log_summary", "low_affine_rank_tokens",
           "parts_sentence", "precise_collapse", "precise_digits_lost", "random_tokens", "run",
           "sweep"]
