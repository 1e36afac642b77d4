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
from rankcollapse_book.chapter import chapter_header

chapter = chapter_header(profile, device, seed)
settings = chapter.settings

# %%
from rankcollapse.experiments import rank_collapse as rc
from rankcollapse.experiments.rank_collapse import figures

result = rc.run(settings, chapter.device, seed)  # every number of this chapter

# %% tags=["remove-cell"]
chapter.glue(result.glue)
chapter.glue_text(result.text)

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
result.example

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
# with i.i.d. standard normal entries, and follow $r$ layer by layer. The computation runs in
# float64 so the residual can fall to about $10^{-15}$ before rounding stops it; values at
# that floor ({glue:text}`ch1_floor`) are censored: they enter the averages at the floor
# (the true value is at most that), and a layer where most values are there is not drawn.

# %% mystnb={"figure": {"caption": "Relative residual $r(X_l)$ (composite norm, log scale) against depth in pure softmax self-attention with random weights, one line per logit scale. Lines: geometric mean over random inputs and weight draws; bands: one standard deviation of $\\log_{10} r$. The dotted line is the float64 rounding floor: values there enter the averages at the floor (censored), and a layer where most values are at the floor is not drawn. Look at how steeply each curve falls: a steeper fall at a larger logit scale means a faster collapse.", "name": "fig-pure-collapse"}}
chapter.show(figures.pure_collapse(result), "fig-pure-collapse", result.pure)

# %% [markdown]
# {numref}`fig-pure-collapse` shows the collapse: at every logit scale the residual falls
# by many orders of magnitude within a handful of layers, until most values sit at the
# float64 rounding floor (from there on the curves are not drawn). This book calls a stack
# *collapsed* when its relative residual after the last layer is below
# {glue:md}`ch1_collapsed:myst` or at the rounding floor; the paper's claim C1 is checked
# that way at every logit scale (the chapter's summary below), and chapter 2 uses the same
# threshold.
#
# *Doubly* exponential means that $-\log r$ itself grows exponentially: under the cubic law
# $r_{l+1} \le c\, r_l^3$ of Dong et al. (and of the paper for Sinkhorn), each layer roughly
# triples the number of lost digits. Float64 cannot show this: it holds about 16 digits, so
# the curves above stay above its floor for at most {glue:text}`ch1_float_layers` layers, too
# few points to tell a doubly exponential law from any other fast decay. The
# same pure softmax stack is therefore also computed with {glue:text}`ch1_digits`
# significant digits, small enough for Python arithmetic ($n$ = {glue:text}`ch1_precise_n`
# tokens of width {glue:text}`ch1_precise_n`, one head per layer,
# {glue:text}`ch1_precise_draws` independent draws of tokens and weights per logit scale,
# residual in the spectral norm relative to $\|X_l\|_2$).
#
# ```{admonition} Precision beyond float64
# :class: note
# This high-precision run is this book's addition, not the paper's: inputs and weights are
# ordinary float64 numbers, only the arithmetic keeps {glue:text}`ch1_digits` digits, so a
# residual of $10^{-500}$ is measured instead of rounded to zero.
# ```

# %% mystnb={"figure": {"caption": "Digits lost, $-\\log_{10} r(X_l)$, on a log axis against depth, pure softmax self-attention with random weights computed with high-precision arithmetic (digits in the text). Markers: mean over independent draws of tokens and weights; bars: smallest to largest draw. Straight lines mean doubly exponential collapse; the grey dashed line grows by a factor 3 per layer, the cubic law's rate. Where the markers follow a straight line parallel to the grey one, the digits lost triple per layer.", "name": "fig-double-exp"}}
chapter.show(figures.digits_lost(result.lost), "fig-double-exp", result.lost)

# %% [markdown]
# Once the residual is below {glue:text}`ch1_min_lost_r:g` ({glue:text}`ch1_min_lost:g`
# digit lost), each layer multiplies the number of lost
# digits by {glue:text}`ch1_growth_min:.2f` to {glue:text}`ch1_growth_max:.2f` depending on
# the logit scale (least-squares fit of $\log(-\log_{10} r)$ against the layer over at least
# {glue:text}`ch1_fit_points` layers per scale; {numref}`fig-double-exp`). The cubic law's
# rate is 3, and a constant factor above 1 is what doubly exponential collapse means (Dong
# et al. proved it for softmax, the paper for Sinkhorn). The first layers lose digits more
# slowly: while $r$ is near 1 the cubic term is not yet the leading one.
#
# ## What slows the collapse
#
# Real Transformer blocks add three parts around attention: a skip connection
# ($X + \mathrm{SA}(X)$), a feed-forward network, and LayerNorm (here *pre*-LN, inside each
# branch, as in ViT; see chapter 5's models). We switch them on one at a time, with the same
# weights scale (logit scale {glue:text}`ch1_parts_scale:g`) and inputs as above.

# %% mystnb={"figure": {"caption": "Relative residual against depth (log scale) with the parts of a Transformer block switched on one at a time; random weights, logit scale {glue:text}`ch1_parts_scale:g`, softmax. Lines: geometric mean over inputs and weight draws; bands: one standard deviation of $\\log_{10} r$; dotted: the float64 rounding floor (layers mostly at the floor are not drawn). A curve that stays level keeps the tokens apart; one that falls towards the floor collapses.", "name": "fig-block-parts"}}
chapter.show(figures.block_parts(result), "fig-block-parts", result.parts)

# %% [markdown]
# After {glue:text}`ch1_depth` layers ({numref}`fig-block-parts`), the configurations
# {glue:md}`ch1_parts`. Dong et al. and the paper report that
# the skip connection is what prevents collapse; here skip connections alone end at
# {glue:text}`ch1_last_skip:.2f` and the full block at {glue:text}`ch1_last_full:.2f`.
#
# ## Does LayerNorm preserve rank?
#
# A recent preprint on rank collapse {cite}`cirrincione2026rank` (we know only its abstract)
# states that LayerNorm is "precisely affine-rank-neutral": it keeps the dimension of the
# affine hull of the token set.
# LayerNorm first removes each token's own feature mean, then divides each token by its own
# standard deviation. We test the claim on token sets built with a known affine rank $k$
# (a common point plus $k$ random directions), {glue:text}`ch1_ln_draws` draws per $k$.

# %%
result.layernorm

# %% [markdown]
# The table gives the range over draws of each rank. {glue:md}`ch1_ln_verdict`
#
# Why the affine rank can change: dividing each token by its own standard deviation projects
# the tokens radially onto a sphere, which bends a flat $k$-dimensional set into a curved one
# whose affine hull generically has one more dimension. The *linear* rank of the tokens after
# each token's feature mean is removed (LayerNorm's first step) cannot change, since
# rescaling rows never changes a matrix's rank. Either way LayerNorm cannot *create*
# diversity that attention destroyed. (The preprint's exact definition was not available to
# us; with a different definition its statement may well hold.)
#
# ## Rank collapse is not entropy collapse
#
# *Entropy collapse* is a different failure: the attention rows become peaked, each query
# attending to very few keys. The row entropy $-\sum_j P_{ij}\log P_{ij}$ measures it; it is
# $\log n$ for uniform rows and 0 for one-hot rows. The two can go in opposite directions.
# Uniform attention (small logits) has maximal entropy and collapses rank fastest, because
# every token becomes the same average. Peaked attention with a skip connection copies
# tokens almost unchanged: entropy falls, rank survives.

# %% mystnb={"figure": {"caption": "Two different collapses. Left: relative residual (log scale). Right: mean row entropy of the attention in nats (dotted: $\\log n$, uniform rows). Bands: one standard deviation over inputs and weight draws (of $\\log_{10} r$ on the left, of the entropy on the right). Compare the two panels: curves that fall fast on the left should have low entropy on the right if sharp attention drives the collapse.", "name": "fig-rank-vs-entropy"}}
chapter.show(figures.rank_vs_entropy(result), "fig-rank-vs-entropy", result.rank_vs_entropy)

# %% [markdown]
# {numref}`fig-rank-vs-entropy` sets the two side by side ($\log n$ =
# {glue:text}`ch1_log_n:.2f`). {glue:md}`ch1_contrast` The two measures answer different
# questions, and the rest of this book is about the first.
#
# ````{admonition} What this chapter finds
# :class: tip
# The paper's claim, decided on this run's numbers (the rule and its thresholds are stated
# with each verdict):
#
# ```{glue:md} ch1_claims
# :format: myst
# ```
#
# Beyond the paper: the layer-by-layer effect of each block part in one figure, a numerical
# check of the LayerNorm statement of a recent preprint (the affine rank changed in
# {glue:text}`ch1_ln_affine_changed` of {glue:text}`ch1_ln_total` draws, the linear rank of
# the centred tokens in {glue:text}`ch1_ln_linear_changed`), and a direct contrast of rank and
# entropy collapse. The weights are random, not trained: chapter 5 looks at trained models.
# ````

# %% tags=["remove-cell"]
chapter.glue_claims("ch1_claims", result.claims, "01_rank_collapse")
