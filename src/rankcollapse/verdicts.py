"""The book's verdict words and the rules that turn primary-test results into them.

A claim of the paper (registered in `registry`) is decided by its primary tests: one per task
of each of its parts. Each test's `Result` says what it concluded for the claim (`outcome`:
agrees, against, opposite, undecided; `stats.OUTCOMES`), and `claim_verdict` turns the
outcomes of all of a claim's tests into one of `CLAIM_VERDICTS`. The open questions and the
paper's future work get *finding* words instead (`finding_verdict`, `iterations_verdict`).
What a test found is said in the same words everywhere (`stats.WORDS`, of the estimate the
test names), what it means for the claim in `OUTCOME_WORDS`. `calibration` measures, by
simulation through the same code, how often each rule finds the paper's result where it is
false, how often it finds the opposite where the opposite is just false, and its power.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

import numpy as np

from .stats import (DIRECTIONS, FOUND, LEVEL, MARGIN, MIN_UNITS, POWER, WORDS, check_count,
                    check_margin, digits_for, family_level, found_of, groups_estimate,
                    mostly_at_floor, outcome_of, paired_estimate, significant)

CLAIM_VERDICTS = ("reproduced", "partly reproduced", "mixed", "not reproduced", "contradicted",
                  "undecided", "not testable here")
OUTCOMES = ("agrees", "against", "opposite", "undecided", "untested")
# What each outcome means for the claim, in words (`part_words`).
OUTCOME_WORDS = {"agrees": "agrees with the paper", "against": "against the paper",
                 "opposite": "the opposite of the paper", "undecided": "undecided",
                 "untested": "not testable here"}
CLAIMED = tuple(d for d in DIRECTIONS if d != "either")  # what a claim's tests can state
# Findings of the open questions: a direction everywhere or in part, parity, both
# directions (mixed), nothing decided; the iterations (B4) have their own words.
# A trend over depths (B5) says how the advantage changes: the same findings, in its words.
TREND_WORDS = {"Sinkhorn higher": "grows with depth", "Sinkhorn lower": "shrinks with depth",
               "Sinkhorn higher in part": "grows with depth in part",
               "Sinkhorn lower in part": "shrinks with depth in part",
               "parity": "steady with depth", "parity in part": "steady with depth in part"}
FINDING_VERDICTS = ("Sinkhorn higher", "Sinkhorn lower", "Sinkhorn higher in part",
                    "Sinkhorn lower in part", "parity", "parity in part", "mixed",
                    "fewer iterations suffice",
                    "all iterations needed", "undecided", "not testable here")
TREND_VERDICTS = (*TREND_WORDS.values(), "mixed", "undecided", "not testable here")
SHARE = 0.99  # a check over many matrices passes when at least this share passes
TOLERANCE = 1e-6  # the marginal error below which attention counts as doubly stochastic
LEARNED = 0.1  # a model learned its task when it beats chance by more than this accuracy


@dataclass(frozen=True)
class Result:
    """One primary test (or check) on one task of a part of a claim.

    `number` is the estimate (a ratio; for a check, the checked value, `bound` '≤' when it is
    itself censored at the floor), [`low`, `high`] its interval at `level`, `units` the
    independent units per group, `detectable` the smallest effect the test could detect at
    `stats.POWER` (for a test of parity: the narrowest margin it could show), `found` what
    the interval found (`stats.FOUND`, or 'passes' / 'fails' for a check) and `outcome` what
    that means for the claim (`OUTCOMES`); `note` says in words why a test could not be
    carried out (outcome 'untested'), or anything else its numbers do not say; `left_out`
    what a test left out of its selection, and why. `censored` values of `values` were at the
    rounding floor, `tied` pairs at it on both sides; `sd` the spread of the per-unit scores
    per group, the basis of the power and of `calibration`; `requirement`, for a test that
    presupposes an advantage, what the test of that advantage found; `margin` the parity
    margin of its part, `at` its setting within the task. For an open question
    (direction 'either'), `outcome` 'agrees' only says that a direction or parity was
    decided."""

    part: str
    task: str
    number: float | None
    found: str
    outcome: str
    low: float | None = None
    high: float | None = None
    level: float | None = None
    units: tuple[int, ...] = ()
    detectable: float | None = None
    censored: int = 0
    tied: int = 0
    values: int = 0
    sd: tuple[float, ...] = ()
    requirement: str | None = None
    bound: str = ""
    at: float | None = None  # the setting a result is at, within its task (B4: iterations)
    margin: float = MARGIN  # the parity margin its interval was judged with
    note: str = ""  # why the test could not be carried out (outcome 'untested'), in words
    left_out: str = ""  # what the test left out of its selection (and why), in words

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r}; valid: {', '.join(OUTCOMES)}")
        if self.found not in FOUND + CHECK_FOUND:
            raise ValueError(f"unknown result {self.found!r} ({self.part}, {self.task}); "
                             f"valid: {', '.join(FOUND + CHECK_FOUND)}")
        check_margin(self.margin)
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"inverted interval {self.low}–{self.high} ({self.part}, "
                             f"{self.task})")

    def record(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


CHECK_FOUND = ("passes", "fails", "not checked")  # what a numerical check found


def check_result(part: str, task: str, number: float | None, holds: bool | None,
                 bound: str = "") -> Result:
    """A numerical check as a `Result`: passes (agrees) or fails (against); `holds` None:
    this run cannot check it (untested)."""
    found = {True: "passes", False: "fails", None: "not checked"}[holds]
    outcome = {True: "agrees", False: "against", None: "untested"}[holds]
    return Result(part, task, number, found, outcome, bound=bound)


def marginal_check(part: str, task: str, q99: float) -> Result:
    """C2a's check, the same on random and on trained logits: the `SHARE` quantile of the
    row error after 50 iterations is below `TOLERANCE` (at least that share of the
    matrices is doubly stochastic to that tolerance)."""
    return check_result(part, task, q99, q99 < TOLERANCE)


def claim_verdict(outcomes: list[str]) -> str:
    """The verdict on a claim from the outcomes of all its primary tests (every task of
    every part): *reproduced* when all agree; *partly reproduced* when some agree and none
    shows the opposite; *mixed* when some agree and some show the opposite (the tests point
    both ways); *contradicted* when some show the opposite and none agrees; *not reproduced*
    when none agrees or shows the opposite but some decide against; *undecided* when none
    decides anything; *not testable here* with no test that this run could carry out
    ('untested' outcomes are left out)."""
    unknown = set(outcomes) - set(OUTCOMES)
    if unknown:
        raise ValueError(f"unknown outcomes {sorted(unknown)}; valid: {', '.join(OUTCOMES)}")
    outcomes = [o for o in outcomes if o != "untested"]
    if not outcomes:
        return "not testable here"
    if "opposite" in outcomes:
        return "mixed" if "agrees" in outcomes else "contradicted"
    if all(o == "agrees" for o in outcomes):
        return "reproduced"
    if "agrees" in outcomes:
        return "partly reproduced"
    return "not reproduced" if "against" in outcomes else "undecided"


def finding_verdict(found: list[str]) -> str:
    """What the primary tests of an open question found (`stats.FOUND` words, Sinkhorn
    against softmax): one direction in every test ('Sinkhorn higher'), or in some while the
    others are parity or undecided ('Sinkhorn higher in part'); 'mixed' when both directions
    occur; parity everywhere, or in part with the rest undecided; 'undecided' when nothing is
    decided (*not more* and *not less* decide no direction)."""
    unknown = set(found) - set(FOUND)
    if unknown:
        raise ValueError(f"unknown results {sorted(unknown)}; valid: {', '.join(FOUND)}")
    if not found:
        return "not testable here"
    decided = set(found) & {"more", "less", "parity"}
    if {"more", "less"} <= decided:
        return "mixed"
    for direction, word in (("more", "Sinkhorn higher"), ("less", "Sinkhorn lower"),
                            ("parity", "parity")):
        if direction in decided:
            return word if set(found) == {direction} else f"{word} in part"
    return "undecided"


def iterations_verdict(found: dict[str, dict[float, str]]) -> tuple[str, float]:
    """B4: per task, the accuracy with k iterations against that with the most, over seeds
    (`stats.FOUND` words, `direction` parity). A fixed sequence from the most iterations
    down: the fewest k such that *every* task shows parity at k and at every count above
    it (a fixed-sequence test holds the family-wise error rate without adjustment). Returns
    ('fewer iterations suffice', k) when k is below the most; ('all iterations needed',
    most) when some task at the next count down loses accuracy beyond the margin
    ('less'); ('undecided', most) otherwise."""
    unknown = {w for per in found.values() for w in per.values()} - set(FOUND)
    if unknown:
        raise ValueError(f"unknown results {sorted(unknown)}; valid: {', '.join(FOUND)}")
    counts = sorted({k for per in found.values() for k in per}, reverse=True)
    if not counts or any(set(per) != set(counts) for per in found.values()):
        raise ValueError("every task needs a result at every iteration count")
    most, enough = counts[0], counts[0]
    for k in counts[1:]:
        if not all(per[k] == "parity" for per in found.values()):
            break
        enough = k
    if enough < most:
        return "fewer iterations suffice", enough
    below = counts[1] if len(counts) > 1 else most
    if any(per.get(below) == "less" for per in found.values()):
        return "all iterations needed", most
    return "undecided", most


# ----------------------------------------------------------------------------- rules in words

PERCENT = f"{LEVEL:.0%}"
COMPARISON_RULE = (
    "Each comparison is Sinkhorn / softmax over independent units (weight draws, pools of "
    "random matrices, networks, test inputs or training seeds): the geometric mean of the "
    f"paired ratios with Student's t interval; the intervals of a family (the layers of one "
    f"figure, the tasks of one claim) hold together at {PERCENT} (Bonferroni: each of k at "
    f"1 − {1 - LEVEL:.2g}/k). An interval finds *parity* when it lies within a factor "
    f"{1 + MARGIN:g} of 1 (between {1 / (1 + MARGIN):.3f} and {1 + MARGIN:g}, unless another "
    "margin is stated), *higher* when it lies above 1 and the estimate is at "
    f"least {1 + MARGIN:g} (a difference of the margin's size), *lower* in the mirror case, "
    f"*not higher by the margin* when its top is below {1 + MARGIN:g} (*not lower by the "
    "margin*, the mirror case), and is "
    f"*undecided* otherwise or with fewer than {MIN_UNITS} units. A value at the rounding "
    "floor is censored: it enters as the floor, so where only one side is there the ratio "
    "understates the gap, and where both are the pair is a tie; with more than half the "
    "values tied there is no verdict. One test differs, and says so: a contrast of two ratios "
    "registered as *identified* (C6d) leaves out, per unit, the positions where a value is "
    "at the floor, since a difference of two bounds can take any size.")
CLAIM_RULE = (
    "A claim is decided by its primary tests alone, registered before anything ran (the "
    "claims ledger prints the registry; C6d's floor rule is the one later change, made after "
    "a run found its ratio driven by values at the floor, and chapter 6 says so): one test per task of each of its parts, in the "
    "direction the paper reports. A claim is *reproduced* when every test agrees with the "
    "paper, *partly reproduced* when some do and none shows the opposite, *mixed* when some "
    "agree and some show the opposite beyond the margin (the tests point both ways), "
    "*contradicted* when some show the opposite and none agrees, *not reproduced* when none "
    "agrees or shows the opposite and some decide against the paper (for a claimed "
    "difference: parity, or no difference of the margin's size), *undecided* when no test "
    "can tell (the ledger gives the smallest "
    f"effect each could have detected with {POWER:.0%} power), and *not testable here* when "
    "this run cannot measure it (a test that cannot be carried out on this run's data, "
    "with its reason, is left out). A test that presupposes an advantage (the advantage is "
    "larger early, with skips) agrees only where the advantage itself is shown too. A "
    "claim decided by a numerical check is reproduced when the check passes.")
FINDING_RULE = (
    "An open question's verdict says what its primary tests found: *Sinkhorn higher* "
    "(*lower*) when every test finds it so, *in part* when the others find parity or are "
    "undecided, *mixed* when both directions occur, *parity* when every test shows parity, "
    "*parity in part* when some do and the rest are undecided (or exclude only one "
    "direction), *undecided* when nothing is decided; for a trend over depths (B5), the "
    "same words about the change per doubling of depth: *grows with depth*, *shrinks with "
    "depth*, *steady with depth* (within the margin), each *in part* as above; for the "
    "iterations (B4), "
    "the fewest iterations whose accuracy shows parity with 50 in every task, tested from "
    "50 down.")


def trend_verdict(found: list[str]) -> str:
    """What the primary tests of a trend over depths found, in `TREND_WORDS`: the finding
    rule (`finding_verdict`) applied to the factor by which the advantage changes per
    doubling of depth ('more': it grows)."""
    verdict = finding_verdict(found)
    return TREND_WORDS.get(verdict, verdict)


def result_words(r: Result, unit: str | tuple[str, str] = "seeds") -> str:
    """'1.32 (98.3% interval 1.10–1.58, 5 seeds; detectable 1.45)' for a test (for two
    groups, `unit` names each: '3 seeds and 12 pools'; where values were at the rounding
    floor, how many); the value for a check."""
    if r.number is None or not math.isfinite(r.number):
        return "no estimate"
    if mostly_at_floor(r.tied, r.values):  # a tie says nothing of the ratio
        return f"no estimate ({r.tied} of {r.values} values tied at the rounding floor)"
    if r.low is None or not math.isfinite(r.low):
        return f"{r.bound}{significant(r.number)}"
    names = (unit,) * len(r.units) if isinstance(unit, str) else unit
    units = " and ".join(f"{n} {name}" for n, name in zip(r.units, names))
    d = digits_for(r.margin)
    detect = (f"; detectable {significant(r.detectable, d)}"
              if r.detectable is not None and math.isfinite(r.detectable) else "")
    floor = (f"; {r.censored} of {r.values} values at the rounding floor, where a ratio "
             "is only a bound" if r.censored and r.values else "")
    return (f"{significant(r.number, d)} ({100 * r.level:.3g}% interval "
            f"{significant(r.low, d)}–{significant(r.high, d)}, {units}{detect}{floor})")


# ----------------------------------------------------------------------------- calibration


def simulate_outcomes(sds: list[tuple[float, ...]], units: list[tuple[int, ...]],
                      direction: str, log_ratios: list[float], margins: list[float],
                      family: int, runs: int, rng: np.random.Generator) -> list[str]:
    """The claim verdicts of `runs` simulated repetitions of a claim's design: per test i,
    normal per-unit scores with spread `sds[i]` (one per group; 0: every unit the same) and
    `units[i]` units, whose true mean log ratio is `log_ratios[i]`, each decided by the same
    interval and outcome rules as the real tests (with its own margin `margins[i]`), at the
    claim's family level. A test with fewer than `MIN_UNITS` units in a group is undecided,
    as in the real run (nothing is drawn for it)."""
    level = family_level(family)
    verdicts = []
    for _ in range(runs):
        outcomes = []
        for sd, n, mean, margin in zip(sds, units, log_ratios, margins):
            if min(n) < MIN_UNITS:
                outcomes.append("undecided")
                continue
            if len(n) == 1:
                est = paired_estimate(rng.normal(mean, sd[0], n[0]))
            else:
                est = groups_estimate(rng.normal(0.0, sd[0], n[0]),
                                      rng.normal(mean, sd[1], n[1]))
            outcomes.append(outcome_of(direction, found_of(*est.interval(level), margin)))
        verdicts.append(claim_verdict(outcomes))
    return verdicts


def boundary(direction: str, margin: float = MARGIN) -> float:
    """The true log ratio at which a claim of `direction` is just false (the least
    favourable null): no difference (0) for a claimed difference, the margin for a claimed
    parity or absence of an advantage."""
    return {"more": 0.0, "less": 0.0, "parity": math.log1p(margin),
            "no more": math.log1p(margin), "no less": -math.log1p(margin)}[direction]


def alternative(direction: str, effect: float = 1.5) -> float:
    """The true log ratio at which power is stated: a ratio `effect` (or 1 / effect) for a
    claimed difference, no difference for a claimed parity."""
    return {"more": math.log(effect), "less": -math.log(effect), "parity": 0.0,
            "no more": 0.0, "no less": 0.0}[direction]


def stated_at(direction: str, effect: float = 1.5) -> float:
    """The true ratio at which `calibration` states power for a claim of `direction`:
    `effect` for a claimed difference (its inverse for 'less'), 1 for a claimed parity or
    absence of an advantage (where the claim holds exactly)."""
    return math.exp(alternative(direction, effect))


@dataclass(frozen=True)
class Calibration:
    """How often a claim's rule finds the paper's result (reproduced or partly) where it
    is false (`false_rate`, at the boundary of the claim), and where it holds on every task
    (at a 1.5x effect for a difference, at ratio 1 for parity): on at least one task
    (`power`) and on all of them (`power_every`, reproduced), over `runs` simulations;
    how often it finds the opposite of the paper ('contradicted' or 'mixed') where there
    is no difference at all (`false_opposite`, every true ratio 1: for a claimed difference
    the least favourable case for a false opposite, for a claimed parity or absence of an
    advantage the case where the claim holds exactly); and the
    best verdict the design reaches with probability at least `stats.POWER` where the claim
    holds (`best`: 'reproduced', 'partly reproduced' or 'none')."""

    false_rate: float
    power: float
    power_every: float
    runs: int
    false_opposite: float
    best: str


def calibration(results: list[Result], direction: str, family: int, runs: int = 2000,
                seed: int = 0, effect: float = 1.5) -> Calibration | None:
    """`Calibration` of a claim from its tests' design (units, observed spread and margin
    per test; a test that recorded no spread is simulated with spread 1); None for a claim
    without statistical tests, without a direction ('') or for a question ('either'). A
    direction it does not know, or a spread it cannot simulate (not one finite number >= 0
    per group), is a ValueError naming the test."""
    check_count("runs", runs)
    if not (isinstance(effect, numbers.Real) and math.isfinite(effect) and effect > 1):
        raise ValueError(f"the effect at which power is stated is a ratio above 1; got "
                         f"{effect!r}")
    if direction not in CLAIMED + ("", "either"):
        raise ValueError(f"a claim's direction is one of "
                         f"{', '.join(map(repr, CLAIMED))} (or '' or 'either': no "
                         f"calibration); got {direction!r}")
    tests = [r for r in results if r.units]
    if not tests or direction in ("", "either"):
        return None
    sds, units = [_spread(r) for r in tests], [r.units for r in tests]
    margins = [r.margin for r in tests]
    rng = np.random.default_rng(seed)
    found = {"reproduced", "partly reproduced"}
    null = simulate_outcomes(sds, units, direction, [boundary(direction, m) for m in margins],
                             margins, family, runs, rng)
    alt = simulate_outcomes(sds, units, direction, [alternative(direction, effect)] * len(tests),
                            margins, family, runs, rng)
    opposite = simulate_outcomes(sds, units, direction, [0.0] * len(tests), margins, family,
                                 runs, rng)
    every, some = (float(np.mean([v == "reproduced" for v in alt])),
                   float(np.mean([v in found for v in alt])))
    best = "reproduced" if every >= POWER else "partly reproduced" if some >= POWER else "none"
    return Calibration(float(np.mean([v in found for v in null])), some, every, runs,
                       float(np.mean([v in ("contradicted", "mixed") for v in opposite])), best)


def _spread(r: Result) -> tuple[float, ...]:
    """The spread per group `calibration` simulates a test with (1 where none was recorded);
    a ValueError naming the test where it is not one finite number >= 0 per group (a test
    with too few units is never drawn: its spread is not looked at)."""
    sd = r.sd or (1.0,) * len(r.units)
    if min(r.units) >= MIN_UNITS and (len(sd) != len(r.units) or not all(
            isinstance(x, numbers.Real) and math.isfinite(x) and x >= 0 for x in sd)):
        raise ValueError(f"{r.part}, task {r.task!r}: calibration needs the spread of the "
                         f"per-unit scores as one finite number >= 0 per group of units "
                         f"{r.units}; got sd={r.sd}; record the test's result with `primary_tests.run_part` (it "
                         f"stores the spread)")
    return sd


CHECK_WORDS = {"passes": "the check passes", "fails": "the check fails",
               "not checked": "not checked on this run"}


def results_sentence(results: list[Result], unit: str | tuple[str, str] = "seeds",
                     ratio: str | None = None) -> str:
    """Each result in one clause, naming the estimate, then what it found (`stats.WORDS`):
    'MNIST: Sinkhorn / softmax 1.14 (98.8% interval 1.04–1.25, 8 seeds; detectable 1.10):
    higher; ...'. `ratio` names the estimate (default: 'Sinkhorn / softmax' for a test, 'the
    checked value' for a check; pass the part's `estimate()` where it is another ratio). A
    test that could not be carried out says why (its `note`)."""
    said = {**WORDS, **CHECK_WORDS}
    clauses = []
    for r in results:
        where = f"{r.task}" + (f", {r.at:g}" if r.at is not None else "")
        if r.outcome == "untested" and r.number is None:
            clauses.append(f"{where}: {OUTCOME_WORDS['untested']}"
                           + (f" ({r.note})" if r.note else ""))
            continue
        name = ratio or ("Sinkhorn / softmax" if r.units else "the checked value")
        clauses.append(f"{where}: {name} {result_words(r, unit)}: {said[r.found]}")
    return "; ".join(clauses) + "." if clauses else "no test."


def part_words(results: list[Result]) -> str:
    """A count of the tests' outcomes in `OUTCOME_WORDS`, in the order of `OUTCOMES`: '3
    tests agree with the paper, 1 against the paper' (for a chapter that tests only some
    parts of a claim, where the claim's verdict word would say more than these tests
    decide); 'no test' for none."""
    counts = {o: sum(r.outcome == o for r in results) for o in OUTCOMES}
    said = []
    for o, n in counts.items():
        if not n:
            continue
        words = OUTCOME_WORDS[o]
        if o == "agrees" and n > 1:
            words = "agree with the paper"
        said.append(f"{n} test{'s' if n > 1 else ''} {words}" if not said else f"{n} {words}")
    return ", ".join(said) or "no test"
