"""The claims registry: every claim of the paper and every open question, with the primary
test that decides it, declared before anything runs.

One `Registered` entry per claim id (`CLAIMS`, in the book's order). Each has one or more
`Part`s (what it is measured on: random logits, trained models, ...), and each part states
the quantity, the layers or depths it averages (`Span`), the inference variants, the
independent unit, the direction the paper reports, the margin, the kind of test and the
tasks it is tested on. Chapters compute the registered quantities and hand them to
`primary_tests.run_part`, which applies exactly the registered selection and test and
nothing else; `decide` turns
the results into the verdict with the rule the registry names. The same table prints the
pre-registration on the claims ledger (`rows`), so the printed rule and the code cannot
drift apart. Layer-by-layer comparisons in the chapters are description, not tests.

`primary_tests.run_part` runs a part's test on a chapter's data; `claim_rows.Claim` is what a
chapter records of a claim.

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
from dataclasses import dataclass
from typing import Callable

import torch

from .data import record as dataset_record
from .measures import rounding_floor
from .profiles import Profile
from .stats import DIRECTIONS, MARGIN, family_level
from .verdicts import (SHARE, TOLERANCE, Result, claim_verdict, finding_verdict,
                       iterations_verdict, trend_verdict)

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
               "hypothesis concerns; chapter 4's random networks are description; its rule "
               "for values at the rounding floor was revised after a first run, as chapter 6 "
               "says"),
    Registered("C7", "limitations: pure attention never trained from scratch; first-order "
               "bounds", untested="a statement of the paper's limits, not a result to "
               "reproduce; the open question B1 trains pure attention from scratch"),
    Registered("C8", "Sinkhorn models match or improve accuracy", (Part(
        "trained models", "test accuracy", "training seed", "paired", "no less", TRAINED,
        margin=ACCURACY_MARGIN),)),
    Registered("C9", "doubly stochastic attention spreads attention more evenly (higher row "
               "entropy)", (
                   Part("random logits", "mean row entropy", "random matrix", "paired",
                        "more", lambda p: tuple(scale_label(s) for s in p.ch2.entropy_scales),
                        margin=ENTROPY_MARGIN),
                   _hidden("trained models", "mean row entropy of the attention",
                           margin=ENTROPY_MARGIN))),
    Registered("C10", "local Lipschitz constants of Sinkhorn against softmax attention (the "
               "paper's future work)", (
                   Part("random layers", "local Lipschitz constant of one attention layer",
                        "weight draw", "paired", "either", lambda p: tuple(
                            size_scale_label(n, s) for n in lipschitz_sizes(p)
                            for s in p.ch6.lipschitz_scales)),
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


def decide(claim_id: str, results: list[Result]) -> str:
    """The verdict of a claim from its results, by the rule the registry names for it."""
    rule = registered(claim_id).rule
    if rule == "claim":
        return claim_verdict([r.outcome for r in results])
    if rule == "iterations":
        per_task: dict[str, dict[float, str]] = {}
        for r in results:
            per_task.setdefault(r.task, {})[r.at] = r.found
        # the most iterations, the reference every count is compared with: above them all
        return iterations_verdict({t: {math.inf: "parity", **per}
                                   for t, per in per_task.items()})[0] \
            if per_task else "not testable here"
    if rule == "trend":
        return trend_verdict([r.found for r in results])
    return finding_verdict([r.found for r in results])


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
