"""The claims registry: every claim of the paper and every open question, with the primary
test that decides it, declared before anything runs.

One `Registered` entry per claim id (`CLAIMS`, in the book's order). Each has one or more
`Part`s (what it is measured on: random logits, trained models, ...), and each part states
the quantity, the layers or depths it averages (`Span`), the inference variants, the
independent unit, the direction the paper reports, the margin, the kind of test and the
tasks it is tested on. Chapters compute the registered quantities and hand them to `run`,
which applies exactly the registered selection and test and nothing else; `decide` turns
the results into the verdict with the rule the registry names. The same table prints the
pre-registration on the claims ledger (`rows`), so the printed rule and the code cannot
drift apart. Layer-by-layer comparisons in the chapters are description, not tests.

Kinds of test (each over independent units, one per task):
- `paired`: per unit, the mean over the span (and variants) of log(Sinkhorn / softmax),
  values at the rounding floor censored (`stats.censored_logs`); t interval over units.
- `contrast`: per unit, that mean over one selection minus the mean over another (the
  advantage early against late, with skips against without); with `requires`, the test
  agrees only where the advantage in the first selection is shown too (an
  intersection-union test: both at the same level, no further adjustment); with
  `identified`, over each unit's positions at which no value of either selection is at
  the rounding floor (where a floor value would make a log ratio only a bound).
- `groups`: two independent groups of units (random pools against trained seeds); per
  unit the mean log value over the span; Welch's t interval of the difference.
- `check`: a numerical check stated with the part.
The intervals of one claim's tests hold together at `stats.LEVEL` (Bonferroni over all its
statistical tests, every task of every part: `family`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pandas as pd
import torch

from .data import record as dataset_record
from .measures import rounding_floor
from .profiles import Profile
from .stats import (DIRECTIONS, MARGIN, MIN_UNITS, Estimate, censored_logs, family_level,
                    found_of, groups_estimate, groups_tied, mostly_at_floor, outcome_of, paired_estimate)
from .verdicts import (CLAIM_RULE, CLAIM_VERDICTS, COMPARISON_RULE, FINDING_RULE,
                       FINDING_VERDICTS, SHARE, TREND_VERDICTS, TOLERANCE, Result, claim_verdict,
                       finding_verdict, iterations_verdict, trend_verdict)

ACCURACY_MARGIN = 0.01  # accuracies within a factor 1.01 of each other match
ENTROPY_MARGIN = 0.01  # entropies of rows that are all near log n: 1% is a real change
COLLAPSED = 1e-8  # C1: a residual below this after the last layer is a collapse
SLOPE_TOLERANCE = 0.1  # C3a: a log-log slope within this of 3
MIN_BOUND_LAYERS = 4  # C3b: layers above the floor needed to check the exponent
REGIME = 0.1  # C3c: centred logits of spectral norm at most this are small
PAPER_N, PAPER_SCALE = 128, 2.0  # C2a on random logits: the paper's n, scales up to this
PAPER_DEPTH = 24  # C4a-C4e are statements about the paper's 24-layer encoders and ViTs (C5)
# C4b, C4c: a softmax model has collapsed to half at the first layer whose relative residual
# (to its input's at layer 0) falls below this
COLLAPSE_LEVEL = 0.5

# Settings of the registered tests on random weights and logits (the chapters use these).
ENTROPY_SCALES = (0.5, 1.0, 2.0, 3.0, 5.0)  # C9, random logits
NETWORK_SCALES = (1.0, 4.0)  # chapter 4's random networks (description): path products
HIDDEN_SCALES = (0.5, 1.0, 2.0, 4.0)  # chapter 4's random networks (description): hidden states
LIPSCHITZ_SCALES = (0.5, 1.0, 2.0, 4.0)  # C10, random layers
ITERATIONS = (0.5, 1, 2, 3, 5, 10, 20, 50)  # B4; 0.5: one half-step, i.e. softmax


def scale_label(s: float) -> str:
    """The task label of a logit scale: 'σ = 0.5'."""
    return f"σ = {s:g}"


def lipschitz_sizes(profile: Profile) -> tuple[int, int]:
    """C10's token counts: half the profile's n and n."""
    return profile.n_tokens // 2, profile.n_tokens


def size_scale_label(n: int, s: float) -> str:
    return f"n = {n}, σ = {s:g}"


# the ends of a span besides whole numbers; 'collapse' (k: the last layer before the
# softmax model's collapse to half, `collapse_layers`) and 'collapse+1' are data-defined
SPAN_ENDS = ("L", "half", "half+1", "collapse", "collapse+1")
COLLAPSE_ENDS = ("collapse", "collapse+1")
COLLAPSE_WORDS = f"collapse to {'half' if COLLAPSE_LEVEL == 0.5 else f'{COLLAPSE_LEVEL:g}'}"


@dataclass(frozen=True)
class Span:
    """Positions `first`..`last` (layers or depths) of a stack of depth L; an end is a whole
    number, 'L', 'half' (L // 2), 'half+1', 'collapse' (k, the last layer before the softmax
    model collapses to half, given per task and variant: `collapse_layers`) or 'collapse+1';
    or, with `points`, those positions only."""

    first: int | str = 1
    last: int | str = "L"
    noun: str = "layers"
    points: tuple[int | str, ...] = ()

    def __post_init__(self):
        for end in (self.first, self.last, *self.points):
            if isinstance(end, str) and end in SPAN_ENDS or \
                    isinstance(end, numbers.Integral) and not isinstance(end, bool):
                continue
            meant = {e.lower(): e for e in SPAN_ENDS}.get(str(end).lower())
            raise ValueError(f"a span's end is a whole number, 'L', 'half', 'half+1', "
                             f"'collapse' or 'collapse+1'; got "
                             f"{end!r}" + (f" (write {meant!r})" if meant else ""))

    @property
    def data_defined(self) -> bool:
        """Whether an end is the collapse layer, which the data give (`collapse_layers`)."""
        return any(e in COLLAPSE_ENDS for e in (self.first, self.last, *self.points))

    def _at(self, end: int | str, depth: int, collapse: int | None) -> int:
        if end in COLLAPSE_ENDS and collapse is None:
            raise ValueError(f"{self.words()} needs the collapse layer k (`collapse_layers`)")
        return {"L": depth, "half": depth // 2, "half+1": depth // 2 + 1,
                "collapse": collapse, "collapse+1": None if collapse is None else collapse + 1
                }.get(end, end)

    def window(self, depth: int, collapse: int | None = None) -> list[int]:
        """The positions for a stack of `depth` and collapse layer `collapse`, possibly none
        (ValueError when they lie outside 1..depth, or a collapse end has no `collapse`)."""
        if self.points:
            chosen = sorted({self._at(p, depth, collapse) for p in self.points})
        else:
            chosen = list(range(self._at(self.first, depth, collapse),
                                self._at(self.last, depth, collapse) + 1))
        if chosen and (chosen[0] < 1 or chosen[-1] > depth):
            raise ValueError(f"{self.words()} is empty or outside 1–{depth}")
        return chosen

    def positions(self, depth: int, collapse: int | None = None) -> list[int]:
        """The positions for a stack of `depth` (ValueError when the span is empty there)."""
        chosen = self.window(depth, collapse)
        if not chosen:
            raise ValueError(f"{self.words()} is empty or outside 1–{depth}")
        return chosen

    def words(self) -> str:
        if (self.first, self.last) == (1, "collapse"):
            return f"{self.noun} before {COLLAPSE_WORDS}"
        if (self.first, self.last) == ("collapse+1", "L"):
            return f"{self.noun} after {COLLAPSE_WORDS}"
        name = {"half": "L/2", "half+1": "L/2+1", "collapse": "k", "collapse+1": "k+1"}
        if self.points:
            return f"{self.noun} " + ", ".join(str(name.get(p, p)) for p in self.points)
        return f"{self.noun} {name.get(self.first, self.first)}–{name.get(self.last, self.last)}"


LAYERS, EARLY, LATE = Span(), Span(1, "half"), Span("half+1", "L")
BEFORE, AFTER = Span(1, "collapse"), Span("collapse+1", "L")  # C4b, C4c
PRODUCTS = Span(2, "L", "depths")  # a path of depth 1 is one matrix, not a product
TRAINED, IMAGE, SCRATCH = "each trained task", "each image task", "each task trained pure"
TASK_SETS = (TRAINED, IMAGE, SCRATCH)  # the task sets a part names by a word (`tasks_of`)
SKIPS, NO_SKIPS = ("full model", "without FFN"), ("without skip",
                                                  "pure attention (no FFN, no skip)")


@dataclass(frozen=True)
class Part:
    """One registered test of a claim (see the module docstring for the kinds)."""

    name: str  # what it is measured on
    quantity: str
    unit: str
    test: str  # paired, contrast, groups, check, sequence
    direction: str  # stats.DIRECTIONS: what the paper reports ('either' for a question)
    tasks: str | tuple[str, ...] | Callable[[Profile], tuple[str, ...]]
    span: Span | None = None
    variants: tuple[str, ...] = ()
    against: tuple[str, ...] = ()  # contrast: the second selection's variants
    against_span: Span | None = None  # contrast: the second selection's span
    requires: bool = False  # contrast: the advantage in the first selection must be shown
    margin: float = MARGIN
    check: str = ""  # a check's statement
    precision: str = "float64"  # the dtype whose rounding floor censors the values
    ratio: str = ""  # what the estimate is, where the kind's default (`ESTIMATES`) is vague
    subject: str = "Sinkhorn"  # what is higher or lower when the direction is stated
    identified: bool = False  # contrast: only positions where no value is at the floor

    def __post_init__(self):
        if self.test not in ("paired", "contrast", "groups", "check", "sequence", "trend"):
            raise ValueError(f"unknown test kind {self.test!r}")
        if self.direction not in DIRECTIONS and self.test != "check":
            raise ValueError(f"unknown direction {self.direction!r}")
        if isinstance(self.tasks, str) and self.tasks not in TASK_SETS:
            # any other string would be read as a tuple of its letters
            raise ValueError(f"part {self.name!r}: unknown task set {self.tasks!r}; a part's "
                             f"tasks are one of "
                             f"{', '.join(map(repr, TASK_SETS))}, a tuple of task names or a "
                             "function of the profile")
        if self.identified and (self.test != "contrast" or self.against_span not in (
                None, self.span)):
            raise ValueError(f"part {self.name!r}: `identified` is for a contrast whose two "
                             "selections share one span (the same positions on both sides)")
        if self.test != "contrast" and self.span is not None and self.span.data_defined:
            raise ValueError(f"part {self.name!r}: a span that ends at the collapse layer is "
                             "for a contrast (each selection over its own window)")

    @property
    def floor(self) -> float:
        return rounding_floor(getattr(torch, self.precision))

    def selection(self) -> str:
        """The span and variants in words."""
        if self.test == "contrast":
            first = " ".join([self.span.words(), ", ".join(self.variants)]).strip()
            second = " ".join([(self.against_span or self.span).words(),
                               ", ".join(self.against)]).strip()
            return f"{first} against {second}"
        where = self.span.words() if self.span else ONE_VALUE
        return "; ".join([where, ", ".join(self.variants)]) if self.variants else where

    def estimate(self) -> str:
        """What the number that decides the test is, in words."""
        return self.ratio or ESTIMATES[self.test]

    def statement(self) -> str:
        """The primary test in words."""
        if self.test == "check":
            return self.check
        requires = REQUIRES if self.requires else ""
        where = IDENTIFIED if self.identified else ""
        return f"{STATEMENTS[self.test]}{where}{requires}; margin {1 + self.margin:g}"


STATEMENTS = {  # each kind of test in words (`Part.statement`)
    "paired": "mean log ratio Sinkhorn / softmax per unit, t interval over units",
    "contrast": "per unit, mean log ratio over the first selection minus that over the second; "
                "t interval over units",
    "groups": "two independent groups of units, mean log per unit; Welch t interval of the "
              "difference",
    "trend": "per unit, the least-squares slope of its mean log ratio Sinkhorn / softmax "
             "over the span of each depth against log2 of the depth; t interval over units",
    "sequence": "accuracy with k iterations against the most, paired over units, tested from "
                "the most iterations down; an accuracy of at most one right answer among the "
                "test inputs is censored there"}
ESTIMATES = {  # what each kind's estimate is (`Part.estimate`)
    "paired": "Sinkhorn / softmax", "contrast": "Sinkhorn / softmax in the first selection"
    ", divided by that in the second", "groups": "second group over first", "sequence":
    "accuracy with k iterations / with the most", "check": "the checked value",
    "trend": "factor by which Sinkhorn / softmax changes per doubling of depth"}
REQUIRES = "; agrees only where Sinkhorn is also shown ahead in the first"
IDENTIFIED = ("; each unit over its positions at which no value of either selection is at "
              "the rounding floor")
ONE_VALUE = "one value per unit"


RULES = ("claim", "finding", "trend", "iterations")  # how `decide` decides a claim


@dataclass(frozen=True)
class Registered:
    """One claim (or open question, `finding`) and its registered parts; `rule` names the
    rule that decides it (`decide`); `untested` says why a claim has no part."""

    id: str
    claim: str
    parts: tuple[Part, ...] = ()
    rule: str = "claim"  # claim, finding, iterations
    untested: str = ""
    caveat: str = ""  # what the verdict is about where it tests less than the paper states
    depth: int | None = None  # the model depth the claim is stated at (`off_depth`)

    def __post_init__(self):
        if self.rule not in RULES:
            # any other word would be decided by the finding rule
            raise ValueError(f"{self.id}: unknown rule {self.rule!r}; the rules are "
                             f"{', '.join(RULES)}")

    @property
    def finding(self) -> bool:
        return self.rule != "claim"

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise ValueError(f"{self.id} has no part {name!r}; its parts: "
                         f"{', '.join(p.name for p in self.parts)}")


def _hidden(name: str, quantity: str, span: Span = LAYERS, variants=("full model",),
            direction: str = "more", tasks=TRAINED, **options) -> Part:
    return Part(name, quantity, "training seed", "paired", direction, tasks, span, variants,
                **options)


PER_DOUBLING = ("factor by which Sinkhorn / softmax over the late layers changes per doubling "
                "of depth")


def _swept(profile: Profile) -> tuple[str, ...]:
    """The depth sweep's task (B5), none where the profile has no sweep."""
    return (profile.depth_sweep.task,) if profile.depth_sweep else ()


MIXED = "Sinkhorn / softmax along one input's path, divided by that with inputs mixed"
INDEPENDENT, HALF_IDENTITY = "independent logits", "half of the layers the identity"  # C6a, C6b
RESIDUAL = "relative residual of the hidden states (block outputs), composite norm"
PATHS = "rank-1 relative residual of attention products along random paths, composite norm"
Q99 = f"the {SHARE:.0%} quantile of the row error after 50 iterations"  # C2a's checks
SLACK = "smallest bound / measured"  # C3b, C3c
MATCHED = (RESIDUAL + "; each variant over its own layers before the softmax models' collapse "
           "to half (where they still keep at least half their input's residual), not at "
           "matched layer indices")
OWN_BOUND = ("the bound tested is this book's first-order derivation on one head; the paper's "
             "constant is not confirmed")
CLAIMS: dict[str, Registered] = {r.id: r for r in [
    Registered("C1", "repeated attention mixing drives all tokens to one vector (rank "
               "collapse)", (Part(
                   "random pure attention", "relative residual of the last hidden state, "
                   "pure softmax attention (no FFN, no skip) with random weights", "weight "
                   "draw", "check", "", ("every logit scale",),
                   check=f"below {COLLAPSED:g} at every logit scale",
                   ratio="the largest relative residual after the last layer, over the logit "
                         "scales"),)),
    Registered("C2a", "50 Sinkhorn iterations make attention effectively doubly stochastic", (
        Part("random logits", f"row error after exactly 50 iterations, n = {PAPER_N}, "
             f"logit scales up to {PAPER_SCALE:g}", "random matrix", "check", "",
             ("random logits",), check=f"at least {SHARE:.0%} of the matrices below "
                                       f"{TOLERANCE:g}", ratio=Q99),
        Part("trained models", "row error after exactly 50 iterations of the trained "
             "Sinkhorn models' own logits, worst head of each (layer, input)",
             "(layer, input)", "check", "", TRAINED,
             check=f"at least {SHARE:.0%} of the (layer, input) matrices below "
                   f"{TOLERANCE:g}", ratio=Q99))),
    Registered("C3a", r"one layer of pure Sinkhorn attention: residual bounded by "
               r"$C\,\lVert\mathrm{res}(X)\rVert^3$", (Part(
                   "one random head", "log-log slope of the output residual against the "
                   "input residual (spectral norm), small inputs", "", "check", "",
                   ("softmax", "sinkhorn"), check=f"within {SLOPE_TOLERANCE:g} of 3, for "
                   "each normalization (the book's first-order derivation on one head; "
                   "the paper's constant is unconfirmed)", ratio="the log-log slope"),),
               caveat=OWN_BOUND),
    Registered("C3b", "$L$ layers: the exponent $3^L$ (doubly exponential collapse)", (Part(
        "random pure stack", "residual against the first-order $L$-layer bound, "
        "high precision", "", "check", "", ("every layer above the floor",),
        check=f"measured ≤ bound at every layer above the rounding floor, at least "
              f"{MIN_BOUND_LAYERS} layers", ratio=SLACK),), caveat=OWN_BOUND),
    Registered("C3c", r"the bound holds in the small-logit regime $\lVert A\rVert_2 \ll 1$",
               (Part("one random head per logit scale", "bound / measured residual where the "
                     f"centred logits have spectral norm at most {REGIME:g}", "", "check", "",
                     ("small logits",), check="bound / measured ≥ 1 at every such point",
                     ratio=SLACK),)),
    Registered("C4a", "trained models: the hidden-state (block output) residual stays higher "
               "under Sinkhorn", (_hidden("trained models", RESIDUAL),), depth=PAPER_DEPTH),
    Registered("C4b", "the advantage is most visible in early layers, before rank collapse "
               "becomes severe", (
                   Part("trained models, by relative depth", RESIDUAL, "training seed",
                        "contrast", "more", TRAINED, EARLY, ("full model",), ("full model",),
                        LATE, requires=True,
                        ratio="Sinkhorn / softmax early, divided by that late"),
                   Part("trained models, by collapse", RESIDUAL + "; the layers before the "
                        "softmax models' collapse to half (their relative residual, geometric "
                        f"mean over seeds, first below {COLLAPSE_LEVEL:g}) "
                        "against the layers after", "training seed", "contrast", "more",
                        TRAINED, BEFORE, ("full model",), ("full model",), AFTER,
                        requires=True, ratio="Sinkhorn / softmax before collapse to half, "
                        "divided by that after")), depth=PAPER_DEPTH),
    Registered("C4c", "the advantage is most visible with skip connections", (Part(
        "trained models, at matched residual level", MATCHED, "training seed", "contrast",
        "more", TRAINED, BEFORE, SKIPS, NO_SKIPS, requires=True,
        ratio="Sinkhorn / softmax with skips, divided by that without, each before its "
              "collapse to half (tested on the log-ratio scale, not on the absolute gap)"),),
        depth=PAPER_DEPTH),
    Registered("C4d", "the same for the self-attention output, read as the attention "
               "sub-layer's own output before the skip connection (the block output is C4a)",
               (_hidden("trained models", "relative residual of the attention sub-layer's "
                        "output, composite norm"),), depth=PAPER_DEPTH),
    Registered("C4e", "the same for products of attention matrices along paths", (_hidden(
        "trained models", PATHS, PRODUCTS),), depth=PAPER_DEPTH),
    Registered("C5", "the paper's settings: 24 layers, width 128, 4 heads, its three "
               "datasets", untested="the `ci` profile trains smaller models on stand-in data; "
               "the `full` profile uses the paper's sizes and datasets, and its verdict is "
               "that run's"),
    Registered("C6a", "products of independent random matrices show essentially the same "
               "rank decay under both normalizations (parity)", (
        Part("random matrices", PATHS + ", i.i.d. N(0, 1) logits", "pool", "paired",
             "parity", (INDEPENDENT,), PRODUCTS),)),
    Registered("C6b", "the same parity with half of the factors replaced by the identity", (Part(
        "random matrices, half identity", PATHS, "pool", "paired", "parity",
        (HALF_IDENTITY,), PRODUCTS),)),
    Registered("C6c", "random stochastic products decay more slowly than trained attention "
               "products", (Part(
                   "random against trained", PATHS + "; random logits at each trained "
                   "layer's measured logit scale", "pool / training seed", "groups", "more",
                   lambda p: tuple(f"{t}, {n}" for t in p.tasks for n in ("softmax", "sinkhorn")),
                   PRODUCTS, ("full model",), ratio="random / trained residual",
                   subject="random"),)),
    Registered("C6d", "the hypothesis: input dependence along a path produces the advantage", (
        Part("trained models, correlation broken", PATHS + "; every factor from one input "
             "against each factor from an independent input", "training seed", "contrast",
             "more", IMAGE, PRODUCTS, ("one input",), ("inputs mixed",), requires=True,
             ratio=MIXED, identified=True),), caveat="tested on trained models only, which the paper's "
               "hypothesis concerns; chapter 4's random networks are description"),
    Registered("C7", "limitations: pure attention never trained from scratch; first-order "
               "bounds", untested="a statement of the paper's limits, not a result to "
               "reproduce; the open question B1 trains pure attention from scratch"),
    Registered("C8", "Sinkhorn models match or improve accuracy", (Part(
        "trained models", "test accuracy", "training seed", "paired", "no less", TRAINED,
        margin=ACCURACY_MARGIN),)),
    Registered("C9", "doubly stochastic attention spreads attention more evenly (higher row "
               "entropy)", (
                   Part("random logits", "mean row entropy", "random matrix", "paired",
                        "more", tuple(scale_label(s) for s in ENTROPY_SCALES),
                        margin=ENTROPY_MARGIN),
                   _hidden("trained models", "mean row entropy of the attention",
                           margin=ENTROPY_MARGIN))),
    Registered("C10", "local Lipschitz constants of Sinkhorn against softmax attention (the "
               "paper's future work)", (
                   Part("random layers", "local Lipschitz constant of one attention layer",
                        "weight draw", "paired", "either", lambda p: tuple(
                            size_scale_label(n, s) for n in lipschitz_sizes(p)
                            for s in LIPSCHITZ_SCALES)),
                   _hidden("trained layers", "local Lipschitz constant of the attention "
                           "layer at its own input", Span(points=(1, "half", "L")),
                           direction="either")), rule="finding"),
    Registered("B1", "pure self-attention trained from scratch (no FFN, no skips): which "
               "normalization keeps more rank", (
                   _hidden("trained pure, LayerNorm", RESIDUAL, variants=(
                       "pure attention, LayerNorm",), direction="either", tasks=SCRATCH),
                   _hidden("trained pure, no LayerNorm", RESIDUAL, variants=(
                       "pure attention, no LayerNorm",), direction="either", tasks=SCRATCH)),
               rule="finding"),
    Registered("B3", "the normalization swapped at inference: what the weights learned "
               "against what the normalization does", (
                   _hidden("weights trained with softmax", RESIDUAL + "; with Sinkhorn / with "
                           "softmax at inference, the same weights", variants=(
                               "trained with softmax",), direction="either"),
                   _hidden("weights trained with Sinkhorn", RESIDUAL + "; with Sinkhorn / "
                           "with softmax at inference, the same weights", variants=(
                               "trained with sinkhorn",), direction="either")),
               rule="finding"),
    Registered("B4", "how many Sinkhorn iterations inference needs", (Part(
        "Sinkhorn-trained models", "test accuracy with k iterations / with 50",
        "training seed", "sequence", "parity", TRAINED, margin=ACCURACY_MARGIN),),
        rule="iterations"),
    Registered("B5", "how the Sinkhorn advantage in the late layers changes with depth (the "
               "book's depth sweep)", tuple(
                   Part(f"depth sweep, {where}", RESIDUAL + "; the second half of each "
                        "model's layers, models of each depth trained alike", "training seed",
                        "trend", "either", _swept, LATE, (variant,), ratio=PER_DOUBLING)
                   for where, variant in (("with skips", "full model"),
                                          ("without skips", "without skip"))),
               rule="trend"),
]}
FINDINGS = tuple(i for i, r in CLAIMS.items() if r.finding)


def tasks_of(part: Part, profile: Profile) -> tuple[str, ...]:
    """The tasks a part is registered for under `profile`."""
    if callable(part.tasks):
        return tuple(part.tasks(profile))
    if part.tasks == TRAINED:
        return tuple(profile.tasks)
    if part.tasks == IMAGE:
        return tuple(t for t, task in profile.tasks.items()
                     if dataset_record(task.dataset).kind == "image")
    if part.tasks == SCRATCH:
        return tuple(profile.scratch_tasks)
    return tuple(part.tasks)


def registered_depth(task: str, profile: Profile) -> int:
    """The depth L a task's spans resolve against: that of the trained task it names (a key
    of `profile.tasks`, alone or before ', ': 'mnist, sinkhorn'), else that of the
    profile's random stacks and pools (`profile.depth`)."""
    role = task.partition(", ")[0]
    return profile.tasks[role].depth if role in profile.tasks else profile.depth


def off_depth(claim_id: str, profile: Profile) -> str:
    """Where a claim is stated at one model depth (`Registered.depth`: C4a-C4e at the
    paper's 24 layers) and `profile` tests it on models of another: the sentence that says
    so beside its verdict; '' otherwise (no stated depth, no trained task, or the same)."""
    entry = registered(claim_id)
    tasks = {t for p in entry.parts for t in tasks_of(p, profile)}
    depths = sorted({registered_depth(t, profile) for t in tasks})
    if entry.depth is None or depths in ([], [entry.depth]):
        return ""
    return (f"Decided on {' and '.join(map(str, depths))}-layer models, not at the "
            f"{entry.depth} layers the paper states this claim about: the verdict speaks for "
            "that depth only.")


def registered(claim_id: str) -> Registered:
    """The registry entry of `claim_id`; a ValueError that lists the ids otherwise (and
    names the registered id that differs only in case: 'C4A' -> 'C4a')."""
    if claim_id in CLAIMS:
        return CLAIMS[claim_id]
    raise ValueError(f"unknown claim id {claim_id!r}; {claim_ids_words(claim_id)}")


def claim_ids_words(claim_id: str) -> str:
    """"did you mean 'C4a'? the claims are C1, ...": what to write instead of `claim_id`."""
    meant = [c for c in CLAIMS if c.lower() == str(claim_id).lower()]
    hint = f"did you mean {meant[0]!r}? " if meant else ""
    return f"{hint}the claims are {', '.join(CLAIMS)}"


def family_level_words(size: int) -> str:
    """'98.3% each (3 tests)': the level of each interval of a family of `size` tests."""
    return f"{100 * family_level(size):.3g}% each ({size} test{'s' if size > 1 else ''})"


def family(claim_id: str, profile: Profile) -> int:
    """How many statistical tests decide the claim (every task of every part that is not a
    check): the size of its Bonferroni family."""
    return sum(len(tasks_of(p, profile)) for p in registered(claim_id).parts
               if p.test != "check") or 1


# ----------------------------------------------------------------------------- running tests


@dataclass(frozen=True)
class _Table:
    """One task's rows of the data handed to `run`, with what its errors name: the claim,
    the part and the task (`where`), and the depth its spans resolve against."""

    rows: pd.DataFrame
    where: str
    depth: int

    def refuse(self, problem: str) -> ValueError:
        return ValueError(f"{self.where}: {problem}")

    def check_units(self) -> None:
        """Every row names its unit (a row without one would drop out of the test)."""
        missing = int(self.rows["unit"].isna().sum())
        if missing:
            raise self.refuse(f"{missing} rows have no unit id (NaN); give every row the unit "
                              "it was measured on (training seed, weight draw, pool): rows "
                              "without one would drop out of the test")

    def check_positions(self) -> None:
        """Every position lies in 1..L (layers and depths are numbered from 1)."""
        positions = self.rows["position"]
        outside = positions[positions.isna() | (positions < 1) | (positions > self.depth)]
        if len(outside):
            raise self.refuse(f"positions {_listed(outside)} lie outside 1–{self.depth}, the "
                              "registered depth of this task (`registered_depth`); number "
                              "layers and depths from 1 (layer 0, the input embeddings, is in "
                              "no registered span) and leave out positions beyond the depth")

    def select(self, rows: pd.DataFrame, variants: tuple[str, ...], span: Span | None,
               collapse: dict[str, int] | None = None) -> pd.DataFrame:
        """The rows of the registered variants at the span's positions; every unit of `rows`
        must have rows at every one of them. With a data-defined span, each variant's
        positions are its own (`collapse`: variant -> k); the caller has left out the
        variants whose window is empty (`windows`)."""
        units = rows["unit"].unique()
        if variants:
            rows = rows[rows["variant"].isin(variants)]
            missing = set(variants) - set(rows["variant"])
            if missing:
                raise self.refuse(f"the data has no rows for the registered variants "
                                  f"{sorted(missing)}")
        cells = self.windows(variants, span, collapse)
        if span is not None:
            keep = pd.Series(False, index=rows.index)
            for variant, positions in cells.items():
                mine = rows["position"].isin(positions)
                keep |= mine & (rows["variant"] == variant) if variant is not None else mine
                absent = set(positions) - set(rows.loc[keep, "position"] if variant is None
                                              else rows.loc[mine & (rows["variant"] == variant),
                                                            "position"])
                if absent:
                    raise self.refuse(f"the table has no rows at {span.noun} {_listed(absent)} "
                                      f"of {span.words()} (depth {self.depth} registered for "
                                      "this task, `registered_depth`); record every registered "
                                      "position")
            rows = rows[keep]
        if variants or span is not None:
            self._check_complete(rows, units, cells, span)
        return rows

    def windows(self, variants: tuple[str, ...], span: Span | None,
                collapse: dict[str, int] | None = None) -> dict[str | None, list[int]]:
        """Per variant (None: the part names none), the positions of `span` (possibly none
        where the span is data-defined and the window empty)."""
        keys = list(variants) or [None]
        if span is None:
            return {v: [] for v in keys}
        if not span.data_defined:
            positions = span.positions(self.depth)
            return {v: positions for v in keys}
        return {v: span.window(self.depth, (collapse or {})[v]) for v in keys}

    def _check_complete(self, rows: pd.DataFrame, units, cells: dict[str | None, list[int]],
                        span: Span | None) -> None:
        """Each unit has rows at every (variant, position) of the selection: a unit measured
        at some of them only would be averaged over others than the rest, or drop out."""
        wanted = [(v, p) for v, positions in cells.items() for p in (positions or [None])]
        variants = [v for v in cells if v is not None]
        for unit in units:
            mine = rows[rows["unit"] == unit]
            blank = [None] * len(mine)
            have = set(zip(mine["variant"] if variants else blank,
                           mine["position"] if span is not None else blank))
            lacking = [_cell_words(v, p, span) for v, p in wanted if (v, p) not in have]
            if lacking:
                more = f" and {len(lacking) - 4} more" if len(lacking) > 4 else ""
                selection = " ".join(x for x in (span.words() if span else "",
                                                 ", ".join(variants)) if x)
                raise self.refuse(f"unit {_said(unit)} lacks rows at {', '.join(lacking[:4])}"
                                  f"{more} of the registered selection ({selection}); measure "
                                  "every unit at every registered variant and position, or "
                                  "leave the unit out of the table")


def _listed(values) -> str:
    """'[0, 13]': positions for a message, in order, whole numbers without '.0'."""
    values = list(values)
    known = sorted({v for v in values if not pd.isna(v)})
    unknown = ["nan"] if any(pd.isna(v) for v in values) else []
    return "[" + ", ".join([_said(v) for v in known] + unknown) + "]"


def _said(x) -> str:
    """A unit id or position for a message: 3, not 3.0; a name as it is."""
    return f"{x:g}" if isinstance(x, numbers.Real) else str(x)


def _cell_words(variant: str | None, position: int | None, span: Span | None) -> str:
    """'(full model, layer 4)': one cell of a selection in words."""
    noun = span.noun.removesuffix("s") if span else ""
    said = [x for x in (variant, f"{noun} {position}" if position is not None else None) if x]
    return f"({', '.join(said)})"


def _scores(g: pd.DataFrame, floor: float) -> tuple[pd.Series, int, int, int]:
    """Per unit, the mean censored log ratio (or mean censored log `value`) over its rows,
    and the counts of values, censored values and ties."""
    # one quantity per unit: against 1, so that it never ties at the floor
    pair = (np.ones(len(g)), g["value"]) if "value" in g else (g["softmax"], g["sinkhorn"])
    logs, censored, tied = censored_logs(*pair, floor)
    scores = pd.Series(logs, index=g.index).groupby(g["unit"]).mean()
    return scores, len(g), int(censored.sum()), int(tied.sum())


def _result(part: Part, task: str, estimate: Estimate | None, level: float, values: int,
            censored: int, tied: int, sd: tuple[float, ...],
            requirement: str | None = None, units: tuple[int, ...] = ()) -> Result:
    direction = part.direction
    if estimate is None or mostly_at_floor(tied, values):
        return Result(part.name, task, None if estimate is None else math.exp(
            estimate.log_ratio), "undecided", "undecided", level=level,
            units=estimate.units if estimate else units, values=values,
            censored=censored, tied=tied, sd=sd, requirement=requirement,
            margin=part.margin)
    ratio, low, high = estimate.interval(level)
    found = found_of(ratio, low, high, part.margin)
    if direction == "either":
        outcome = "agrees" if found in ("more", "less", "parity") else "undecided"
    else:
        outcome = outcome_of(direction, found)
        if requirement is not None and outcome == "agrees" and requirement != "more":
            # the advantage is larger there, but Sinkhorn is not shown ahead there at all
            outcome = "against" if requirement in ("parity", "not more", "less") else \
                "undecided"
    return Result(part.name, task, ratio, found, outcome, low, high, level, estimate.units,
                  estimate.detectable(level, "more" if direction == "either" else direction,
                                      part.margin),
                  censored, tied, values, sd, requirement, margin=part.margin)


def _estimate(scores: list[pd.Series]) -> Estimate | None:
    if len(scores) == 1:
        return paired_estimate(scores[0].to_numpy()) if len(scores[0]) >= MIN_UNITS else None
    if min(len(s) for s in scores) < MIN_UNITS:
        return None
    return groups_estimate(scores[0].to_numpy(), scores[1].to_numpy())


def run(claim_id: str, part_name: str, data: pd.DataFrame, profile: Profile,
        titles: dict[str, str] | None = None,
        collapse: dict[tuple[str, str], int] | None = None) -> list[Result]:
    """The registered test of one part of a claim, one `Result` per registered task.

    `data` holds one row per (task, unit, variant, position) with columns task, unit,
    variant (when the part names variants), position (layer or depth, when it has a span)
    and `softmax` and `sinkhorn` (paired values); for a `groups` test a column `group`
    ('reference' or 'other') and either `value` (a positive quantity) or the pair. `titles`
    maps task keys to the names results carry. A part whose span ends at the collapse
    layer ('collapse', 'collapse+1') needs `collapse`: (task, variant) -> k
    (`collapse_layers`) for every task and variant it selects, else a ValueError naming the
    claim, the part and the task; each variant is selected over its own window, a variant
    whose window is empty drops out of its selection (the result's `note` says so), and a
    selection left without a variant makes the task's test 'untested' (`note`: why).

    The table is taken as it is or refused, never reshaped: a ValueError naming the claim,
    the part and the task where a row has no unit id, a position lies outside 1..L (L the
    task's `registered_depth`, not the deepest position in the data), a registered
    position or variant has no rows, or a unit lacks rows at some of them (in either
    selection of a contrast)."""
    part = registered(claim_id).part(part_name)
    if part.test in ("check", "sequence"):
        raise ValueError(f"{claim_id} / {part_name} is a {part.test}; see check_result and "
                         "run_sequence")
    expected = tasks_of(part, profile)
    found_tasks = tuple(dict.fromkeys(data["task"]))
    if set(found_tasks) != set(expected):
        raise ValueError(f"{claim_id} / {part_name} is registered for tasks {list(expected)}; "
                         f"the data has {list(found_tasks)}")
    level = family_level(family(claim_id, profile))
    results = []
    for task in expected:
        if part.test == "trend":
            results.append(_trend(part, (titles or {}).get(task, task), data[data["task"] == task],
                                  level, f"{claim_id} / {part_name}, task {task!r}"))
            continue
        table = _Table(data[data["task"] == task], f"{claim_id} / {part_name}, task {task!r}",
                       registered_depth(task, profile))
        table.check_units()
        if part.span is not None:
            table.check_positions()
        g = table.rows
        name = (titles or {}).get(task, task)
        ks, note = {}, []
        if part.test == "contrast" and _data_defined(part):
            ks = _collapse_of(part, task, collapse, table)
            chosen = []
            for variants, span in ((part.variants, part.span),
                                   (part.against, part.against_span or part.span)):
                windows = table.windows(variants, span, ks)
                empty = [v for v in variants if not windows[v]]
                note += [f"{v}: {_empty_words(span, ks[v], table.depth)}" for v in empty]
                chosen.append(tuple(v for v in variants if windows[v]))
            if not all(chosen):
                results.append(Result(part.name, name, None, "undecided", "untested",
                                      level=level, margin=part.margin,
                                      note="; ".join(note) + "; the test cannot be carried "
                                      "out"))
                continue
            variants, against = chosen
        else:
            variants, against = part.variants, part.against
        if part.test == "groups":
            sides = [_scores(table.select(g[g["group"] == side], part.variants, part.span),
                             part.floor) for side in ("reference", "other")]
            scores = [s[0] for s in sides]
            est = _estimate(scores)
            censored = [s[2] for s in sides]
            ties = (groups_tied(censored, [s[1] for s in sides]) if "value" in g
                    else sum(s[3] for s in sides))
            results.append(_result(part, name, est, level, sum(s[1] for s in sides),
                                   sum(censored), ties,
                                   tuple(float(s.std(ddof=1)) for s in scores),
                                   units=tuple(len(s) for s in scores)))
            continue
        first_rows = table.select(g, variants, part.span, ks)
        if part.test == "paired":
            first = _scores(first_rows, part.floor)
            est = _estimate([first[0]])
            results.append(_result(part, name, est, level, *first[1:],
                                   (float(first[0].std(ddof=1)),), units=(len(first[0]),)))
            continue
        # every unit is in both selections (`select`): the difference is over all of them
        second_rows = table.select(g, against, part.against_span or part.span, ks)
        if part.identified:
            first_rows, second_rows, left_out = _identified(
                first_rows, second_rows, part.floor, part.unit, part.span.noun.rstrip("s"))
            note += left_out
        first, second = (_scores(r, part.floor) for r in (first_rows, second_rows))
        diff = first[0] - second[0][first[0].index]
        requirement = None
        if part.requires:
            ahead = _estimate([first[0]])
            requirement = (found_of(*ahead.interval(level), part.margin) if ahead
                           else "undecided")
        result = _result(part, name, _estimate([diff]), level, first[1] + second[1],
                         first[2] + second[2], first[3] + second[3],
                         (float(diff.std(ddof=1)),), requirement, (len(diff),))
        results.append(replace(result, left_out="; ".join(note)) if note else result)
    return results


def _identified(first: pd.DataFrame, second: pd.DataFrame, floor: float, unit: str,
                position: str) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The rows of both selections of a contrast at each unit's positions where no value of
    either is at the rounding floor (`floor`), and what was left out, in words (`unit` and
    `position` name them: 'training seed', 'depth')."""
    keys = ["unit", "position"]
    above = pd.concat([first, second]).assign(
        above=lambda d: (d["softmax"] > floor) & (d["sinkhorn"] > floor))
    kept = above.groupby(keys)["above"].all()
    kept = kept[kept].index
    chosen = [rows[pd.MultiIndex.from_frame(rows[keys]).isin(kept)] for rows in (first, second)]
    pairs = above.groupby(keys).ngroups
    said = [f"{pairs - len(kept)} of {pairs} ({unit}, {position}) pairs with a value at the "
            "rounding floor"] if pairs > len(kept) else []
    gone = sorted(set(first["unit"]) - set(chosen[0]["unit"]))
    said += [f"units {_listed(gone)}: no {position} above the floor"] if gone else []
    return chosen[0], chosen[1], said


def trend_scores(part: Part, rows: pd.DataFrame, where: str
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A trend's data per depth (a column `depth`, each depth's rows its own stack of that
    many layers): each unit's mean censored log ratio over the part's span of that depth, as
    a table unit x depth, and per depth the counts of `values`, `censored` values and
    `tied` pairs (a table depth x count). Every unit must be measured at every depth, and
    there must be two depths (a ValueError naming `where` otherwise)."""
    if "depth" not in rows:
        raise ValueError(f"{where}: a trend's data has a column depth (the depth of the model "
                         "each row was measured in)")
    scores, counts = {}, {}
    for depth, g in rows.groupby("depth"):
        table = _Table(g, f"{where}, depth {depth:g}", int(depth))
        table.check_units()
        table.check_positions()
        per_unit, *counted = _scores(table.select(g, part.variants, part.span), part.floor)
        scores[int(depth)] = per_unit
        counts[int(depth)] = dict(zip(("values", "censored", "tied"), counted))
    if len(scores) < 2:
        raise ValueError(f"{where}: a trend needs at least two depths; got {sorted(scores)}")
    wide = pd.DataFrame(scores)
    lacking = wide.index[wide.isna().any(axis=1)]
    if len(lacking):
        raise ValueError(f"{where}: units {_listed(lacking)} are not measured at every depth "
                         f"({', '.join(map(str, wide.columns))}); measure every unit at every "
                         "depth, or leave it out")
    return wide, pd.DataFrame.from_dict(counts, orient="index")


def _trend(part: Part, name: str, rows: pd.DataFrame, level: float, where: str) -> Result:
    """A trend over depths (`trend_scores`): per unit, the least-squares slope of its mean
    log ratios against log2 of the depth; the t interval of the mean slope over units, as
    the factor per doubling of depth."""
    wide, counts = trend_scores(part, rows, where)
    x = np.log2(wide.columns.to_numpy(float))
    x = x - x.mean()
    slopes = pd.Series(wide.to_numpy() @ x / (x @ x), index=wide.index)
    total = counts.sum()
    return _result(part, name, _estimate([slopes]), level, int(total["values"]),
                   int(total["censored"]), int(total["tied"]),
                   (float(slopes.std(ddof=1)),), units=(len(slopes),))


def _data_defined(part: Part) -> bool:
    return any(s is not None and s.data_defined for s in (part.span, part.against_span))


def _collapse_of(part: Part, task: str, collapse: dict[tuple[str, str], int] | None,
                 table: "_Table") -> dict[str, int]:
    """Variant -> k of `task` for the variants a data-defined part selects."""
    wanted = list(dict.fromkeys(part.variants + part.against))
    lacking = [v for v in wanted if (task, v) not in (collapse or {})]
    if lacking:
        raise table.refuse(f"the part's span ends at the collapse layer, and `collapse` has no "
                           f"k for {lacking}; pass collapse=collapse_layers(...) with every "
                           "(task, variant) the part selects")
    ks = {v: collapse[(task, v)] for v in wanted}
    for v, k in ks.items():
        if not (isinstance(k, numbers.Integral) and 0 <= k <= table.depth):
            raise table.refuse(f"the collapse layer of {v!r} is {k!r}; it is a whole number "
                               f"in 0–{table.depth}")
    return ks


def _empty_words(span: Span, k: int, depth: int) -> str:
    """Why a data-defined window is empty, in words."""
    level = "half" if COLLAPSE_LEVEL == 0.5 else f"{COLLAPSE_LEVEL:g} of"
    why = (f"the softmax model keeps less than {level} its input's residual already at "
           f"{span.noun.removesuffix('s')} 1" if k == 0 else
           f"the softmax model keeps at least {level} its input's residual at every "
           f"{span.noun.removesuffix('s')}" if k >= depth else f"k = {k}")
    return f"{why}: no {span.words().replace(span.noun, span.noun.removesuffix('s'), 1)}"


def collapse_layers(relative: pd.DataFrame, profile: Profile) -> dict[tuple[str, str], int]:
    """Per (task, variant), k: the last layer before the softmax models collapse to half,
    i.e. before their relative residual (to the input's at layer 0) first falls below
    `COLLAPSE_LEVEL`; L (`registered_depth`) when it never does, 0 when layer 1 is already
    below. `relative` is shaped as `run`'s data (`recording.per_unit(hidden, 'relative')`:
    columns task, variant, position, unit, softmax; per unit the median over inputs); the
    curve is the geometric mean over units per position. A ValueError naming the task and
    variant where a position of 1..L is missing or a value is not positive."""
    out = {}
    for (task, variant), g in relative.groupby(["task", "variant"], sort=False):
        depth = registered_depth(task, profile)
        where = f"collapse_layers, task {task!r}, variant {variant!r}"
        missing = sorted(set(range(1, depth + 1)) - set(g["position"]))
        if missing:
            raise ValueError(f"{where}: no rows at layers {_listed(missing)} of 1–{depth}")
        values = g["softmax"].to_numpy(dtype=float)
        if not (np.isfinite(values).all() and (values > 0).all()):
            raise ValueError(f"{where}: relative residuals must be positive and finite")
        curve = pd.Series(np.log(values), index=g.index).groupby(g["position"]).mean()
        below = [int(p) for p, v in curve.items() if 1 <= p <= depth and
                 math.exp(v) < COLLAPSE_LEVEL]
        out[(task, variant)] = min(below) - 1 if below else depth
    return out


def run_sequence(claim_id: str, data: pd.DataFrame, profile: Profile,
                 titles: dict[str, str] | None = None, floor: float = 0.0) -> list[Result]:
    """B4's registered test: per task and iteration count k below the most, the accuracy
    with k against that with the most (columns task, unit, position = k, value), paired
    over units, parity within the part's margin, each task's tests at the family level of
    the registered tasks; each result's `at` is its k. Values at or below `floor` (for an
    accuracy: one right answer among the test inputs) are censored there."""
    part = next(p for p in registered(claim_id).parts if p.test == "sequence")
    expected = tasks_of(part, profile)
    if set(data["task"]) != set(expected):
        raise ValueError(f"{claim_id} is registered for tasks {list(expected)}; the data has "
                         f"{sorted(set(data['task']))}")
    level = family_level(len(expected))
    results = []
    for task in expected:
        table = _Table(data[data["task"] == task], f"{claim_id} / {part.name}, task {task!r}",
                       registered_depth(task, profile))
        table.check_units()
        g = table.rows.pivot(index="unit", columns="position", values="value")
        for unit, k in g.isna().stack().loc[lambda x: x].index[:1]:
            raise table.refuse(f"unit {_said(unit)} lacks a value at {_said(k)} iterations; "
                               "measure every unit at every iteration count, or leave the "
                               "unit out of the table")
        most = g.columns.max()
        for k in sorted(g.columns, reverse=True)[1:]:
            logs, censored, tied = censored_logs(g[most], g[k], floor)
            est = paired_estimate(logs) if len(logs) >= MIN_UNITS else None
            name = (titles or {}).get(task, task)
            results.append(replace(_result(part, name, est, level, len(logs),
                                           int(censored.sum()), int(tied.sum()),
                                           (float(np.std(logs, ddof=1)),), units=(len(logs),)),
                                   at=float(k)))
    return results


def decide(claim_id: str, results: list[Result]) -> str:
    """The verdict of a claim from its results, by the rule the registry names for it."""
    rule = registered(claim_id).rule
    if rule == "claim":
        return claim_verdict([r.outcome for r in results])
    if rule == "iterations":
        per_task: dict[str, dict[float, str]] = {}
        for r in results:
            per_task.setdefault(r.task, {})[r.at] = r.found
        most = max(ITERATIONS)
        return iterations_verdict({t: {most: "parity", **per} for t, per in per_task.items()}
                                  )[0] if per_task else "not testable here"
    if rule == "trend":
        return trend_verdict([r.found for r in results])
    return finding_verdict([r.found for r in results])


# ----------------------------------------------------------------------------- claim rows


@dataclass(frozen=True)
class Claim:
    """What a chapter records about one claim or some of its parts: its `results`, the
    verdict they give (`decide`), the finding in words generated from the run's numbers,
    the figure that shows it and the data it was computed on. The claims ledger merges the
    results of every part of a claim and decides it again with the same rule."""

    id: str
    verdict: str
    finding: str
    results: tuple[Result, ...] = ()
    figure: str | None = None
    data: str | None = None

    def __post_init__(self):
        entry = registered(self.id)
        for part in dict.fromkeys(r.part for r in self.results):
            entry.part(part)  # a misspelt part name: a ValueError naming the parts
        valid = (TREND_VERDICTS if entry.rule == "trend" else
                 FINDING_VERDICTS if entry.finding else CLAIM_VERDICTS)
        if self.verdict not in valid:
            raise ValueError(f"unknown verdict {self.verdict!r} for {self.id}; valid: "
                             f"{', '.join(valid)}")

    @classmethod
    def of(cls, claim_id: str, results: list[Result], finding: str, figure: str | None = None,
           data: str | None = None) -> Claim:
        """The claim decided from `results` by its registered rule."""
        return cls(claim_id, decide(claim_id, results), finding, tuple(results), figure, data)

    @property
    def claim(self) -> str:
        return CLAIMS[self.id].claim

    def record(self) -> dict:
        """The claim as a plain dict (for the claims ledger and claims.json)."""
        return {"id": self.id, "claim": self.claim, "verdict": self.verdict,
                "finding": self.finding, "results": [r.record() for r in self.results],
                "figure": self.figure, "data": self.data}

    def markdown(self) -> str:
        """The claim as a bullet; a claim of several parts names those tested here and,
        when some are tested elsewhere, says that its verdict here is for these parts."""
        parts = list(dict.fromkeys(r.part for r in self.results))
        registered = [p.name for p in CLAIMS[self.id].parts]
        which = ""
        if len(registered) > 1 and parts:
            rest = [p for p in registered if p not in parts]
            which = (f" (tested here: {'; '.join(parts)}; " + ELSEWHERE.format(
                parts="; ".join(rest)) + ")" if rest else f" ({'; '.join(parts)})")
        return f"- **{self.id}** {self.claim}{which}: **{self.verdict}**. {self.finding}"


ELSEWHERE = "the claims ledger decides the claim with {parts} too"


def claims_markdown(claims: list[Claim]) -> str:
    """A bullet list of claims for a chapter's summary box, followed by the rules (the
    finding rule for the open questions)."""
    rules = ([CLAIM_RULE] if any(c.id not in FINDINGS for c in claims) else []) + \
        ([FINDING_RULE] if any(c.id in FINDINGS for c in claims) else [])
    return "\n".join(c.markdown() for c in claims) + f"\n\n{COMPARISON_RULE} " + " ".join(rules)


DIRECTION_WORDS = {"more": "Sinkhorn higher", "less": "Sinkhorn lower", "parity": "parity",
                   "no more": "no Sinkhorn advantage", "no less": "Sinkhorn matches or "
                   "improves", "either": "either way (a question)", "": "–"}


def direction_words(direction: str, subject: str = "Sinkhorn") -> str:
    """A direction in words, naming what is higher: 'Sinkhorn higher', 'random higher'."""
    return DIRECTION_WORDS[direction].replace("Sinkhorn", subject, 1)


def rows(profile: Profile) -> list[dict]:
    """The pre-registration as table rows: one per part of every claim."""
    table = []
    for r in CLAIMS.values():
        for p in r.parts or (None,):
            if p is None:
                table.append({"id": r.id, "claim": r.claim, "part": "–", "quantity": "–",
                              "where": "–", "unit": "–", "estimate": "–", "direction": "–", "test":
                              f"not tested: {r.untested}", "tasks": (), "family": "–"})
                continue
            tasks = tasks_of(p, profile)
            table.append({
                "id": r.id, "claim": r.claim, "part": p.name, "quantity": p.quantity,
                "where": p.selection() if p.test != "check" else "–", "unit": p.unit or "–",
                "estimate": p.estimate(),
                "direction": direction_words(p.direction, p.subject), "test": p.statement(),
                "tasks": tasks,
                "family": "–" if p.test == "check" else str(
                    len(tasks) if r.rule == "iterations" else family(r.id, profile))})
    return table
