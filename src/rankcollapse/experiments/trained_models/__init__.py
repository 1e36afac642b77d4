"""Chapter 5, rank decay in trained Transformers: `run(settings, device, seed)` trains what the
model cache lacks and computes everything the chapter shows (`TrainedModels`), `figures`
draws it; `experiment` trains and measures the models, `convergence` says whether they are
trained (and C8), `rank_claims` holds C4a-C4e, C2a and C9 on them."""

from .experiment import (OURS, VARIANTS, Analysis, analyse, attention_paths,
                         attention_statistics, complete_models, departures, model_table, models_data,
                         one_size, seed_counts, task_titles)
from .convergence import (PLATEAU, accuracy_claim, accuracy_data, accuracy_table,
                          baseline_noise, chance_sentence, convergence_sentence,
                          convergence_table, curve_table, curves_with_references, plateau_words,
                          plateaued)
from .rank_claims import (RESIDUAL_FIGURES, RESIDUAL_GROUPS, claims, claims_table, collapse_words,
                     estimate, layer_sentences, logit_scales, path_comparisons, scale_words,
                     trained_attention_claims, where_table)
from .chapter import TrainedModels, run
from . import figures

__all__ = ["OURS", "PLATEAU", "RESIDUAL_FIGURES", "RESIDUAL_GROUPS", "VARIANTS", "Analysis",
           "TrainedModels", "accuracy_claim", "accuracy_data", "accuracy_table", "analyse",
           "attention_paths", "attention_statistics", "baseline_noise", "chance_sentence",
           "claims", "claims_table", "collapse_words", "complete_models", "convergence_sentence",
           "convergence_table", "curve_table", "curves_with_references", "departures", "estimate", "figures",
           "layer_sentences", "logit_scales", "model_table", "models_data", "one_size",
           "path_comparisons", "plateau_words", "plateaued", "run", "scale_words",
           "seed_counts", "task_titles", "trained_attention_claims", "where_table"]
