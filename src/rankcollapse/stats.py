"""Paired softmax/Sinkhorn comparisons over independent units, and the book's verdict rule.

Every sentence of the book that says which normalization keeps more rank comes from here.

The unit. A comparison resamples *independent* units: random weight draws, random networks,
independent pools of random matrices, test inputs, training seeds. Many values measured on
one unit (the paths drawn from one pool, the inputs fed to one network) are first summarised
by their median, so that they count once: overlapping paths from one pool are not independent
and are never resampled as if they were.

The rule. For each unit, the log ratio Sinkhorn / softmax of its two (paired) values; the
estimate is their mean (a geometric-mean ratio), with a percentile bootstrap interval over
units (`LEVEL`, `N_BOOT` resamples). Then, in this order:

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

from dataclasses import dataclass

import numpy as np
import pandas as pd

MARGIN = 0.1
LEVEL = 0.95
N_BOOT = 2000
MIN_UNITS = 3
VERDICTS = ("more", "less", "parity", "inconclusive")
_WORDS = {"more": "Sinkhorn keeps more", "less": "Sinkhorn keeps less",
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

    def summary(self) -> str:
        """'Sinkhorn keeps more (ratio 1.32, 95% interval 1.10-1.58, 8 units)'."""
        if not np.isfinite(self.ratio):
            return f"{_WORDS[self.verdict]} (no ratio: {self.units} usable units)"
        if not (np.isfinite(self.low) and np.isfinite(self.high)):
            return (f"{_WORDS[self.verdict]} (ratio {self.ratio:.3g} from {self.units} units, "
                    f"{self.excluded} left out: no interval)")
        left_out = f", {self.excluded} left out at the rounding floor" if self.excluded else ""
        return (f"{_WORDS[self.verdict]} (ratio {self.ratio:.3g}, {LEVEL:.0%} interval "
                f"{self.low:.3g}–{self.high:.3g}, {self.units} units{left_out})")


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
        ratio = float(np.exp(logs.mean())) if len(logs) else float("nan")
        return Comparison(ratio, float("nan"), float("nan"), len(logs), excluded, margin,
                          "inconclusive")
    rng = np.random.default_rng(seed)
    boot = logs[rng.integers(0, len(logs), (n_boot, len(logs)))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.exp(np.quantile(boot, [tail, 1 - tail]))
    return Comparison(float(np.exp(logs.mean())), float(low), float(high), len(logs), excluded,
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
             more: str = _WORDS["more"], less: str = _WORDS["less"]) -> str:
    """One factual sentence about a `compare_table` result over `x` (depths, layers): where
    each verdict holds, e.g. 'Sinkhorn keeps more at depths 1–3; Sinkhorn keeps less at
    depths 5–12; parity at depth 4.' Verdicts that hold nowhere are left out. `more` and
    `less` name the directions for quantities other than rank ('Sinkhorn higher')."""
    words = {**_WORDS, "more": more, "less": less}
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
COMPARISON_RULE = (
    "Each comparison is Sinkhorn / softmax over independent units (weight draws, pools of "
    "random matrices, networks or test inputs), as the geometric mean of paired ratios with a "
    f"{LEVEL:.0%} bootstrap interval over units; *parity* when the whole interval lies within "
    f"a factor {1 + MARGIN:g} of 1 (between {1 / (1 + MARGIN):.3f} and {1 + MARGIN:g}, unless "
    "another margin is stated; parity takes precedence even if the interval excludes 1), "
    "*Sinkhorn keeps more* (*less*) when it lies above (below) 1, *inconclusive* otherwise, "
    f"and whenever fewer than {MIN_UNITS} units are left or most units sit at the rounding "
    "floor.")
CLAIM_RULE = (
    "A claim is *reproduced* when every comparison that decides it agrees with the paper, "
    "*partly reproduced* when some do and no more of them show the opposite (the finding says "
    "which), *contradicted* when more show the opposite than agree, *not reproduced* otherwise; "
    "a claim decided by a numerical check is reproduced when the check, stated with it, "
    "passes, and *not testable here* when this run cannot decide it (the finding says why).")
_OPPOSITE = {"more": "less", "less": "more"}


def claim_verdict(expected: str, found: list[str]) -> str:
    """Verdict on a claim of the paper from the verdicts of its comparisons (one per depth or
    layer, or a single one). `expected`: what the paper reports, 'more', 'less' or 'parity'.

    reproduced: every comparison finds `expected`; partly reproduced: some do and no more find
    the opposite; contradicted: more find the opposite beyond the margin than find `expected`
    (for a claim of parity the opposite is a difference either way); not reproduced:
    otherwise (parity or inconclusive where the paper reports a difference, or inconclusive
    where it reports parity)."""
    if expected not in ("more", "less", "parity"):
        raise ValueError(f"expected must be 'more', 'less' or 'parity'; got {expected!r}")
    if not found:
        return "not testable here"
    opposite = {"more", "less"} if expected == "parity" else {_OPPOSITE[expected]}
    hits, against = sum(v == expected for v in found), sum(v in opposite for v in found)
    if hits == len(found):
        return "reproduced"
    if against > hits:
        return "contradicted"
    return "partly reproduced" if hits else "not reproduced"


def check_verdict(holds: bool | None) -> str:
    """Verdict on a claim decided by one numerical check (a slope, a bound)."""
    if holds is None:
        return "not testable here"
    return "reproduced" if holds else "not reproduced"


@dataclass(frozen=True)
class Claim:
    """One claim of the paper (id from the book's claim list), its verdict and the finding
    that decided it, in words generated from the run's numbers."""

    id: str
    claim: str
    verdict: str
    finding: str

    def __post_init__(self):
        if self.verdict not in CLAIM_VERDICTS:
            raise ValueError(f"unknown claim verdict {self.verdict!r}; valid: "
                             f"{', '.join(CLAIM_VERDICTS)}")

    def markdown(self) -> str:
        return f"- **{self.id}** {self.claim}: **{self.verdict}**. {self.finding}"


def claims_markdown(claims: list[Claim]) -> str:
    """A bullet list of claims for a chapter's summary box, followed by the rules."""
    return "\n".join(c.markdown() for c in claims) + f"\n\n{COMPARISON_RULE} {CLAIM_RULE}"
