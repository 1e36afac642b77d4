"""Softmax/Sinkhorn comparisons over independent units: intervals, censoring at the rounding
floor, power, and the primary tests that decide the book's claims.

The unit. A comparison resamples *independent* units: random weight draws, random networks,
independent pools of random matrices, test inputs, training seeds. Many values measured on
one unit (the paths drawn from one pool, the inputs fed to one network) are first summarised
by their median, so that they count once: overlapping paths from one pool are not independent
and are never treated as if they were.

The interval. Per unit the log ratio Sinkhorn / softmax of its two (paired) values; the
estimate is their mean (a geometric-mean ratio) with Student's t interval of the mean, at
`LEVEL` for the whole family of comparisons it belongs to: each of a family of k comparisons
(the layers of one table, the tasks of one claim) gets the level 1 - (1 - `LEVEL`) / k
(Bonferroni), so that all k intervals hold together with probability `LEVEL`.

Censoring. A value at or below the rounding floor says "at most the floor", not "missing":
it enters as the floor. Where only one side is at the floor the log ratio is then a bound
on the true one, nearer to zero than the truth (the comparison understates the gap but gets
its sign right); where both are, the pair is a tie (log ratio 0). A comparison with more
than `MAX_TIED` of its values tied at the floor cannot tell anything (no verdict).

What an interval finds (`found`), with the margin m (`MARGIN`; parity band
[1 / (1 + m), 1 + m]), in this order: *parity* when the interval lies inside the band;
*more* when it lies above 1 and the estimate is at least 1 + m (a difference shown, and of
the margin's size); *less*, the mirror image; *not more* when its top is below 1 + m (an
advantage of the margin's size is excluded); *not less*, the mirror image; *undecided*
otherwise. What a primary test concludes about a claim (`outcome`) follows from this and the
direction the paper reports (`OUTCOMES`).

Power. Each test says the smallest effect it could have detected (`detectable`): the true
ratio at which it would find *more* with probability `POWER`, given its units and their
observed spread; for a test of parity, the narrowest margin within which it would show
parity with that probability if the true ratio were 1.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

MARGIN = 0.1  # parity: a ratio within a factor 1.1 of 1
LEVEL = 0.95  # the family-wise confidence level of every family of intervals
POWER = 0.8  # the power at which `detectable` is stated
MIN_UNITS = 3  # fewer independent units: no interval
MAX_TIED = 0.5  # more than half of the values tied at the floor: no verdict
FOUND = ("more", "less", "parity", "not more", "not less", "undecided")
DIRECTIONS = ("more", "less", "parity", "no more", "no less", "either")
# What each result found means for a claim of each direction: the paper's result (agrees),
# decided against it without the opposite (against), the opposite beyond the margin.
OUTCOMES = {
    "more": {"agrees": {"more"}, "against": {"parity", "not more"}, "opposite": {"less"}},
    "less": {"agrees": {"less"}, "against": {"parity", "not less"}, "opposite": {"more"}},
    "parity": {"agrees": {"parity"}, "against": set(), "opposite": {"more", "less"}},
    "no more": {"agrees": {"parity", "not more", "less"}, "against": set(),
                "opposite": {"more"}},
    "no less": {"agrees": {"parity", "not less", "more"}, "against": set(),
                "opposite": {"less"}},
}
# How each result reads in a sentence about rank.
# What a result found, in the same words everywhere: they describe the estimate (whatever
# ratio the test names, Sinkhorn / softmax unless said otherwise), which is higher or lower.
WORDS = {"more": "higher", "less": "lower", "parity": "parity",
         "not more": "not higher by the margin", "not less": "not lower by the margin",
         "undecided": "undecided"}


def floats(x) -> np.ndarray:
    """`x` as an array of floats."""
    return np.asarray(x, dtype=float)


def check_level(level) -> float:
    """`level` if it is a confidence level (a real number strictly between 0 and 1), else a
    ValueError naming it."""
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0 < level < 1:
        raise ValueError(f"a confidence level lies strictly between 0 and 1; got {level!r}")
    return float(level)


def check_margin(margin) -> float:
    """`margin` if it is a parity margin (a finite real number >= 0: 0.1 means within a
    factor 1.1), else a ValueError naming it."""
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) \
            or not math.isfinite(margin) or margin < 0:
        raise ValueError(f"a parity margin is a finite number >= 0 (0.1: within a factor "
                         f"1.1 of 1); got {margin!r}")
    return float(margin)


def check_floor(floor) -> float:
    """`floor` if it is a rounding floor (a finite real number >= 0), else a ValueError naming
    it: a NaN floor would make every log ratio NaN and the estimate blame the values."""
    if isinstance(floor, bool) or not isinstance(floor, numbers.Real) \
            or not math.isfinite(floor) or floor < 0:
        raise ValueError(f"a rounding floor is a finite number >= 0 (0: nothing censored; "
                         f"measures.rounding_floor(torch.float64) for values computed in "
                         f"float64); got {floor!r}")
    return float(floor)


def check_direction(direction) -> str:
    """`direction` if a test can be stated in it (a key of `OUTCOMES`), else a ValueError."""
    if direction not in OUTCOMES:
        raise ValueError(f"a test's direction is one of {', '.join(map(repr, OUTCOMES))}; "
                         f"got {direction!r}")
    return direction


def check_count(name: str, value, least: int = 1) -> int:
    """`value` if it is a whole number of at least `least` (numpy integers too), else a
    TypeError or ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a whole number; got {value!r} ({type(value).__name__})")
    if value < least:
        raise ValueError(f"{name} must be at least {least}; got {value}")
    return int(value)


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def significant(x: float, digits: int = 3) -> str:
    """`digits` significant digits for prose: 0.909, 1.00, 555, 1530 (four: 0.9987, 1.000,
    for ratios judged within a narrow margin); outside 0.001-10000, a power of ten written
    out with up to `digits` digits: 2.5×10⁻⁷, 2.86×10⁴, 10⁻⁹; zero is 0."""
    if not math.isfinite(x):
        return f"{x:g}"
    if x == 0:
        return "0"
    if not 1e-3 <= abs(x) < 1e4:  # tiny or huge
        mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
        mantissa = f"{float(mantissa):g}"  # without trailing zeros: 1.20 -> 1.2, 1.00 -> 1
        power = f"10{str(int(exponent)).translate(SUPERSCRIPT)}"
        return mantissa[:-1] + power if mantissa in ("1", "-1") else f"{mantissa}×{power}"
    if abs(x) >= 1e3:
        return f"{x:.0f}"
    return f"{x:#.{digits}g}".removesuffix(".")


NARROW = 0.05  # margins below this: ratios shown with one more digit (1.004, not 1.00)


def digits_for(margin: float) -> int:
    """Significant digits for ratios judged within `margin`: 4 below `NARROW`, else 3."""
    return 4 if margin < NARROW else 3


def mostly_at_floor(at_floor, total):
    """Whether more than `MAX_TIED` of `total` values (or pairs) are at the rounding floor:
    then they say nothing beyond "zero to machine precision" (numbers or arrays)."""
    return np.asarray(at_floor) > MAX_TIED * np.asarray(total)


def family_level(family: int, level: float = LEVEL) -> float:
    """The level of each of `family` intervals that hold together with probability `level`
    (Bonferroni): 1 - (1 - level) / family."""
    if isinstance(family, bool) or not isinstance(family, numbers.Real) or family < 1 \
            or int(family) != family:
        raise ValueError(f"a family has a positive whole number of members; got {family!r}")
    return 1 - (1 - check_level(level)) / family


# ----------------------------------------------------------------------------- intervals


@lru_cache(maxsize=None)
def t_quantile(p: float, df: int) -> float:
    """The `p` quantile (p > 0.5) of Student's t distribution with `df` degrees of freedom:
    bisection on its CDF, integrated numerically (Simpson's rule) from the density."""
    if not 0.5 < p < 1 or df < 1 or int(df) != df:
        raise ValueError(f"need 0.5 < p < 1 and a whole df >= 1; got p={p}, df={df}")
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(t: float) -> float:  # P(T <= t) for t >= 0, via the substitution x = atan(u)
        x = np.linspace(0.0, math.atan(t), 4001)
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


@dataclass(frozen=True)
class Estimate:
    """A mean log ratio `log_ratio` with its standard error `se` on `df` degrees of freedom,
    from `units` independent units (one count per group)."""

    log_ratio: float
    se: float
    df: int
    units: tuple[int, ...]

    def interval(self, level: float) -> tuple[float, float, float]:
        """(ratio, low, high): the ratio exp(log_ratio) and its two-sided `level` t interval."""
        half = t_quantile(0.5 + check_level(level) / 2, self.df) * self.se
        return (math.exp(self.log_ratio), math.exp(self.log_ratio - half),
                math.exp(self.log_ratio + half))

    def detectable(self, level: float, direction: str, margin: float = MARGIN,
                   power: float = POWER) -> float:
        """The smallest effect this test detects with probability `power` (normal-theory
        approximation with t quantiles): for a claim of a difference, the true ratio (above 1)
        at which the interval lies above 1 with the estimate beyond the margin; for a claim
        of parity (or of no advantage), the narrowest margin within which it shows parity
        when the true ratio is 1."""
        check_direction(direction), check_margin(margin)
        t_level = t_quantile(0.5 + check_level(level) / 2, self.df) * self.se
        t_power = t_quantile(check_level(power), self.df) * self.se
        if direction in ("parity", "no more", "no less"):
            return math.exp(t_level + t_power)
        return math.exp(max(t_level, math.log1p(margin)) + t_power)


def paired_estimate(logs) -> Estimate:
    """The mean of per-unit log ratios with its standard error (n - 1 degrees of freedom)."""
    logs = floats(logs)
    if logs.ndim != 1 or len(logs) < MIN_UNITS or not np.isfinite(logs).all():
        raise ValueError(f"a paired estimate needs at least {MIN_UNITS} finite per-unit log "
                         f"ratios; got {logs.tolist()}")
    return Estimate(float(logs.mean()), float(logs.std(ddof=1) / math.sqrt(len(logs))),
                    len(logs) - 1, (len(logs),))


def groups_estimate(reference, other) -> Estimate:
    """The difference of the mean logs `other` - `reference` of two independent groups, with
    Welch's standard error and degrees of freedom (rounded down)."""
    groups = [floats(g) for g in (reference, other)]
    if any(g.ndim != 1 or len(g) < MIN_UNITS or not np.isfinite(g).all() for g in groups):
        raise ValueError(f"each group needs at least {MIN_UNITS} finite values; got sizes "
                         f"{[g.size for g in groups]}")
    var = [g.var(ddof=1) / len(g) for g in groups]
    se = math.sqrt(sum(var))
    df = min(len(g) for g in groups) - 1  # both groups constant: the smaller group's df
    if se > 0:
        df = max(1, int(sum(var) ** 2 / sum(v**2 / (len(g) - 1) for v, g in zip(var, groups))))
    return Estimate(float(groups[1].mean() - groups[0].mean()), se, df,
                    tuple(len(g) for g in groups))


def found_of(ratio: float, low: float, high: float, margin: float = MARGIN) -> str:
    """What an interval [low, high] around `ratio` finds (see the module docstring)."""
    check_margin(margin)
    values = (ratio, low, high)
    if not all(np.isfinite(values)):
        return "undecided"
    if not (0 < low <= ratio <= high):
        raise ValueError(f"an interval needs 0 < low <= ratio <= high; got low={low}, "
                         f"ratio={ratio}, high={high}")
    top, bottom = 1 + margin, 1 / (1 + margin)
    if bottom <= low and high <= top:
        return "parity"
    if low > 1 and ratio >= top:
        return "more"
    if high < 1 and ratio <= bottom:
        return "less"
    if high < top:
        return "not more"
    if low > bottom:
        return "not less"
    return "undecided"


def outcome_of(direction: str, found: str) -> str:
    """What `found` means for a claim that the ratio is `direction` (one of `OUTCOMES`):
    'agrees', 'against', 'opposite' or 'undecided'."""
    if direction not in OUTCOMES:
        raise ValueError(f"a claim's direction is one of {', '.join(map(repr, OUTCOMES))}; "
                         f"got {direction!r}")
    if found not in FOUND:
        raise ValueError(f"unknown result {found!r}; valid: {', '.join(FOUND)}")
    return next((k for k, v in OUTCOMES[direction].items() if found in v), "undecided")


# ----------------------------------------------------------------------------- censoring


def censored_logs(softmax, sinkhorn, floor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair, log(Sinkhorn / softmax) with values at or below `floor` entered as the floor
    (censored: "at most this"), whether either side was censored, and whether both were
    (a tie at the floor). Values must be non-negative and finite."""
    floor = check_floor(floor)
    a, b = floats(softmax), floats(sinkhorn)
    if a.shape != b.shape:
        raise ValueError(f"paired values need equal shapes; got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("paired values must be finite (a residual or norm that is NaN or "
                         "infinite is a failed measurement, not a censored one)")
    if (a < 0).any() or (b < 0).any():
        raise ValueError("compared values must be non-negative (residuals, norms)")
    if floor <= 0 and ((a == 0).any() or (b == 0).any()):
        raise ValueError("a value of 0 needs a positive rounding floor to be censored at")
    low_a, low_b = a <= floor, b <= floor
    logs = np.log(np.maximum(b, floor)) - np.log(np.maximum(a, floor))
    return logs, low_a | low_b, low_a & low_b


# ----------------------------------------------------------------------------- comparisons


@dataclass(frozen=True)
class Comparison:
    """The comparison of one quantity: `ratio` Sinkhorn / softmax (geometric mean over
    units) with its interval [`low`, `high`] at `level`, the number of `units`, how many
    values were `censored` at the floor and how many pairs `tied` there, the `margin`, what
    the interval `found` (one of `FOUND`) and the smallest ratio it could have `detectable`
    (at `POWER`)."""

    ratio: float
    low: float
    high: float
    level: float
    units: int
    censored: int
    tied: int
    margin: float
    found: str
    detectable: float

    def summary(self, unit: str = "units") -> str:
        """'ratio 1.32 (95% interval 1.10–1.58, 8 units): higher': the estimate, then what
        it found in `WORDS`, the units named `unit`."""
        said = WORDS[self.found]
        if not np.isfinite(self.low):
            why = "mostly tied at the rounding floor" if self.tied else "too few"
            return f"no interval ({self.units} {unit}, {why}): {said}"
        censored = f", {self.censored} at the rounding floor" if self.censored else ""
        return (f"ratio {significant(self.ratio)} ({100 * self.level:.3g}% interval "
                f"{significant(self.low)}–{significant(self.high)}, {self.units} {unit}"
                f"{censored}): {said}")


def _comparison(estimate: Estimate | None, level: float, margin: float, direction: str,
                units: int, censored: int, tied: int, values: int) -> Comparison:
    nan = math.nan
    if estimate is None or mostly_at_floor(tied, values):
        ratio = math.exp(estimate.log_ratio) if estimate else nan
        return Comparison(ratio, nan, nan, level, units, censored, tied, margin, "undecided",
                          nan)
    ratio, low, high = estimate.interval(level)
    return Comparison(ratio, low, high, level, units, censored, tied, margin,
                      found_of(ratio, low, high, margin),
                      estimate.detectable(level, direction, margin))


def compare(softmax, sinkhorn, *, margin: float = MARGIN, floor: float = 0.0,
            level: float = LEVEL, direction: str = "more") -> Comparison:
    """Compare paired per-unit values: `softmax[i]` and `sinkhorn[i]` belong to unit i.

    Values at or below `floor` are censored (see the module docstring); `direction` only
    sets how `detectable` is stated (a difference, or parity)."""
    check_level(level), check_margin(margin), check_direction(direction), check_floor(floor)
    a, b = floats(softmax), floats(sinkhorn)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired comparisons need two 1-D arrays of equal length; got shapes "
                         f"{a.shape} and {b.shape}")
    logs, censored, tied = censored_logs(a, b, floor)
    estimate = paired_estimate(logs) if len(logs) >= MIN_UNITS else None
    return _comparison(estimate, level, margin, direction, len(logs),
                       int(censored.sum()), int(tied.sum()), len(logs))


def compare_groups(reference, other, *, margin: float = MARGIN, floor: float = 0.0,
                   level: float = LEVEL, direction: str = "more") -> Comparison:
    """Compare two independent groups of positive values (not paired: random matrices
    against trained models, say): the ratio of geometric means `other` / `reference` with
    Welch's t interval; values at or below `floor` are censored at it, and when both groups
    are mostly there the comparison is a tie (`groups_tied`: no verdict). `units` counts the
    smaller group; 'more' means `other` is the larger."""
    check_level(level), check_margin(margin), check_direction(direction), check_floor(floor)
    groups = [floats(v) for v in (reference, other)]
    if any(g.ndim != 1 for g in groups):
        raise ValueError("compare_groups needs two 1-D arrays")
    logs = [censored_logs(np.ones_like(g), g, floor) for g in groups]
    at_floor = [int(c.sum()) for _, c, _ in logs]
    units = min(len(g) for g in groups)
    estimate = (groups_estimate(logs[0][0], logs[1][0]) if units >= MIN_UNITS else None)
    return _comparison(estimate, level, margin, direction, units, sum(at_floor),
                       groups_tied(at_floor, [len(g) for g in groups]),
                       sum(len(g) for g in groups))


def groups_tied(at_floor, sizes) -> int:
    """Two independent groups tie at the floor when each is mostly there (more than
    `MAX_TIED` of its values): then all their floor values count as tied (no verdict);
    otherwise none do."""
    both = all(mostly_at_floor(a, n) for a, n in zip(at_floor, sizes))
    return int(sum(at_floor)) if both else 0


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
                  value: str = "residual", *, within: list[str] | None = None, **options
                  ) -> pd.DataFrame:
    """`compare` per group of `by`, over the independent units named by `unit` (see
    `unit_values`), the intervals simultaneous over the groups that share the values of
    `within` (one curve of a figure; default: every group of the table). One row per group:
    by, ratio, low, high, level, units, censored, tied, detectable, verdict (what the
    interval found)."""
    wide = unit_values(table, unit, by, value)
    groups = list(wide.groupby(by)) if by else [((), wide)]  # put in `table`'s order below
    sizes = (wide.groupby(within)[by].apply(lambda g: len(g.drop_duplicates()))
             if within else None)
    base = options.pop("level", LEVEL)
    rows = []
    for key, g in groups:
        labels = dict(zip(by or [], key))  # grouped by a list: every key is a tuple
        size = (sizes[tuple(labels[w] for w in within) if len(within) > 1
                      else labels[within[0]]] if within else len(groups))
        c = compare(g["softmax"], g["sinkhorn"], level=family_level(size, base), **options)
        rows.append({**labels, "ratio": c.ratio, "low": c.low, "high": c.high,
                     "level": c.level, "units": c.units, "censored": c.censored,
                     "tied": c.tied, "detectable": c.detectable, "verdict": c.found})
    result = pd.DataFrame(rows)
    # groups in the order they first appear in `table` (variants in the chapter's order)
    return table[by].drop_duplicates().merge(result) if by else result


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x (at least two distinct x)."""
    x, y = floats(x), floats(y)
    if len(np.unique(x)) < 2 or x.shape != y.shape:
        raise ValueError(f"a slope needs at least two distinct x values and as many y; got "
                         f"x={x.tolist()}, y={y.tolist()}")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def growth_factor(layers, lost) -> float:
    """The factor by which each layer multiplies `lost` (e.g. the digits a residual has lost,
    -log10 r): exp of the least-squares slope of log(lost) against the layer index, over the
    positive finite values. Constant under doubly exponential decay (3 under the cubic law);
    NaN with fewer than two such values."""
    layers, lost = floats(layers), floats(lost)
    keep = np.isfinite(lost) & (lost > 0)
    if keep.sum() < 2:
        return math.nan
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
             more: str = "Sinkhorn higher", less: str = "Sinkhorn lower") -> str:
    """One factual sentence about a `compare_table` result over `x` (depths, layers): where
    each result holds, e.g. 'Sinkhorn higher at depths 1–3; Sinkhorn lower at depths
    5–12; parity at depth 4.' Results that hold nowhere are left out. `more` and
    `less` name the directions for other ratios ('random higher'); the other results are
    `WORDS`."""
    words = {**WORDS, "more": more, "less": less}
    parts = []
    for found in FOUND:
        where = results.loc[results["verdict"] == found, x].tolist()
        if where:
            plural = noun + ("s" if len(where) > 1 else "")
            parts.append(f"{words[found]} at {plural} {ranges(where)}")
    return ("; ".join(parts) or "no comparison") + "."
