# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Appendix: how fast and how lean is the Sinkhorn implementation?
#
# Fifty Sinkhorn iterations are a hundred normalizations where softmax does one, and a
# naive implementation also keeps every iterate for backpropagation. This appendix measures
# the library's implementation against the plain log-domain loop that alternates `logsumexp`
# over rows and columns (the reference), and against softmax, on the device named in the
# header. The same table is printed by `benchmarks/sinkhorn.py`.
#
# **How it works.** The first row and column normalizations run in the log domain; after
# them every row and column of $K = e^{A + f + g}$ holds an entry of at least $1/n^2$, so the
# remaining 98 half-steps run in the scaling domain, $u = 1/(Kv)$, $v = 1/(K^\top u)$, one
# batched matrix-vector product each instead of an `exp` over the whole matrix; $u$ and $v$
# are rescaled after each step so that nothing overflows. On CPU the batch is processed in
# blocks that fit in the cache. The backward pass saves only the logits: it recomputes the
# iterations and differentiates the scaling steps by hand.

# %% tags=["parameters"]
profile = "ci"
device = "auto"
seed = 0

# %% tags=["remove-input"]
from rankcollapse_book.chapter import chapter_header

chapter = chapter_header(profile, device, seed)

# %%
import torch

from rankcollapse.timing import REFERENCE, sinkhorn_table

torch.manual_seed(seed)
table = sinkhorn_table(chapter.device, (256, 128, 128), repeats=7)
rows = table.set_index("implementation")
ours, softmax = rows.loc["rankcollapse.sinkhorn"], rows.loc["rankcollapse.softmax"]

# %% tags=["remove-cell"]
chapter.glue({"app_speedup": ours["speedup_vs_reference"],
              "app_error": ours["max_abs_error_vs_reference"],
              "app_memory": ours["saved_for_backward_MiB"] / softmax["saved_for_backward_MiB"],
              "app_reference_memory": rows.loc[REFERENCE, "saved_for_backward_MiB"]
              / ours["saved_for_backward_MiB"]})

# %%
table.drop(columns=["torch", "rankcollapse"]).style.format(
    {"median_ms": "{:.1f}", "speedup_vs_reference": "{:.1f}",
     "max_abs_error_vs_reference": "{:.1e}", "saved_for_backward_MiB": "{:.1f}"}, na_rep="–")

# %% [markdown]
# Logits: a batch of 256 matrices of size 128 × 128 with entries $\mathcal N(0, 4)$, float32,
# 50 iterations. The implementations run in turn, 7 times after a warm-up; the speed-up is the
# median over rounds of the reference's time divided by ours, so that a noisy machine slows
# both sides of each ratio alike.
#
# - **Speed**: {glue:text}`app_speedup:.1f` times faster than the reference, agreeing with
#   it to {glue:text}`app_error:.1e` in the largest absolute difference.
# - **Memory**: the bytes autograd keeps for backward are {glue:text}`app_memory:.2f` times
#   those of softmax, while the unrolled reference keeps
#   {glue:text}`app_reference_memory:.0f` times as much as ours.
#
# Timings on a shared machine move from run to run; the ratios, measured in the same process,
# move much less.
