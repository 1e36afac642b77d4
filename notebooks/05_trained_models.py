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
# # Rank decay in trained Transformers
#
# This is the paper's headline experiment {cite}`lapenna2026sinkhorn`. It trains the same Transformer twice, once with
# softmax and once with Sinkhorn attention, on the profile's tasks (the paper's: a text task
# and two image tasks; this book adds a retrieval task whose attention must be sharp; the
# first table names those this run trains), and then measures how
# fast the token representations lose rank with depth inside the trained models.
# The paper reports that **the residual stays higher under Sinkhorn than under softmax, most
# visibly in the early layers and with skip connections**. It measures two things separately:
# the rank decay of the self-attention output, and that of products of attention matrices
# along paths. The paper's wording leaves open which "self-attention output" it means, so
# this chapter measures both readings. Here:
#
# 1. the relative residual of the **hidden states**, the output of each block, layer by layer
#    (layer 0 = the embeddings), with the trained models run complete, without FFN, without
#    skip connections, and without both (pure attention). The models are always *trained*
#    complete; parts are switched off only at inference, as in the paper (claims C4a–C4c);
# 2. the relative residual of the **attention sub-layer's own output**, before the skip
#    connection adds the block's input (C4d);
# 3. the rank-1 residual of **products of attention matrices** along random paths through
#    the layers (chapter 4's measurement, now on trained attention; C4e and C6c).

# %% tags=["parameters"]
profile = "ci"
device = "auto"
seed = 0

# %% tags=["remove-input"]
from rankcollapse_book.chapter import chapter_header

chapter = chapter_header(profile, device, seed)
settings = chapter.settings

# %% tags=["hide-output"]
from rankcollapse import names
from rankcollapse.experiments import trained_models as tm
from rankcollapse.experiments.trained_models import figures

result = tm.run(settings, chapter.device, seed)  # trains what the model cache lacks

# %% tags=["remove-cell"]
chapter.glue(result.glue)
chapter.glue_text(result.text)

# %% [markdown]
# ## Data and models
#
# The paper uses AG's News (4 news classes; a 24-layer Transformer encoder, width 128, 4
# heads, up to 128 tokens), MNIST (a 24-layer Vision Transformer on 4×4 patches) and Cats and
# Dogs (the same ViT on 16×16 patches). The `full` profile trains exactly these shapes on the
# real datasets. The `ci` profile must run offline on two CPU cores within the hour, so it trains
# models of the paper's depth but narrower, on fewer examples, on real stand-in datasets
# shipped with this repository, and on fewer tasks (those listed):

# %%
result.models.style

# %% [markdown]
# ```{admonition} Choices of this book
# :class: note
# The paper's training hyper-parameters, image resolution for Cats and Dogs, LayerNorm
# placement and tokenizer are not known to us. Ours: pre-LayerNorm blocks (stable at depth
# without warm-up tricks), for text a word-level tokenizer built from the training split, a `<cls>`
# token whose final state feeds a linear classifier, AdamW with linear warm-up and cosine
# decay, no dropout. LayerNorm stays on in every inference variant (the paper switches off
# only the FFN and the skip connections). The `full` profile's epochs, batch sizes, learning
# rates and warm-up are ours too, as is the 128 × 128
# resolution for Cats and Dogs (where a profile trains them). The paper's abstract speaks of "sentiment analysis"; the
# text dataset it names, AG's News, is 4-class *topic* classification, which is what the
# `full` profile trains. The models train in float32 and are analysed in
# float64 (a copy with the same weights), so that residuals can fall to about $10^{-15}$
# before rounding stops them. In `ci` the datasets are stand-ins and the models smaller
# (named in the table above). Departures of this run's models from the paper's shapes (24
# layers, width 128, 4 heads for every task; the retrieval task has no counterpart there):
# {glue:md}`ch5_departures`. Read the `ci` numbers as a demonstration of the method, not as
# the paper's experiment.
# ```
#
# ```{admonition} Beyond the paper: a task with sharp attention
# :class: note
# Chapter 3 shows that softmax and Sinkhorn agree to first order while the logits are small.
# Models trained on text and image classification may stay there (the table of logit
# scales below shows where they end), so whether the two normalizations differ where
# trained attention is sharp needs a task that gets there. The **key-value retrieval**
# task is this book's own: each input is a query key followed by
# {glue:text}`ch5_keys` items in random order, each item one token standing for a (key,
# value) pair, every key once; the label is the value of the queried key
# ({glue:text}`ch5_values` classes). The query sits where `<cls>` sits, and it is what the
# classifier reads, so the model must attend to the one matching item among
# {glue:text}`ch5_keys`. The answer lies in the pairing of the query with its item, not in
# either token alone, so a linear model of which tokens are present stays far below a
# model that finds the match (the table of accuracies below). The same
# architecture and optimizer are trained on it, and every claim below is tested on it as on
# the paper's tasks; it is generated from fixed seeds, so it needs no download. One choice
# differs from the paper's tasks: its models **start sharp**. Their query and key weights are
# drawn as for chapter 1's random layers, at logit scale {glue:text}`ch5_sharp_start`,
# instead of PyTorch's default initialisation (logit scale about 0.3), so that training
# starts where the two normalizations differ; the logit-scale table below shows where it
# ends.
# ```
#
# Every model is trained with {glue:text}`ch5_seeds`, and each
# softmax/Sinkhorn comparison below treats the **training seed as the unit**: a seed's value
# is the median over the test inputs, the comparison is over seeds. The two models of one
# seed form a pair: they start from the same initial weights (the normalization has no
# parameters) and see the training data in the same order. The interval is Student's $t$
# interval of the mean log ratio over seeds, and with few seeds it is wide: for a verdict of
# *Sinkhorn keeps more*, the seeds' model pairs must then agree closely. Each claim is
# decided by its registered tests, one per task (two for C4b, which compares the early
# layers with the late ones in two ways), listed with the claims ledger; a claim's intervals
# hold together at {glue:text}`ch5_level:.0%`; the layer-by-layer tables and figures are description. Training is cached by a hash of its configuration,
# data and code: re-executing this chapter reuses the trained models. The chapter also
# trains the models chapter 6 uses (trained without FFN and skips, and at other depths), all
# in one batch, so that the book's training ends once.

# %%
shown = result.accuracy.rename(columns={"accuracy_std": "accuracy, std over seeds",
                                        "train_minutes": "training time (min)"}).reset_index()
names.readable(shown.assign(dataset=shown["dataset"].map(names.dataset)),
               result.titles).style.format(
    {"accuracy": "{:.3f}", "accuracy, std over seeds": "{:.3f}", "chance": "{:.3f}",
     "training time (min)": "{:.1f}"}, na_rep="–").hide(axis="index")

# %% [markdown]
# Test accuracy, mean and standard deviation over the seeds. {glue:md}`ch5_chance` Whether
# Sinkhorn models match or improve accuracy (the paper's claim C8) is decided in the summary
# box at the end of the chapter.
#
# ### Are the models trained?
#
# Each model trains for a fixed number of epochs per task, chosen from learning curves
# measured beforehand; after every epoch its loss and accuracy on the first
# {glue:text}`ch5_heldout` test inputs are recorded (never used to stop or to select a
# model). Those curves are what the epochs were chosen from: the choice saw these test
# inputs (the stand-in data hold no separate validation split), so the accuracies may be
# slightly optimistic; the comparison of the two normalizations is not, as both train for
# the same epochs. The criterion stated here: a model has *plateaued* when its held-out loss
# {glue:md}`ch5_plateau` (a rise counts as no improvement). The learning rate decays to
# zero at the last step, so a plateau at the end is partly the schedule's doing; the accuracy
# against chance and
# against a linear model on the same data (pixels, or the bag of tokens) is the other check.
# The trainings ran {glue:text}`ch5_jobs` at a time, each in its own process.
#
# ```{note}
# The criterion's absolute part (a fall in nats) was added after a first run of these
# models, before this one: on the retrieval task of the `ci` profile, whose held-out loss
# ends near 0.02 nats at accuracy 0.99, a relative fall over the last epochs is a matter of
# a thousandth of a nat and varies from run to run (one model there fell by 7%, little more
# than a thousandth of a nat, where the same seed trained on another machine had met the
# relative criterion). A change of a few thousandths of a nat is one of a few tenths of a
# percent in the probability the models give the right answer. After that, the retrieval
# task's training was shortened by two epochs (its accuracy had stopped changing two epochs
# before the end, and the two cost a sixth of its time), which leaves more of its models
# meeting the criterion through the absolute part alone: the table below counts them.
# Every model is judged by the one criterion above.
# ```

# %%
convergence = result.convergence
convergence.assign(normalization=convergence["normalization"].map(names.display)).style.format(
    {"accuracy": "{:.3f}", "lowest": "{:.3f}", "chance": "{:.3f}", "linear baseline": "{:.3f}",
     "last-epochs gain": "{:+.1%}"}, na_rep="–").hide(axis="index")

# %% mystnb={"figure": {"caption": "Learning curves of every trained model, one row per task: held-out loss (left, log scale) and held-out accuracy (right) on the first test inputs (as many as the text says) after each epoch, one thin line per training seed, softmax blue and Sinkhorn red. Dotted: chance; dashed: the linear baseline's test accuracy. Look at the last epochs: a loss curve that has flattened has plateaued, and an accuracy curve above the dashed line beats the linear model.", "name": "fig-learning-curves"}}
chapter.show(figures.learning(result), "fig-learning-curves", result.curves)

# %% [markdown]
# The columns of the table: *accuracy* is the test accuracy (mean over seeds; *lowest*, the
# worst seed), *last-epochs gain* the relative improvement of the held-out loss over the last
# {glue:text}`ch5_window` epochs (median over seeds; negative when it rose), *plateaued* how
# many seeds meet the criterion above, *by the floor alone* how many of those meet it only
# through its absolute part (a relative fall larger than the criterion's fraction, but a
# small one in nats); *test inputs* is the size of the test set both the models and the
# linear baseline are scored on. {glue:md}`ch5_convergence`
#
# ## Rank decay of the hidden states
#
# For each trained model we feed {glue:text}`ch5_n_eval` test inputs and record every hidden
# state (the output of each block) under each inference variant. The curves are the relative
# residual $r(X_l) = \|X_l - \mathbf 1 \bar x_l^\top\|_{1,\infty} / \|X_l\|_{1,\infty}$ over the
# real (non-padding) tokens, all seeds together; residuals at the float64 rounding floor
# (about {glue:text}`ch5_floor`) enter the averages at the floor (censored: the true value
# is at most that), a layer mostly at the floor
# is not drawn, and a panel that comes near the floor shows it as a dotted line.

# %% mystnb={"figure": {"caption": "Relative residual of the hidden states against depth in the trained softmax (blue) and Sinkhorn (red) models, one row per task; left: the inference variants with skip connections (complete model solid, without FFN dashed), right: those without (without skip solid, pure attention dashed). Lines: geometric mean over test inputs and seeds; bands: one standard deviation of $\\log_{10} r$; each column on one scale, linear where it spans less than a decade; dotted, where a panel comes near it: the float64 rounding floor. Where the red band lies above the blue one, Sinkhorn keeps more rank; with skip connections the residual stays within a decade, without them it falls by many.", "name": "fig-trained-residual"}}
chapter.show(figures.residual(result), "fig-trained-residual", result.residual)

# %% [markdown]
# The paper's curves are read as *how much of the initial residual survives*: the value at
# layer 0 (the embeddings) differs between the two models, so {numref}`fig-trained-relative`
# divides every input's residual by its own value at layer 0.

# %% mystnb={"figure": {"caption": "Residual of the hidden states relative to layer 0 ($r(X_l)/r(X_0)$, per input) in the complete models (left) and without skip connections (right, dashed), softmax blue and Sinkhorn red, one row per task, each column on one scale (linear where it spans less than a decade). Geometric means over inputs and seeds, one standard deviation bands; dotted, where a panel comes near it: the float64 rounding floor. A red curve above the blue one means that Sinkhorn keeps more of its own initial residual.", "name": "fig-trained-relative"}}
chapter.show(figures.relative(result), "fig-trained-relative", result.relative)

# %% [markdown]
# What decides the hidden-state claims is the ratio Sinkhorn / softmax, compared over the
# training seeds ({numref}`fig-trained-ratio`): at each layer, each seed's value is the
# median over the same test inputs fed to both models (values at the rounding floor
# censored there), with intervals that hold together over the {glue:text}`ch5_depth`
# layers of each curve (description; the registered tests are in the summary box).

# %% mystnb={"figure": {"caption": "Ratio Sinkhorn / softmax of the hidden-state residual against depth in the trained models, with skip connections (complete models, solid; without FFN, dashed), one panel per task: geometric mean over training seeds with its Student t interval (simultaneous {glue:text}`ch5_level:.0%` over the layers of each curve); grey band: the parity margin. Where a curve and its band lie above the grey band, Sinkhorn keeps more rank at that layer; inside it, the two are at parity.", "name": "fig-trained-ratio"}}
chapter.show(figures.ratio_skips(result), "fig-trained-ratio", result.skips)

# %% mystnb={"figure": {"caption": "The same ratio for the variants without skip connections (without skip, solid; pure attention, dashed), on a scale of its own: without skips the residuals fall by many decades and the ratios spread widely; points without a band have most seeds tied at the rounding floor. Compare where each curve lies against the grey parity band with the previous figure: C4c asks whether the advantage is larger with skips.", "name": "fig-trained-ratio-no-skip"}}
chapter.show(figures.ratio_no_skips(result), "fig-trained-ratio-no-skip",
             result.no_skips)

# %% [markdown]
# ## Rank decay of the self-attention output
#
# The paper's second measurement, "the rank decay of the self-attention output", is read here
# as the output of the attention sub-layer itself, $\mathrm{SA}(\mathrm{LN}(X_{l-1}))$, before
# the skip connection adds the block's input (the hidden states above are the other reading).
# {numref}`fig-trained-attention-output` shows it for the complete models.

# %% mystnb={"figure": {"caption": "Relative residual of the attention sub-layer's own output at each layer (before the skip connection), complete trained models, softmax blue and Sinkhorn red, one panel per task, all on one scale (linear where it spans less than a decade); geometric means over inputs and seeds with one standard deviation bands. Where the red band lies above the blue one, Sinkhorn's attention output keeps more rank.", "name": "fig-trained-attention-output"}}
chapter.show(figures.attention_output(result), "fig-trained-attention-output",
             result.outputs)

# %% [markdown]
# ## Rank decay of attention products along paths
#
# As in chapter 4, a path picks $k$ distinct layers in order, a random head in each and a
# random test input; we measure the rank-1 residual of the product of its attention
# matrices, {glue:text}`ch5_paths` paths per depth in each model. Padding rows and columns
# are zeroed for both normalizations so that both products act on the same tokens; the
# same paths are sampled in both models, and the comparison is again over seeds (each seed's
# value: the median over its paths).

# %% mystnb={"figure": {"caption": "Rank-1 residual of attention products along random paths (log scale) against path depth, complete trained models, softmax (blue) and Sinkhorn (red), one panel per task, all on one scale. Boxes: quartiles over paths of all seeds; whiskers 1.5 IQR; dotted, where the boxes come near it: the float64 rounding floor. Where the red boxes sit higher than the blue ones at the same depth, Sinkhorn's products keep more rank.", "name": "fig-trained-paths"}}
chapter.show(figures.paths(result), "fig-trained-paths", result.paths)

# %% [markdown]
# The table gives, per task, the path depths at which each comparison over the seeds holds,
# in the complete models ({numref}`fig-trained-paths`) and without skip connections (whose
# attention matrices differ, since each layer then sees a different input):

# %%
result.path_where.rename(columns={"setting": "task, inference variant"}).style.hide(
    axis="index")

# %% [markdown]
# ### Random products against trained ones
#
# The paper also reports that products of *random* stochastic matrices decay more slowly
# than the trained models' products, and attributes this to the trained attention's
# dependence on the input. We draw chapter 4's control (independent Gaussian logits
# normalized by softmax or Sinkhorn) at each task's shape (its layers and heads, and as many
# tokens as the median analysed input has real, non-padding tokens) and at the trained
# models' measured logit scale, layer by layer
# (chapter 4 shows that the ratio depends on the scale): each control layer's logits have
# the standard deviation that the trained model of that normalization has at that layer
# (median over seeds and inputs). {glue:text}`ch5_random_pools` independent pools per task
# and normalization are compared with the complete trained models of the same
# normalization. The two sides are independent groups: the ratio is random / trained
# (geometric means of the pools' and of the seeds' median residuals), with Welch's $t$
# interval.

# %% mystnb={"figure": {"caption": "Ratio random / trained of the median rank-1 residual of attention products against path depth, one panel per task: softmax (blue) and Sinkhorn (red) control matrices of the task's shape and measured logit scale against the complete trained models of the same normalization; Welch t intervals over pools and seeds, simultaneous {glue:text}`ch5_level:.0%` over the depths of each curve. Above 1 the random products keep more rank (decay more slowly); grey band: the parity margin.", "name": "fig-random-vs-trained"}}
chapter.show(figures.random_vs_trained(result), "fig-random-vs-trained", result.random)

# %% [markdown]
# Where a curve of {numref}`fig-random-vs-trained` lies above the grey band, random
# products keep more rank than the trained ones at that depth (claim C6c, decided in the
# summary box).
#
# ## The trained attention itself
#
# Two questions the paper's argument leans on, asked of the trained models rather than of
# random logits (chapter 2): are the trained Sinkhorn models' logits small enough that
# {glue:text}`ch5_n_iter` iterations make their attention doubly stochastic, and does Sinkhorn attention spread
# more evenly than softmax attention once trained? {numref}`fig-trained-attention` shows
# the logit scale of each layer (the standard deviation of its logits over real token pairs),
# the row error of the Sinkhorn models' own logits after exactly {glue:text}`ch5_n_iter` iterations, and the mean
# row entropy.

# %% [markdown]
# The logit scale is the quantity that decides whether the two normalizations can differ at
# all (chapter 3: they agree to first order while it is small). One row per layer, one
# column per task and normalization: the median over test inputs and seeds of the standard
# deviation of the logits over real token pairs:

# %%
result.logit_scales.style.format("{:.2f}")

# %% mystnb={"figure": {"caption": "The complete trained models' attention per layer, one line style per task. Top left: logit scale (median over inputs of the standard deviation of the logits), softmax blue, Sinkhorn red. Top right: the Sinkhorn models' largest row error after exactly {glue:text}`ch5_n_iter` iterations on their own logits, median (circles) and largest (triangles) over inputs, log scale; dotted: {glue:md}`ch5_tolerance:myst`. Bottom: mean row entropy over real rows (nats). Points below the dotted line are doubly stochastic to {glue:md}`ch5_tolerance:myst`; a red entropy curve above the blue one of the same task means Sinkhorn attention spreads more evenly.", "name": "fig-trained-attention"}}
chapter.show(figures.trained_attention(result), "fig-trained-attention",
             result.attention)

# %% [markdown]
# Both questions are decided in the summary box below (C2a on the trained logits; C9, the
# entropy compared over seeds, each seed's mean over the layers).
#
# ## The paper's claims, checked on this run
#
# The summary below is generated from the numbers of this run on every build; how each
# verdict follows from its interval is stated once, with the claims ledger's
# {ref}`verdict rules <verdict-rules>`.

# %% tags=["remove-cell"]
chapter.glue_claims("ch5_claims", result.claims, "05_trained_models", data=result.data)

# %% [markdown]
# The hidden-state claims read {numref}`fig-trained-ratio`. C4a: whether the complete
# models' curve lies above the grey band. C4b: whether it lies higher early than late,
# tested twice: the first half of the {glue:text}`ch5_depth` layers against the second, and
# the layers before the softmax models collapse (their residual relative to the input first
# below {glue:text}`ch5_collapse_level`) against those after. C4c: whether the variants with
# skip connections lie higher than those without, each variant over its own layers before
# that collapse, so that they are compared at a matched residual level rather than at the
# same layer index, on the log-ratio scale. C4d reads {numref}`fig-trained-attention-output`
# and C4e {numref}`fig-trained-paths`. Each test's statistic and result are in the box below
# and on the claims ledger.
#
# ````{admonition} What this chapter finds
# :class: tip
# The paper's headline claims, decided on this run's numbers:
#
# ```{glue:md} ch5_claims
# :format: myst
# ```
# ````
#
# ```{admonition} What this run can and cannot say
# :class: warning
# In the `ci` profile the models have {glue:text}`ch5_depth` layers but width
# {glue:text}`ch5_width` (the paper's: 128), trained on stand-in data (each task's data and
# epochs are in the first table), with {glue:text}`ch5_seeds`: units this few make coarse
# intervals, and the claims ledger gives the smallest effect each test could have
# detected. The `full` profile runs the
# same code at the paper's sizes on the real datasets. Whatever either finds, agreeing with
# the paper or not, is reported here as computed.
# ```
