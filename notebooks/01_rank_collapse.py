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
# # Rank collapse
#
# A self-attention layer replaces every token by a weighted average of all tokens. Stack
# such layers and the averages of averages pull every token towards the same vector: the
# sequence *collapses* to rank one and carries no more information than a single token.
# Dong, Cordonnier and Loukas {cite}`dong2021attention` proved that without skip connections and feed-forward
# layers this happens *doubly exponentially* fast with depth; the paper this book accompanies
# {cite}`lapenna2026sinkhorn` restates that result for softmax attention and proves its Sinkhorn analogue (chapter 3).
#
# This chapter measures collapse, shows it in random-weight networks, checks which
# architectural parts stop it, and separates it from a different failure, *entropy collapse*.

# %% tags=["parameters"]
profile = "ci"
device = "auto"
seed = 0

# %% tags=["remove-input"]
from rankcollapse.provenance import chapter_header

chapter = chapter_header(profile, device, seed)
settings, torch_device = chapter.settings, chapter.device

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from myst_nb import glue

from rankcollapse.collapse import layernorm_rank_check, log_summary, sweep
from rankcollapse.figures import band_from_summary, use_style
from rankcollapse.rank import composite_norm, relative_residual, residual

use_style()
sizes = dict(n_samples=settings.n_samples, n_tokens=settings.n_tokens,
             d_model=settings.d_model, n_heads=settings.n_heads, depth=settings.depth,
             n_iter=settings.n_iter, seed=seed, device=torch_device,
             weight_draws=settings.weight_draws)

# %% [markdown]
# ## Measuring collapse: the residual
#
# Write the $n$ token vectors of a layer as the rows of $X \in \mathbb{R}^{n \times d}$.
# The part all tokens share is a row vector $x$ repeated $n$ times, $\mathbf{1} x^\top$; the
# **residual** is what is left,
#
# $$\operatorname{res}(X) = X - \mathbf{1} x^\top .$$
#
# Dong et al.'s theory takes the $x$ that makes the residual smallest; their plotting code,
# and this book, take the token mean, $x = \tfrac1n X^\top \mathbf 1$. Its size is measured
# with the composite norm $\|M\|_{1,\infty} = \sqrt{\|M\|_1 \|M\|_\infty}$ (largest column
# sum of absolute values times largest row sum, square root), and divided by the size of $X$:
#
# $$r(X) = \frac{\|\operatorname{res}(X)\|_{1,\infty}}{\|X\|_{1,\infty}} .$$
#
# The ratio is what matters: every layer rescales its output, and an absolute residual would
# mix that scale with collapse. $r = 0$ means all tokens are equal; for random tokens
# $r \approx 1$. A tiny example with four tokens in three dimensions, the last two
# nearly equal to the first:

# %%
x = torch.tensor([[1.0, 2.0, 0.0], [1.1, 2.0, 0.1], [0.9, 2.1, 0.0], [1.0, 1.9, -0.1]],
                 dtype=torch.float64)
example = pd.DataFrame({"token": range(4), "X": [row.tolist() for row in x],
                        "res(X)": [np.round(row.tolist(), 3) for row in residual(x)]})
glue("ch1_example_r", relative_residual(x).item(), display=False)
glue("ch1_example_norm", composite_norm(x).item(), display=False)
example

# %% [markdown]
# The tokens differ only in the first decimal, so the residual is small next to $X$:
# $\|X\|_{1,\infty}$ = {glue:text}`ch1_example_norm:.2f` and
# $r(X)$ = {glue:text}`ch1_example_r:.3f`.
#
# ## Pure self-attention collapses doubly exponentially
#
# A *pure* self-attention network has no skip connections, no feed-forward network (FFN)
# and no LayerNorm: layer $l$ maps $X_l$ to $X_{l+1} = \mathrm{softmax}(X_l W_Q W_K^\top
# X_l^\top / \sqrt{d_{qk}})\, X_l W_V W_O$. We draw Gaussian weights scaled so that the
# first layer's attention logits have a chosen standard deviation (the *logit scale*;
# {glue:text}`ch1_draws` independent weight draws per scale), feed {glue:text}`ch1_n_samples` random token matrices
# with i.i.d. standard normal entries, and follow $r$ layer by layer. The computation runs in float64 so the residual can fall to
# about $10^{-16}$ before rounding stops it.

# %%
scales = [0.1, 0.5, 1.0, 2.0]
pure = sweep([dict(normalization="softmax", logit_std=s) for s in scales],
             dtype=torch.float64, **sizes)
pure_summary = log_summary(pure, ["logit_std", "layer"])
glue("ch1_n_samples", settings.n_samples, display=False)
glue("ch1_draws", settings.weight_draws, display=False)

# %% mystnb={"figure": {"caption": "Relative residual $r(X_l)$ (composite norm, log scale) against depth in pure softmax self-attention with random weights, for four logit scales. Lines: geometric mean over random inputs and weight draws; bands: one standard deviation of $\\log_{10} r$. The dotted line is float64 rounding: once there, the tokens are equal to machine precision.", "name": "fig-pure-collapse"}}
fig, ax = plt.subplots(figsize=(6, 3.8))
for s, group in pure_summary.groupby("logit_std"):
    band_from_summary(ax, group, label=f"logit scale {s:g}")
ax.axhline(1e-16, color="grey", linestyle=":", linewidth=1)
ax.set(xlabel="layer $l$ (0 = input)", ylabel="relative residual $r(X_l)$",
       title="Pure softmax self-attention")
ax.legend()
chapter.show(fig, "fig-pure-collapse", pure_summary)

# %% [markdown]
# {numref}`fig-pure-collapse` shows the collapse: whatever the logit scale, the residual
# reaches rounding level within a handful of layers. The smaller the logits, the more uniform
# the attention and the faster the collapse.
#
# *Doubly* exponential means that $-\log r$ itself grows exponentially: under the cubic law
# $r_{l+1} \le c\, r_l^3$ of Dong et al. (and of the paper for Sinkhorn), each layer roughly
# triples the number of lost digits. {numref}`fig-double-exp` plots $-\log_{10} r$ on a log
# axis: doubly exponential decay is a straight line there, and the grey lines have the
# slope of a factor 3 per layer.

# %%
floor = -15.0  # log10 r below this is rounding noise, not collapse
digits = pure_summary.assign(lost=-pure_summary["mean"]).query("mean > @floor and layer > 0")
growth = (digits.sort_values("layer").groupby("logit_std")["lost"]
          .apply(lambda s: np.exp(np.mean(np.diff(np.log(s.values)))) if len(s) > 1 else np.nan))
glue("ch1_growth_min", float(growth.min()), display=False)
glue("ch1_growth_max", float(growth.max()), display=False)

# %% mystnb={"figure": {"caption": "Digits lost, $-\\log_{10} r(X_l)$, on a log axis against depth, pure softmax self-attention (same runs as the previous figure, layers above the rounding floor). Straight lines mean doubly exponential collapse; grey dashed lines grow by a factor 3 per layer, the cubic law's rate.", "name": "fig-double-exp"}}
fig, ax = plt.subplots(figsize=(6, 3.8))
for s, group in digits.groupby("logit_std"):
    ax.plot(group["layer"], group["lost"], marker="o", label=f"logit scale {s:g}")
for start in (0.01, 0.1, 1.0):
    layers = np.arange(1, 6)
    ax.plot(layers, start * 3.0 ** (layers - 1), color="grey", linestyle="--", linewidth=0.8)
ax.set(yscale="log", xlabel="layer $l$", ylabel="digits lost, $-\\log_{10} r(X_l)$",
       ylim=(1e-3, 30), xticks=layers, title="Doubly exponential collapse")
ax.legend()
chapter.show(fig, "fig-double-exp", digits)

# %% [markdown]
# On average each layer multiplies the number of lost digits by
# {glue:text}`ch1_growth_min:.1f` to {glue:text}`ch1_growth_max:.1f` depending on the logit
# scale ({numref}`fig-double-exp`), at least the factor 3 of the cubic law: the collapse is
# doubly exponential, as Dong et al. proved and the paper restates. (The first layers lose
# digits faster than cubically because the constant $c$ is small for random weights.)
#
# ## What stops the collapse
#
# Real Transformer blocks add three parts around attention: a skip connection
# ($X + \mathrm{SA}(X)$), a feed-forward network, and LayerNorm (here *pre*-LN, inside each
# branch, as in ViT; see chapter 5's models). We switch them on one at a time, with the same
# weights scale (logit scale 1) and inputs as above.

# %%
variants = {"pure attention": {}, "+ skip": dict(skip=True), "+ FFN": dict(ffn=True),
            "+ LayerNorm": dict(layernorm=True), "+ skip + FFN": dict(skip=True, ffn=True),
            "full block": dict(skip=True, ffn=True, layernorm=True)}
parts = sweep([dict(normalization="softmax", logit_std=1.0, label=k, **v)
               for k, v in variants.items()], dtype=torch.float64, **sizes)
parts_summary = log_summary(parts, ["label", "layer"])
last = parts_summary.query("layer == @settings.depth").set_index("label")["mean"]
for key, name in [("pure", "pure attention"), ("skip", "+ skip"), ("ffn", "+ FFN"),
                  ("ln", "+ LayerNorm"), ("full", "full block")]:
    glue(f"ch1_last_{key}", float(10 ** last[name]), display=False)
glue("ch1_depth", settings.depth, display=False)

# %% mystnb={"figure": {"caption": "Relative residual against depth (log scale) with the parts of a Transformer block switched on one at a time; random weights, logit scale 1, softmax. Lines: geometric mean over inputs and weight draws; bands: one standard deviation of $\\log_{10} r$.", "name": "fig-block-parts"}}
fig, ax = plt.subplots(figsize=(6, 3.8))
for name in variants:
    band_from_summary(ax, parts_summary.query("label == @name"), label=name)
ax.axhline(1e-16, color="grey", linestyle=":", linewidth=1)
ax.set(xlabel="layer $l$ (0 = input)", ylabel="relative residual $r(X_l)$",
       title="Which parts stop the collapse")
ax.legend(ncol=2)
chapter.show(fig, "fig-block-parts", parts_summary)

# %% [markdown]
# After {glue:text}`ch1_depth` layers ({numref}`fig-block-parts`): pure attention is at
# rounding level ({glue:text}`ch1_last_pure:.1e`); the FFN alone does not stop the collapse
# ({glue:text}`ch1_last_ffn:.1e`), nor does LayerNorm alone
# ({glue:text}`ch1_last_ln:.1e`: it rescales each token, so it stops the residual only at
# the level where rounding noise is rescaled). The skip connection is what keeps the tokens
# apart ({glue:text}`ch1_last_skip:.2f`), and the full block keeps the most
# ({glue:text}`ch1_last_full:.2f`). This matches Dong et al. and the paper's remark that
# skip connections are crucial.
#
# ## Does LayerNorm preserve rank?
#
# One of the related works (see `seeds/002` in the project notes) states that LayerNorm is
# "precisely affine-rank-neutral": it keeps the dimension of the affine hull of the token set.
# LayerNorm first removes each token's own feature mean, then divides each token by its own
# standard deviation. We test the claim on token sets built with a known affine rank $k$
# (a common point plus $k$ random directions), {glue:text}`ch1_ln_draws` draws per $k$.

# %%
ln_check = layernorm_rank_check(n_tokens=settings.n_tokens, d_model=settings.d_model,
                                ranks=[1, 2, 4, 8], draws=20, seed=seed)
ln_table = ln_check.groupby("rank_in")[["affine_before", "affine_after", "linear_before",
                                        "linear_after"]].agg(lambda s: f"{s.min()}–{s.max()}")
glue("ch1_ln_draws", 20, display=False)
glue("ch1_ln_affine_changed", int((ln_check.affine_after != ln_check.affine_before).sum()),
     display=False)
glue("ch1_ln_linear_changed", int((ln_check.linear_after != ln_check.linear_before).sum()),
     display=False)
glue("ch1_ln_total", len(ln_check), display=False)
ln_table.rename_axis("affine rank k built in")

# %% [markdown]
# The table gives the range over draws of each rank. **The claim, as we read it, does not
# hold**: in {glue:text}`ch1_ln_affine_changed` of {glue:text}`ch1_ln_total` draws the affine
# rank went *up* by one. Dividing each token by its own standard deviation projects the
# tokens radially onto a sphere, which bends a flat $k$-dimensional set into a curved one
# whose affine hull has one more dimension. What LayerNorm preserves exactly is the *linear*
# rank of the tokens after each token's feature mean is removed (its first step): unchanged
# in all but {glue:text}`ch1_ln_linear_changed` draws, since rescaling rows never changes a
# matrix's rank. Either way LayerNorm cannot *create* diversity that attention destroyed,
# which is why it did not stop the collapse above. (The related work's exact definition was
# not available to us; with a different definition its statement may well hold.)
#
# ## Rank collapse is not entropy collapse
#
# *Entropy collapse* is a different failure: the attention rows become peaked, each query
# attending to very few keys. The row entropy $-\sum_j P_{ij}\log P_{ij}$ measures it; it is
# $\log n$ for uniform rows and 0 for one-hot rows. The two can go in opposite directions.
# Uniform attention (small logits) has maximal entropy and collapses rank fastest, because
# every token becomes the same average. Peaked attention with a skip connection copies
# tokens almost unchanged: entropy falls, rank survives.

# %%
pairs = [dict(normalization="softmax", logit_std=0.1, label="pure, logit scale 0.1"),
         dict(normalization="softmax", logit_std=4.0, skip=True,
              label="with skip, logit scale 4")]
contrast = sweep(pairs, dtype=torch.float64, **sizes)
entropy = contrast.dropna(subset=["entropy"]).groupby(["label", "layer"])["entropy"].agg(["mean", "std"])
res_summary = log_summary(contrast, ["label", "layer"])
glue("ch1_log_n", float(np.log(settings.n_tokens)), display=False)
ends = entropy.reset_index().query("layer == @settings.depth").set_index("label")["mean"]
glue("ch1_entropy_uniform", float(ends[pairs[0]["label"]]), display=False)
glue("ch1_entropy_peaked", float(ends[pairs[1]["label"]]), display=False)

# %% mystnb={"figure": {"caption": "Two different collapses. Left: relative residual (log scale). Right: mean row entropy of the attention in nats (dotted: $\\log n$, uniform rows). Small logits without skip keep the entropy maximal while the rank collapses; large logits with a skip connection drive the entropy down while the rank survives. Bands: one standard deviation over inputs and weight draws.", "name": "fig-rank-vs-entropy"}}
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
for pair in pairs:
    name = pair["label"]
    line = band_from_summary(left, res_summary.query("label == @name"), label=name)
    e = entropy.loc[name].reset_index()
    right.plot(e["layer"], e["mean"], color=line.get_color(), label=name)
    right.fill_between(e["layer"], e["mean"] - e["std"], e["mean"] + e["std"],
                       color=line.get_color(), alpha=0.2, linewidth=0)
right.axhline(np.log(settings.n_tokens), color="grey", linestyle=":")
left.set(xlabel="layer $l$", ylabel="relative residual $r(X_l)$", title="Rank")
right.set(xlabel="layer $l$", ylabel="row entropy of attention (nats)", title="Entropy")
left.legend()
chapter.show(fig, "fig-rank-vs-entropy",
             pd.concat([res_summary.assign(quantity="log10 residual"),
                        entropy.reset_index().assign(quantity="entropy (nats)")]))

# %% [markdown]
# In {numref}`fig-rank-vs-entropy` the uniform-attention network keeps its row entropy at
# {glue:text}`ch1_entropy_uniform:.2f` nats (the maximum is $\log n$ =
# {glue:text}`ch1_log_n:.2f`) while its tokens collapse; the peaked network with skips ends
# at {glue:text}`ch1_entropy_peaked:.2f` nats while its residual stays near one. The two
# measures answer different questions, and the rest of this book is about the first.
#
# ```{admonition} What this chapter reproduces and adds
# :class: tip
# Reproduced: the doubly exponential collapse of pure softmax attention and the role of skip
# connections (Dong et al. 2021, restated by the paper). Added by this book: the layer-by-layer
# effect of each block part in one figure, a numerical check of the LayerNorm claim of a
# related work (it fails for the affine rank, holds for the linear rank), and a direct
# contrast of rank and entropy collapse. The weights are random, not trained: chapter 5
# looks at trained models.
# ```
