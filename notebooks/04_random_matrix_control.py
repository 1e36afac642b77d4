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
# # The random-matrix control, and the paper's hypothesis put to the test
#
# In trained Transformers the paper {cite}`lapenna2026sinkhorn` finds that products of Sinkhorn attention matrices along
# paths through the layers lose rank more slowly than products of softmax matrices
# (chapter 5). As a control it repeats the measurement with *random* matrices normalized
# either way, and finds **no** Sinkhorn advantage, also when half of the factors are replaced
# by the identity to mimic skip connections. Its explanation, stated as a hypothesis: along a
# real path the attention matrices are correlated, because each layer's input is the
# previous layer's output.
#
# This chapter reproduces the control, quantifies parity instead of judging it by eye, and
# tests the hypothesis three ways: (a) with correlated random logits, (b) with attention
# matrices computed by a random-weight network, where each layer really does see the
# previous layer's output, and (c) on the hidden states of such networks.

# %% tags=["parameters"]
profile = "ci"
device = "auto"
seed = 0

# %% tags=["remove-input"]
from rankcollapse_book.chapter import chapter_header

chapter = chapter_header(profile, device, seed)
settings = chapter.settings

# %%
from rankcollapse.experiments import random_matrix_control as rm
from rankcollapse.experiments.random_matrix_control import figures

result = rm.run(settings, chapter.device, seed)  # every number of this chapter

# %% tags=["remove-cell"]
chapter.glue(result.glue)
chapter.glue_text(result.text)

# %% [markdown]
# ## The measurement
#
# A *path* of depth $k$ picks $k$ distinct layers $l_1 < \dots < l_k$, one random head in
# each and one random input; its product is $P = A_{l_1,h_1} A_{l_2,h_2} \cdots A_{l_k,h_k}$
# (the order of prior code). Products of stochastic matrices drift towards rank one, so we
# measure the relative residual of $P$ against its best rank-1 approximation (SVD),
# $\|P - P_1\|_{1,\infty} / \|P\|_{1,\infty}$, for {glue:text}`ch4_paths` paths at each
# depth from 1 to {glue:text}`ch4_layers` in each pool of matrices (below). Softmax and Sinkhorn are always applied to the
# *same* logits and measured on the *same* paths, so the comparison is paired.
#
# ```{admonition} What counts as an independent sample, and how many paths
# :class: note
# Paths drawn from one set of matrices share those matrices: many paths through
# {glue:text}`ch4_layers` layers of a few random matrices are far from a hundred independent
# observations, and resampling them as if they were makes any small difference look
# certain. So every experiment here is repeated on {glue:text}`ch4_pools` independent
# *pools* (a fresh draw of all the matrices, or a fresh random network and its inputs), each
# pool is summarised by its median path residual, and the comparison is over pools. The
# results of its intervals (*higher*, *lower*, *parity* within a factor
# {glue:text}`ch4_margin:g`, ...) follow the claims ledger's
# {ref}`verdict rules <verdict-rules>`, stated there once. A claim is decided by one registered test per setting: the mean over depths 2
# to {glue:text}`ch4_layers` of each pool's log ratio (depth 1 is one matrix, not a
# product). The paper samples 100 paths per depth from one
# set of matrices; here each pool gives {glue:text}`ch4_paths` paths per depth
# ({glue:text}`ch4_all_paths` per depth in all; the `full` profile takes 100 per pool).
# ```
#
# ## The paper's control: independent random logits
#
# ```{admonition} Distribution of the random matrices
# :class: note
# The paper's exact distribution is not known to us. We draw the logits i.i.d.
# $\mathcal N(0, \sigma^2)$, with $\sigma$ = {glue:text}`ch4_pool_scale:g` (what the scaled dot product gives for
# unit-variance queries and keys), as {glue:text}`ch4_layers` layers × {glue:text}`ch4_heads` heads ×
# {glue:text}`ch4_batch` inputs of size $n\times n$ per pool, and normalize them by softmax or
# by Sinkhorn ({glue:text}`ch4_iter` iterations).
# ```

# %% [markdown]
# The identity variant replaces the attention of the same random half of the layers by the
# identity, for both normalizations, *after* normalization (the identity is not the
# normalization of any finite logits).

# %% mystnb={"figure": {"caption": "The paper's random-matrix control. Relative residual of path products against their best rank-1 approximation (composite norm, log scale) against path depth, softmax (blue) and Sinkhorn (red) built from the same i.i.d. normal logits of standard deviation {glue:text}`ch4_pool_scale:g`, same paths, all pools together. Left: all factors random. Right: half of the layers replaced by the identity. Boxes: quartiles over paths; whiskers 1.5 IQR. Where the red boxes sit above the blue ones at the same depth, Sinkhorn's products keep more rank.", "name": "fig-control-boxes"}}
chapter.show(figures.control_boxes(result), "fig-control-boxes", result.control)

# %% mystnb={"figure": {"caption": "Ratio Sinkhorn / softmax of the median rank-1 residual of path products against path depth: geometric mean over independent pools with its Student t interval over pools (simultaneous {glue:text}`ch4_level:.0%` over the depths of each setting), for the control with independent logits and its half-identity variant. Above the line at 1 Sinkhorn keeps more rank; the grey band is the parity margin. Where a curve and its band lie above the grey band, Sinkhorn keeps more rank at that depth.", "name": "fig-control-ratio"}}
chapter.show(figures.control_ratio(result), "fig-control-ratio", result.advantage)

# %% [markdown]
# **Result** ({numref}`fig-control-ratio`). Independent logits: the ratio runs from
# {glue:text}`ch4_ind_min:.2f` to {glue:text}`ch4_ind_max:.2f` over depths;
# {glue:md}`ch4_ind_verdict` Half of the layers replaced by the identity: from
# {glue:text}`ch4_idt_min:.2f` to {glue:text}`ch4_idt_max:.2f`; {glue:md}`ch4_idt_verdict`
#
# The product order follows prior code (earlier layers on the left). In the order in which the
# layers act on the tokens, $A_{l_k} \cdots A_{l_1}$, the same control gives:
# {glue:md}`ch4_signal_verdict`
#
# The paper reports parity for this control, i.e. no Sinkhorn advantage. Where the verdict
# is *less*, random doubly stochastic products reach rank one *faster* than random softmax
# products. (One possible reason, not tested here: a doubly stochastic product keeps the
# uniform vector fixed on both sides, a row-stochastic one only on one side.)
#
# ### Other logit scales and sizes
#
# One logit scale and one size could be a special case. The same control is repeated for
# $n$ = {glue:text}`ch4_sweep_sizes` tokens and logit scales $\sigma$ =
# {glue:text}`ch4_sweep_scales`, at path depths {glue:text}`ch4_sweep_depths`, each cell
# over {glue:text}`ch4_pools` independent pools.
#
# ```{admonition} Beyond the paper
# :class: note
# The paper shows the control at one setting; this sweep is the book's addition.
# ```

# %% mystnb={"figure": {"caption": "The control over logit scales (horizontal, log scale) and sizes $n$ (line colours): ratio Sinkhorn / softmax of the median rank-1 residual of path products, geometric mean over independent pools with its Student t interval over pools (simultaneous {glue:text}`ch4_level:.0%` over the depths of each size and scale), one panel per path depth. Above 1 Sinkhorn keeps more rank; the grey band is the parity margin. Follow a curve from left to right to see how Sinkhorn's advantage changes with the logit scale.", "name": "fig-control-sweep"}}
chapter.show(figures.control_sweep(result), "fig-control-sweep", result.sweep)

# %% [markdown]
# {glue:md}`ch4_sweep_verdict` ({numref}`fig-control-sweep`.) Where Sinkhorn keeps less, its
# random products reach rank one faster than softmax's; the figure shows how the ratio
# moves with depth, logit scale and $n$.
#
# ## The hypothesis, test (a): correlated random logits
#
# If correlation between the layers' logits were enough, correlated random logits should
# produce the advantage. We draw the logit matrices as $\Lambda_{l+1} = \rho \Lambda_l +
# \sqrt{1-\rho^2}\, G_l$ with $G_l$ i.i.d. $\mathcal N(0, 1)$ (and normalize each
# $\Lambda_l$ into the attention matrix $A_l$), so every layer has the same marginal
# distribution and consecutive layers have correlation $\rho$.

# %% mystnb={"figure": {"caption": "Test (a): ratio Sinkhorn / softmax of the median rank-1 residual of path products against path depth for random logits with correlation $\\rho$ between consecutive layers; geometric mean over independent pools with Student t intervals (simultaneous {glue:text}`ch4_level:.0%` over the depths of each ρ); grey band: the parity margin. Where a curve and its band lie above the grey band, Sinkhorn keeps more rank at that depth; compare the curves to see whether correlation changes it.", "name": "fig-correlated"}}
chapter.show(figures.correlated(result), "fig-correlated", result.correlated)

# %% [markdown]
# {glue:md}`ch4_corr_verdict` ({numref}`fig-correlated`.) This is the test of whether correlation between the layers' logits, of this simple Gaussian kind, can
# produce an advantage; it is description, with intervals simultaneous over the depths of
# each $\rho$, and no claim of the paper rests on it.
#
# ## The hypothesis, test (b): attention computed from the previous layer's output
#
# In a network, layer $l+1$'s logits are computed from layer $l$'s output: the dependence is
# not just correlation but a deterministic chain. We build random-weight networks (chapter 1's
# stacks, {glue:text}`ch4_layers` layers), with and without skip connections (with skips we
# also use pre-LayerNorm, as in a real block; no FFN), at logit scales
# {glue:text}`ch4_network_scales`, feed random token matrices, record every attention
# matrix, and run the same path analysis; each pool is one
# network with its own weights and inputs. Softmax and Sinkhorn networks share weights and
# inputs.

# %% mystnb={"figure": {"caption": "Test (b): ratio Sinkhorn / softmax of the median rank-1 residual of path products against path depth, attention computed by random-weight networks (float64) with skip connections and LayerNorm, and without both (pure), at the logit scales the text names, and for independent random matrices at the same scales (the control); geometric mean over independent networks or pools with Student t intervals (simultaneous {glue:text}`ch4_level:.0%` over the depths of each curve); grey band: the parity margin. A network curve above its control's is what the chain adds. Depths where most networks' products are rank one to float64 precision for both normalizations give no interval and are not drawn: the pure networks, which collapse within a few layers, appear only where they give one. Where a curve and its band lie above the grey band, Sinkhorn keeps more rank at that depth.", "name": "fig-network-chains"}}
chapter.show(figures.network_chains(result), "fig-network-chains", result.chains)

# %% [markdown]
# The pure networks collapse within a few layers (chapter 1), after which every attention
# matrix is uniform and every path product is rank one for both normalizations. A pool whose
# median product is rank one to machine precision (the float64 rounding floor) is a
# censored value: it enters at the floor, and a depth where most pools are at the floor for
# both normalizations gives no verdict. Per network (description, one line per network):
#
# ```{glue:md} ch4_networks
# :format: myst
# ```
#
# These lines are to be read against the random control: what the chain structure (each
# layer's attention computed from the previous layer's output) adds is the difference
# between a network's ratio and that of independent random matrices at the same logit
# scale. Networks and control pools are independent groups, so the two ratios are compared
# as such (Welch's $t$ interval of the difference of their mean logs), from depth 2 on
# (depth 1 is a single matrix, not a chain), depth by depth:
#
# ```{glue:md} ch4_beyond
# :format: myst
# ```
#
# These comparisons describe random networks; the paper's hypothesis (C6d) is decided on
# trained models in chapter 6.
#
# ## The hypothesis, test (c): the hidden states themselves
#
# Path products are the paper's device; what a network passes on is its hidden state. The
# direct test therefore measures chapter 1's relative residual of the hidden states of
# random networks with skip connections (no FFN), with pre-LayerNorm as in a real block and
# without it, softmax against Sinkhorn on the same weights and inputs, at logit scales
# {glue:text}`ch4_hidden_scales`, computed in float64. The unit is the network:
# {glue:text}`ch4_pools` independent weight draws per scale, each summarised by its median
# over {glue:text}`ch4_hidden_inputs` random inputs (the same inputs for every network).

# %% mystnb={"figure": {"caption": "Test (c): ratio Sinkhorn / softmax of the relative residual of the hidden states against the layer, random-weight networks with skip connections (no FFN), with pre-LayerNorm (left) and without (right), at the logit scales the text names (line colours); geometric mean over independent networks with its Student t interval (simultaneous {glue:text}`ch4_level:.0%` over the layers and scales of each panel); grey band: the parity margin. Above 1 Sinkhorn keeps more rank. Where a curve and its band lie above the grey band, Sinkhorn keeps more rank at that layer.", "name": "fig-hidden-test"}}
chapter.show(figures.hidden_test(result), "fig-hidden-test", result.hidden)

# %% [markdown]
# Layer by layer ({numref}`fig-hidden-test`; description), with LayerNorm:
#
# ```{glue:md} ch4_hidden_ln
# :format: myst
# ```
#
# Without LayerNorm:
#
# ```{glue:md} ch4_hidden_noln
# :format: myst
# ```
#
# These networks are untrained and, in the `ci` profile, small: the comparisons describe
# them. Chapter 6 asks the question of trained models (breaking the correlation along their
# paths), and that test decides C6d.
#
# ````{admonition} What this chapter finds
# :class: tip
# The paper's random control (C6a, C6b), decided on this run's numbers with the rule above:
#
# ```{glue:md} ch4_claims
# :format: myst
# ```
# ````

# %% tags=["remove-cell"]
chapter.glue_claims("ch4_claims", result.claims, "04_random_matrix_control")
