"""Paired softmax/Sinkhorn comparisons over independent units, and the book's verdict rule.

Every sentence of the book that says which normalization keeps more rank comes from here.

The unit. A comparison resamples *independent* units: random weight draws, random networks,
independent pools of random matrices, test inputs, training seeds. Many values measured on
one unit (the paths drawn from one pool, the inputs fed to one network) are first summarised
by their median, so that they count once: overlapping paths from one pool are not independent
and are never resampled as if they were.

The rule. For each unit, the log ratio Sinkhorn / softmax of its two (paired) values; the
estimate is their mean (a geometric-mean ratio), with a `LEVEL` interval over units: a
percentile bootstrap (`N_BOOT` resamples) from `BOOTSTRAP_UNITS` units on, and below that a
Student-t interval of the mean log ratio (with three units the bootstrap interval is about
the range of the three values and covers far less often than it claims; the t interval is
wide, as it should be). Then, in this order:

- **parity**: the whole interval lies within the equivalence margin, a factor `1 + m` of 1,
  `[1 / (1 + m), 1 + m]` (`MARGIN` m = 0.1: between 0.909 and 1.1);
- **more** (Sinkhorn keeps more): the interval lies above 1;
- **less**: the interval lies below 1;
- **inconclusive**: otherwise (the interval contains 1 but is wider than the margin), and
  whenever fewer than `MIN_UNITS` units are left or more units were left out than kept.

Units whose value (either side) is not finite or at or below the rounding floor are left
out and counted: at the floor a residual says only "zero to machine precision". When most
units are at the floor, the few left are a selection, not a sample: no verdict then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

MARGIN = 0.1
LEVEL = 0.95
N_BOOT = 2000
MIN_UNITS = 3
BOOTSTRAP_UNITS = 10  # fewer units: Student-t interval instead of the bootstrap
VERDICTS = ("more", "less", "parity", "inconclusive")
# How each comparison verdict reads in a sentence.
WORDS = {"more": "Sinkhorn keeps more", "less": "Sinkhorn keeps less",
         "parity": "parity", "inconclusive": "inconclusive"}


@dataclass(frozen=True)
class Comparison:
    """The comparison of one quantity: `ratio` Sinkhorn / softmax (geometric mean over
    units) with its interval [`low`, `high`], the number of `units` used and `excluded`, the
    `margin` and the `verdict` (one of `VERDICTS`)."""

    ratio: float
    low: float
    high: float
    units: int
    excluded: int
    margin: float
    verdict: str

    def summary(self, unit: str = "units", words: dict[str, str] | None = None) -> str:
        """'Sinkhorn keeps more (ratio 1.32, 95% interval 1.10-1.58, 8 units)': the
        verdict in `words` (default `WORDS`), the units named `unit`."""
        said = (words or WORDS)[self.verdict]
        if not np.isfinite(self.ratio):
            return f"{said} (no ratio: {self.units} usable {unit})"
        if not (np.isfinite(self.low) and np.isfinite(self.high)):
            return (f"{said} (ratio {significant(self.ratio)} from {self.units} {unit}, "
                    f"{self.excluded} left out: no interval)")
        left_out = f", {self.excluded} left out at the rounding floor" if self.excluded else ""
        return (f"{said} (ratio {significant(self.ratio)}, {LEVEL:.0%} interval "
                f"{significant(self.low)}–{significant(self.high)}, {self.units} {unit}{left_out})")


def significant(x: float) -> str:
    """Three significant digits for prose: 0.909, 1.00, 555, 1530, 2.5e-07."""
    if x != x or x in (float("inf"), float("-inf")) or x == 0:
        return f"{x:g}"
    if 1e3 <= abs(x) < 1e4:
        return f"{x:.0f}"
    if 1e-3 <= abs(x) < 1e3:
        return f"{x:#.3g}".rstrip(".")
    return f"{x:.2g}"


def verdict_of(low: float, high: float, margin: float = MARGIN) -> str:
    """The rule (see the module docstring) applied to an interval of the ratio."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive"
    if 1 / (1 + margin) <= low and high <= 1 + margin:
        return "parity"
    if low > 1:
        return "more"
    if high < 1:
        return "less"
    return "inconclusive"


def compare(softmax, sinkhorn, *, margin: float = MARGIN, floor: float = 0.0,
            n_boot: int = N_BOOT, seed: int = 0, level: float = LEVEL) -> Comparison:
    """Compare paired per-unit values: `softmax[i]` and `sinkhorn[i]` belong to unit i.

    Values must be positive (a residual); a pair with a value <= `floor` or not finite is
    left out and counted in `excluded`."""
    a, b = np.asarray(softmax, float), np.asarray(sinkhorn, float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired comparisons need two 1-D arrays of equal length; got shapes "
                         f"{a.shape} and {b.shape}")
    if (a < 0).any() or (b < 0).any():
        raise ValueError("compared values must be non-negative (residuals, norms)")
    keep = np.isfinite(a) & np.isfinite(b) & (a > floor) & (b > floor)
    logs = np.log(b[keep]) - np.log(a[keep])
    excluded = int((~keep).sum())
    if len(logs) < MIN_UNITS or excluded > len(logs):
        return _no_interval(logs.mean() if len(logs) else np.nan, len(logs), excluded, margin)
    if len(logs) < BOOTSTRAP_UNITS:
        half = t_quantile(0.5 + level / 2, len(logs) - 1) * logs.std(ddof=1) / np.sqrt(len(logs))
        low, high = np.exp(logs.mean() - half), np.exp(logs.mean() + half)
        return Comparison(float(np.exp(logs.mean())), float(low), float(high), len(logs),
                          excluded, margin, verdict_of(low, high, margin))
    rng = np.random.default_rng(seed)
    boot = logs[rng.integers(0, len(logs), (n_boot, len(logs)))].mean(axis=1)
    return _with_interval(logs.mean(), boot, len(logs), excluded, margin, level)


def t_quantile(p: float, df: int) -> float:
    """The `p` quantile (p > 0.5) of Student's t distribution with `df` degrees of freedom:
    bisection on its CDF, integrated numerically (Simpson's rule) from the density."""
    if not 0.5 < p < 1 or df < 1:
        raise ValueError(f"need 0.5 < p < 1 and df >= 1; got p={p}, df={df}")
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(t: float) -> float:  # P(T <= t) for t >= 0, via the substitution x = atan(u)
        x = np.linspace(0.0, math.atan(t), 2001)
        u = np.tan(x)
        density = np.exp(log_norm - (df + 1) / 2 * np.log1p(u**2 / df)) * (1 + u**2)
        h = x[1] - x[0]
        return 0.5 + h / 3 * (density[0] + density[-1] + 4 * density[1:-1:2].sum()
                               + 2 * density[2:-1:2].sum())

    low, high = 0.0, 1.0
    while cdf(high) < p:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < p else (low, mid)
    return (low + high) / 2


def compare_groups(reference, other, *, margin: float = MARGIN, floor: float = 0.0,
                   n_boot: int = N_BOOT, seed: int = 0, level: float = LEVEL) -> Comparison:
    """Compare two independent groups of positive values (not paired: random matrices
    against trained models, say): the ratio of geometric means `other` / `reference`, with a
    bootstrap interval that resamples each group on its own (Welch's t interval when the
    smaller group has fewer than `BOOTSTRAP_UNITS`); values <= `floor` or not finite are
    left out. `units` counts the smaller group; the verdict words read "other keeps
    more" for a ratio above 1."""
    groups = [np.asarray(v, float) for v in (reference, other)]
    if any(g.ndim != 1 for g in groups):
        raise ValueError("compare_groups needs two 1-D arrays")
    if any((g < 0).any() for g in groups):
        raise ValueError("compared values must be non-negative (residuals, norms)")
    kept = [np.log(g[np.isfinite(g) & (g > floor)]) for g in groups]
    excluded = sum(len(g) - len(k) for g, k in zip(groups, kept))
    units = min(len(k) for k in kept)
    if units < MIN_UNITS or excluded > units:
        gap = kept[1].mean() - kept[0].mean() if units else np.nan
        return _no_interval(gap, units, excluded, margin)
    gap = kept[1].mean() - kept[0].mean()
    if units < BOOTSTRAP_UNITS:  # Welch's t interval, as `compare` does for few units
        var = [k.var(ddof=1) / len(k) for k in kept]
        half = 0.0  # both groups constant: no spread to speak of
        if sum(var) > 0:
            df = sum(var) ** 2 / sum(v**2 / (len(k) - 1) for v, k in zip(var, kept))
            half = t_quantile(0.5 + level / 2, max(1, int(df))) * math.sqrt(sum(var))
        low, high = math.exp(gap - half), math.exp(gap + half)
        return Comparison(float(math.exp(gap)), low, high, units, excluded, margin,
                          verdict_of(low, high, margin))
    rng = np.random.default_rng(seed)
    boot = [k[rng.integers(0, len(k), (n_boot, len(k)))].mean(axis=1) for k in kept]
    return _with_interval(gap, boot[1] - boot[0], units, excluded, margin, level)


def _no_interval(log_ratio: float, units: int, excluded: int, margin: float) -> Comparison:
    return Comparison(float(np.exp(log_ratio)), float("nan"), float("nan"), units, excluded,
                      margin, "inconclusive")


def _with_interval(log_ratio: float, boot: np.ndarray, units: int, excluded: int,
                   margin: float, level: float) -> Comparison:
    tail = (1 - level) / 2
    low, high = np.exp(np.quantile(boot, [tail, 1 - tail]))
    return Comparison(float(np.exp(log_ratio)), float(low), float(high), units, excluded,
                      margin, verdict_of(low, high, margin))


def unit_values(table: pd.DataFrame, unit: str | list[str], by: list[str] | None = None,
                value: str = "residual") -> pd.DataFrame:
    """One value per (group, unit, normalization): the median of `value` over the unit's
    rows (its paths, its inputs). Columns: by + units, then `softmax` and `sinkhorn`."""
    units = [unit] if isinstance(unit, str) else list(unit)
    keys = (by or []) + units
    medians = table.groupby(keys + ["normalization"])[value].median()
    wide = medians.unstack("normalization")
    missing = {"softmax", "sinkhorn"} - set(wide.columns)
    if missing:
        raise ValueError(f"the table has no rows for {', '.join(sorted(missing))}")
    return wide[["softmax", "sinkhorn"]].reset_index()


def compare_table(table: pd.DataFrame, unit: str | list[str], by: list[str] | None = None,
                  value: str = "residual", **options) -> pd.DataFrame:
    """`compare` per group of `by`, over the independent units named by `unit` (see
    `unit_values`). One row per group: by, ratio, low, high, units, excluded, verdict."""
    wide = unit_values(table, unit, by, value)
    groups = wide.groupby(by) if by else [((), wide)]
    rows = []
    for key, g in groups:
        c = compare(g["softmax"], g["sinkhorn"], **options)
        labels = dict(zip(by or [], key if isinstance(key, tuple) else (key,)))
        rows.append({**labels, "ratio": c.ratio, "low": c.low, "high": c.high,
                     "units": c.units, "excluded": c.excluded, "verdict": c.verdict})
    result = pd.DataFrame(rows)
    # groups in the order they first appear in `table` (variants in the chapter's order)
    return table[by].drop_duplicates().merge(result, on=by) if by else result


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def growth_factor(layers, lost) -> float:
    """The factor by which each layer multiplies `lost` (e.g. the digits a residual has lost,
    -log10 r): exp of the least-squares slope of log(lost) against the layer index, over the
    positive finite values. Constant under doubly exponential decay (3 under the cubic law);
    NaN with fewer than two such values."""
    layers, lost = np.asarray(layers, float), np.asarray(lost, float)
    keep = np.isfinite(lost) & (lost > 0)
    if keep.sum() < 2:
        return float("nan")
    return float(np.exp(np.polyfit(layers[keep], np.log(lost[keep]), 1)[0]))


# ----------------------------------------------------------------------------- words


def ranges(values) -> str:
    """[1, 2, 3, 7] -> '1–3, 7' (runs of consecutive integers); other values are listed:
    [0.5, 1.0, 2.0] -> '0.5, 1, 2'."""
    values = sorted(values)
    if not all(float(v).is_integer() for v in values):
        return ", ".join(f"{v:g}" for v in values)
    parts, start = [], None
    for i, v in enumerate(values):
        start = v if start is None else start
        if i + 1 == len(values) or values[i + 1] != v + 1:
            parts.append(f"{start:g}" if start == v else f"{start:g}–{v:g}")
            start = None
    return ", ".join(parts)


def describe(results: pd.DataFrame, x: str, noun: str = "depth",
             more: str = WORDS["more"], less: str = WORDS["less"]) -> str:
    """One factual sentence about a `compare_table` result over `x` (depths, layers): where
    each verdict holds, e.g. 'Sinkhorn keeps more at depths 1–3; Sinkhorn keeps less at
    depths 5–12; parity at depth 4.' Verdicts that hold nowhere are left out. `more` and
    `less` name the directions for quantities other than rank ('Sinkhorn higher')."""
    words = {**WORDS, "more": more, "less": less}
    parts = []
    for verdict in VERDICTS:
        where = results.loc[results["verdict"] == verdict, x].tolist()
        if where:
            plural = noun + ("s" if len(where) > 1 else "")
            parts.append(f"{words[verdict]} at {plural} {ranges(where)}")
    return ("; ".join(parts) or "no comparison") + "."


# ----------------------------------------------------------------------------- claims

CLAIM_VERDICTS = ("reproduced", "partly reproduced", "not reproduced", "contradicted",
                  "not testable here")
# The paper's claims, with the ids the book uses everywhere (see the intro).
CLAIMS = {
    "C1": "repeated attention mixing drives all tokens to one vector (rank collapse)",
    "C2a": "50 Sinkhorn iterations make attention effectively doubly stochastic",
    "C3a": r"one layer of pure Sinkhorn attention: residual bounded by $C\,\lVert\mathrm{res}(X)\rVert^3$",
    "C3b": "$L$ layers: the exponent $3^L$ (doubly exponential collapse)",
    "C3c": r"the bound holds in the small-logit regime $\lVert A\rVert_2 \ll 1$",
    "C4a": "trained models: the hidden-state residual stays higher under Sinkhorn",
    "C4b": "the advantage is most visible in early layers",
    "C4c": "the advantage is most visible with skip connections",
    "C4d": "the same for the self-attention output",
    "C4e": "the same for products of attention matrices along paths",
    "C5": "the paper's settings: 24 layers, width 128, 4 heads, its three datasets",
    "C6a": "random matrices: no Sinkhorn advantage",
    "C6b": "random matrices with half of the factors the identity: no Sinkhorn advantage",
    "C6c": "random stochastic products decay more slowly than trained attention products",
    "C6d": "the hypothesis: the advantage comes from input dependence along a real path",
    "C7": "limitations: pure attention never trained from scratch; first-order bounds",
    "C8": "Sinkhorn models match or improve accuracy",
    "C9": "doubly stochastic attention spreads attention more evenly (higher row entropy)",
    "C10": "local Lipschitz constants of Sinkhorn against softmax attention (the paper's "
           "future work)",
}
# Questions the paper left open, answered by the book's own experiments (chapter 6), and the
# paper's future work C10: their verdicts say what was found (`FINDING_VERDICTS`), not
# whether a claim of the paper held.
OPEN_QUESTIONS = {
    "B1": "pure self-attention trained from scratch (no FFN, no skips): does it learn, and "
          "which normalization keeps more rank",
    "B2": "the mechanism: breaking the correlation of attention across layers shrinks the "
          "Sinkhorn advantage in path products",
    "B3": "the normalization swapped at inference: what the weights learned against what the "
          "normalization does",
    "B4": "how many Sinkhorn iterations inference needs",
}
FINDING_IDS = (*OPEN_QUESTIONS, "C10")
FINDING_VERDICTS = ("Sinkhorn higher", "Sinkhorn lower", "Sinkhorn higher in part",
                    "Sinkhorn lower in part", "parity", "parity in part", "mixed", "supported",
                    "not supported",
                    "fewer iterations suffice", "all iterations needed", "inconclusive")
COMPARISON_RULE = (
    "Each comparison is Sinkhorn / softmax over independent units (weight draws, pools of "
    "random matrices, networks or test inputs), as the geometric mean of paired ratios with a "
    f"{LEVEL:.0%} interval over units (Student's t below {BOOTSTRAP_UNITS} units, a "
    "bootstrap from there on); *parity* when the whole interval lies within "
    f"a factor {1 + MARGIN:g} of 1 (between {1 / (1 + MARGIN):.3f} and {1 + MARGIN:g}, unless "
    "another margin is stated; parity takes precedence even if the interval excludes 1), "
    "*Sinkhorn keeps more* (*less*) when it lies above (below) 1, *inconclusive* otherwise, "
    f"and whenever fewer than {MIN_UNITS} units are left or most units sit at the rounding "
    "floor.")
CLAIM_RULE = (
    "A claim is decided by counting its comparisons (one per layer, depth, logit scale or "
    "task, as its finding lists them; they are not independent of each other, so the counts "
    "describe, they do not test). It is *reproduced* when every comparison agrees with the "
    "paper, *partly reproduced* when some do and no more of them show the opposite (the "
    "finding says which), *contradicted* when the opposite is found more often than "
    "agreement and in at least half of all the comparisons, *not reproduced* otherwise. "
    "For a claim of a Sinkhorn advantage only *Sinkhorn keeps more* agrees and only *keeps "
    "less* is the opposite (parity and inconclusive neither agree nor oppose); for a claim of "
    "*no Sinkhorn advantage*, parity and *keeps less* both agree and only *keeps more* is the "
    "opposite; for *matches or improves*, parity and *more* agree and only *less* is the "
    "opposite. A claim decided by a numerical check is reproduced when the check, stated with it, "
    "passes, and *not testable here* when this run cannot decide it (the finding says why).")


# What the paper can report about a comparison -> (the verdicts that agree, those against).
EXPECTATIONS = {
    "more": ({"more"}, {"less"}),
    "less": ({"less"}, {"more"}),
    "parity": ({"parity"}, {"more", "less"}),
    "no more": ({"parity", "less"}, {"more"}),  # "no Sinkhorn advantage"
    "no less": ({"parity", "more"}, {"less"}),  # "Sinkhorn matches or improves"
}


def claim_verdict(expected: str, found: list[str]) -> str:
    """Verdict on a claim of the paper from the verdicts of its comparisons (one per depth or
    layer, or a single one). `expected`: what the paper reports, one of `EXPECTATIONS`:
    'more', 'less', 'parity', 'no more' (no Sinkhorn advantage: parity or less agree) or
    'no less' (Sinkhorn matches or improves: parity or more agree).

    reproduced: every comparison agrees; partly reproduced: some do and no more find the
    opposite; contradicted: more find the opposite beyond the margin than agree, and they
    are at least half of all comparisons (for a claim of parity the opposite is a difference
    either way); not reproduced: otherwise (parity or
    inconclusive where the paper reports a difference, or inconclusive where it reports
    parity)."""
    if expected not in EXPECTATIONS:
        raise ValueError(f"expected must be one of {', '.join(map(repr, EXPECTATIONS))}; "
                         f"got {expected!r}")
    if not found:
        return "not testable here"
    agree, opposite = EXPECTATIONS[expected]
    hits, against = sum(v in agree for v in found), sum(v in opposite for v in found)
    if hits == len(found):
        return "reproduced"
    if against > hits and 2 * against >= len(found):
        return "contradicted"
    return "partly reproduced" if hits else "not reproduced"


def finding_verdict(found: list[str]) -> str:
    """What a set of comparison verdicts (Sinkhorn against softmax) found, for a row of
    `FINDING_IDS`: one direction in every comparison ('Sinkhorn higher'), or in some while
    the others are parity or undecided ('Sinkhorn higher in part'); parity everywhere, or
    parity in part with the rest undecided; 'mixed' when both directions occur;
    'inconclusive' when nothing is decided."""
    decided = {v for v in found if v != "inconclusive"}
    if not decided:
        return "inconclusive"
    if {"more", "less"} <= decided:
        return "mixed"
    for direction, word in (("more", "Sinkhorn higher"), ("less", "Sinkhorn lower"),
                            ("parity", "parity")):
        if direction in decided:
            return word if set(found) == {direction} else f"{word} in part"
    return "inconclusive"


def check_verdict(holds: bool | None) -> str:
    """Verdict on a claim decided by one numerical check (a slope, a bound)."""
    if holds is None:
        return "not testable here"
    return "reproduced" if holds else "not reproduced"


@dataclass(frozen=True)
class Claim:
    """One claim of the paper (id from `CLAIMS`) or open question (`OPEN_QUESTIONS`), its
    verdict (from `CLAIM_VERDICTS`, or `FINDING_VERDICTS` for `FINDING_IDS`) and the finding
    that decided it, in words generated from the run's numbers; `number` and `interval` are the deciding
    number (for a softmax/Sinkhorn comparison the ratio Sinkhorn / softmax: see
    `summarise`), `measure` says in words what that number is, and `figure` is the figure
    that shows it."""

    id: str
    claim: str
    verdict: str
    finding: str
    number: float | None = None
    interval: tuple[float, float] | None = None
    figure: str | None = None
    measure: str | None = None
    data: str | None = None  # what it was computed on, when not the whole chapter's data

    def __post_init__(self):
        if self.id not in CLAIMS and self.id not in OPEN_QUESTIONS:
            raise ValueError(f"unknown claim id {self.id!r}; the claims are "
                             f"{', '.join([*CLAIMS, *OPEN_QUESTIONS])}")
        valid = FINDING_VERDICTS if self.id in FINDING_IDS else CLAIM_VERDICTS
        if self.verdict not in valid:
            raise ValueError(f"unknown verdict {self.verdict!r} for {self.id}; valid: "
                             f"{', '.join(valid)}")

    def with_numbers(self, comparisons: pd.DataFrame | None = None, number: float | None = None,
                     figure: str | None = None, measure: str | None = None) -> Claim:
        """This claim with its deciding number: from `comparisons` (rows of
        `compare_table`, see `summarise`; `measure` then defaults to the ratio Sinkhorn /
        softmax) or a single checked `number` (its `measure` must be said); and its figure."""
        interval = None
        if comparisons is not None:
            number, interval = summarise(comparisons)
            measure = measure or "Sinkhorn / softmax, geometric mean of the ratios"
        elif number is not None and not measure:
            raise ValueError(f"{self.id}: say what the checked number is (measure=...)")
        return replace(self, number=number, interval=interval, figure=figure or self.figure,
                       measure=measure)

    def record(self) -> dict:
        """The claim as a plain dict (for the claims ledger and claims.json)."""
        return {"id": self.id, "claim": self.claim, "verdict": self.verdict,
                "finding": self.finding, "number": self.number,
                "interval": list(self.interval) if self.interval else None,
                "figure": self.figure, "measure": self.measure, "data": self.data}

    def markdown(self) -> str:
        return f"- **{self.id}** {self.claim}: **{self.verdict}**. {self.finding}"


def summarise(comparisons: pd.DataFrame) -> tuple[float, tuple[float, float] | None]:
    """The deciding number of a claim made of several comparisons: the geometric mean of
    their ratios Sinkhorn / softmax, and the range spanned by their intervals (from the
    lowest low to the highest high) - a summary, not an interval of its own. Comparisons
    without an interval (too few units above the rounding floor) do not enter it."""
    ratios = comparisons["ratio"].to_numpy(float)
    lows, highs = comparisons["low"].to_numpy(float), comparisons["high"].to_numpy(float)
    keep = np.isfinite(ratios) & (ratios > 0) & np.isfinite(lows) & np.isfinite(highs)
    if not keep.any():
        return float("nan"), None
    span = (float(lows[keep].min()), float(highs[keep].max()))
    return float(np.exp(np.log(ratios[keep]).mean())), span


def merge_verdicts(verdicts: list[str]) -> str:
    """One verdict for a claim decided in several places (C2a on random and on trained
    logits, say): the same verdict everywhere stays; a mix with some reproduction is
    partly reproduced; otherwise contradicted if any part is, else not reproduced; not
    testable parts count only when nothing else is known."""
    known = [v for v in verdicts if v != "not testable here"]
    if not known:
        return "not testable here"
    if len(set(known)) == 1:
        return known[0]
    if {"reproduced", "partly reproduced"} & set(known):
        return "partly reproduced"
    return "contradicted" if "contradicted" in known else "not reproduced"


FINDING_RULE = (
    "The verdict of a question says what its comparisons found: *Sinkhorn higher* (*lower*) "
    "when every comparison finds it so, *in part* when the others find parity or are "
    "undecided, "
    "*mixed* when both directions occur, *parity* or *inconclusive* otherwise; for the "
    "mechanism (B2), *supported* where Sinkhorn is ahead along real paths and its advantage "
    "shrinks when the correlation across layers is broken, *not supported* where it stays "
    "or grows; for the iterations (B4), whether fewer than 50 iterations match the accuracy "
    "of 50 in every task.")


def claims_markdown(claims: list[Claim]) -> str:
    """A bullet list of claims for a chapter's summary box, followed by the rules (the
    finding rule for the open questions)."""
    rule = FINDING_RULE if all(c.id in FINDING_IDS for c in claims) else CLAIM_RULE
    return "\n".join(c.markdown() for c in claims) + f"\n\n{COMPARISON_RULE} {rule}"
