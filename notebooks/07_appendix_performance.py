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
# over rows and columns (the reference), against softmax, and inside whole training steps,
# on the device named in the header. `benchmarks/sinkhorn.py` and
# `benchmarks/train_step.py` print the same tables.
#
# **How it works.** The first row and column normalizations give $K$, in which every row and
# column holds an entry of at least $1/n^2$; the remaining half-steps run in the scaling
# domain, $u = 1/(Kv)$, $v = 1/(K^\top u)$, one matrix-vector product each instead of an
# `exp` over the whole matrix. Each matrix's row error is checked as it goes: once it has
# fallen to the rounding level of float32 (about $10^{-7}\sqrt n$), further iterations only
# move rounding noise, so that matrix stops; a matrix that does not get there runs all
# {glue:text}`app_n_iter` iterations. The backward pass of a matrix that stopped is the gradient of the fixed point,
# by implicit differentiation (one small linear solve per matrix); a matrix that did not
# converge gets the exact gradient of the iterations it ran, recomputed and differentiated
# step by step. Saved for backward: the logits and the result. On a CPU in float32 these
# loops run in C, compiled with the machine's own compiler the first time they are needed,
# one matrix at a time, so that every matrix stops on its own; on a GPU (and where no
# compiler is found) the same arithmetic runs as batched PyTorch operations.
#
# ```{admonition} "50 iterations", exactly?
# :class: note
# Stopping early is this book's implementation choice, not the paper's. How far it moves
# the results is measured below on every build: the largest difference to running every
# iteration, and the gradient's difference to automatic differentiation through the same
# iterations, unrolled.
# ```

# %% tags=["parameters"]
profile = "ci"
device = "auto"
seed = 0

# %% tags=["remove-input"]
from rankcollapse_book.chapter import chapter_header

chapter = chapter_header(profile, device, seed)
settings = chapter.settings

# %%
from rankcollapse import names
from rankcollapse.experiments import appendix
from rankcollapse.timing import TABLE_HEADERS

result = appendix.run(settings, chapter.device, seed)  # every number of this chapter

# %% tags=["remove-cell"]
chapter.glue(result.glue)
chapter.glue_text(result.text)

# %%
result.kernel.drop(columns=["torch", "rankcollapse"]).rename(columns=TABLE_HEADERS).style.format(
    {"median time (ms)": "{:.1f}", "speed-up over the reference": "{:.1f}",
     "largest difference to the reference": "{:.1e}", "kept for backward (MiB)": "{:.1f}"},
    na_rep="–").hide(axis="index")

# %% [markdown]
# Logits: a batch of {glue:text}`app_batch` matrices of size {glue:text}`app_n` ×
# {glue:text}`app_n` with normal entries of standard deviation {glue:text}`app_kernel_scale:g`,
# float32, {glue:text}`app_n_iter` iterations. The
# implementations run in turn, {glue:text}`app_repeats` times after a warm-up; the speed-up is the
# median over rounds of the reference's time divided by ours, so that a noisy machine slows
# both sides of each ratio alike.
#
# - **Speed**: {glue:text}`app_speedup:.1f` times faster than the reference, agreeing with
#   it to {glue:text}`app_error` in the largest absolute difference.
# - **Memory**: the bytes autograd keeps for backward are {glue:text}`app_memory:.2f` times
#   those of softmax (the logits and the result), while the unrolled reference keeps
#   {glue:text}`app_reference_memory:.0f` times as much as ours.
#
# ## What stopping early changes
#
# For random logits of {glue:text}`app_scales` scales, at the same size: the largest absolute difference of
# the result to running all {glue:text}`app_n_iter` iterations, the share of matrices that
# stopped early, and the relative difference of the gradient to automatic differentiation
# through {glue:text}`app_n_iter` unrolled iterations in float64, on
# {glue:text}`app_gradient_matrices` of the matrices, separately for those whose marginal
# error after those iterations is below {glue:md}`app_tolerance:myst` (their share among the
# {glue:text}`app_gradient_matrices` in the last column) and for the others.

# %%
result.exactness.style.format("{:.2g}", na_rep="–").format_index("{:g}")

# %% [markdown]
# ## A whole training step
#
# What matters for the book is the cost of training: one AdamW step of the same Vision
# Transformer, with softmax and with Sinkhorn attention, forward (with the graph built),
# backward, and the whole step; interleaved rounds, the ratio Sinkhorn / softmax as the
# median of the per-round ratios. Two sets of weights: PyTorch's default initialisation,
# whose attention logits are small and converge in a few iterations, and Gaussian weights
# with logit scale {glue:text}`app_step_scale:g`, closer to a trained model. The `ci` profile times the `ci` models'
# shapes; the `full` profile adds the paper's shapes (24 layers, width 128, 50 tokens).

# %%
result.steps.drop(columns=["repeats"]).rename(columns={
    "softmax_ms": "softmax (ms)", "sinkhorn_ms": "Sinkhorn (ms)", "ratio": "Sinkhorn / softmax"}
).style.format({"softmax (ms)": "{:.1f}", "Sinkhorn (ms)": "{:.1f}",
                "Sinkhorn / softmax": "{:.2f}"}).hide(axis="index")

# %% [markdown]
# At the `ci` shapes a whole training step with Sinkhorn attention costs
# {glue:text}`app_step_init:.2f` times the softmax step at initialisation and
# {glue:text}`app_step_trained:.2f` times with logit scale {glue:text}`app_step_scale:g`. Trained
# models have larger logits, where more attention matrices converge slowly or run all
# {glue:text}`app_n_iter` iterations: the next
# section measures a step at their own weights.
#
# Timings on a shared machine move from run to run; the ratios, measured in the same process,
# move much less.
#
# ## A training step at trained logits
#
# The random weights above only imitate a trained model. Here the weights *are* chapter 5's:
# for each task, the Sinkhorn model of the first training seed, and the same weights run
# with softmax attention, each taking optimizer steps on the same real training batches in
# turn (learning rate 0, so that the weights stay the trained ones; rounds interleaved, the
# first one a warm-up). The last column is the share of that model's attention matrices
# (first batch, all layers and heads) whose Sinkhorn iteration stopped early at the rounding
# level, rather than running all iterations; the logit scale is the median over layers of
# the standard deviation of the logits.

# %%
shown = result.trained_steps.drop(columns=["repeats", "device", "threads"]).rename(columns={
    "softmax_ms": "softmax (ms)", "sinkhorn_ms": "Sinkhorn (ms)", "ratio": "Sinkhorn / softmax",
    "converged_share": "share stopped early", "logit_std": "logit scale"})
names.readable(shown.assign(dataset=shown["dataset"].map(names.dataset)),
               names.TASKS).style.format(
    {"softmax (ms)": "{:.1f}", "Sinkhorn (ms)": "{:.1f}", "Sinkhorn / softmax": "{:.2f}",
     "share stopped early": "{:.0%}", "logit scale": "{:.2f}"}).hide(axis="index")

# %% [markdown]
# {glue:md}`app_trained_steps`
