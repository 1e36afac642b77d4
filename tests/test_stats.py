"""Intervals, censoring and comparisons on constructed data whose answer is known: each test
fails if the ratio is inverted, the sign flipped, above and below swapped, the level or the
margin changed, or units confused with rows. Expected values are written out, not imported
from the module under test."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankcollapse.stats import (Estimate, censored_logs, compare, compare_groups, compare_table,
                                describe, family_level, found_of, groups_estimate, loglog_slope,
                                growth_factor, outcome_of, paired_estimate, ranges, significant,
                                t_quantile, unit_values)

rng = np.random.default_rng(0)
BASE = rng.lognormal(size=24)  # softmax residuals of 24 independent units


@pytest.mark.parametrize("factor, expected", [(2.0, "more"), (0.5, "less"), (1.0, "parity"),
                                              (1.03, "parity")])
def test_direction_on_constructed_data(factor, expected):
    c = compare(BASE, factor * BASE)
    assert c.found == expected
    assert c.ratio == pytest.approx(factor) and c.low <= c.ratio <= c.high


def test_noise_is_undecided():
    noisy = BASE * 10 ** np.random.default_rng(1).normal(size=len(BASE))
    c = compare(BASE, noisy)
    assert c.found == "undecided" and c.low < 1 < c.high


def test_sinkhorn_is_the_numerator():
    assert compare([1.0] * 5, [4.0] * 5).ratio == 4.0
    assert compare([4.0] * 5, [1.0] * 5).ratio == 0.25


@given(st.floats(0.05, 20.0), st.integers(3, 40))
def test_constant_ratios_are_decided_by_the_margin(factor, units):
    c = compare(np.ones(units), np.full(units, factor))
    if 1 / 1.1 <= factor <= 1.1:
        assert c.found == "parity"
    else:
        assert c.found == ("more" if factor > 1 else "less")


def test_what_an_interval_finds_edges_and_order():
    assert found_of(1.0, 0.95, 1.05) == "parity"
    assert found_of(1.05, 1.01, 1.08) == "parity"  # above 1, but within the margin
    assert found_of(1.2, 1.05, 1.5) == "more" and found_of(0.8, 0.5, 0.95) == "less"
    # shown above 1, but the estimate inside the margin: no "more" (not of the margin's size)
    assert found_of(1.08, 1.02, 1.15) == "not less"
    assert found_of(0.93, 0.87, 0.98) == "not more"
    assert found_of(1.0, 0.95, 1.099) == "parity" and found_of(1.0, 0.95, 1.101) == "not less"
    assert found_of(1.0, 0.8, 1.3) == "undecided"
    assert found_of(1.1, 1.01, 1.2) == "more"  # the estimate exactly at the margin counts
    assert found_of(1.0999, 1.01, 1.2) == "not less"
    assert found_of(1.0, 0.9091, 1.05) == "parity" and found_of(1.0, 0.909, 1.05) == "not more"
    assert found_of(float("nan"), 0.5, 2.0) == "undecided"
    assert found_of(1.2, 1.05, 1.5, margin=0.2) == "more"
    assert found_of(1.15, 1.05, 1.5, margin=0.2) == "not less"


def test_a_bad_interval_is_an_error_not_a_verdict():
    with pytest.raises(ValueError, match="low <= ratio <= high"):
        found_of(1.1, 1.2, 1.05)  # inverted
    with pytest.raises(ValueError, match="low <= ratio <= high"):
        found_of(2.0, 0.9, 1.05)  # the estimate outside its interval
    with pytest.raises(ValueError, match="margin"):
        found_of(1.0, 0.9, 1.1, margin=-0.1)


@pytest.mark.parametrize("direction, found, expected", [
    ("more", "more", "agrees"), ("more", "less", "opposite"), ("more", "parity", "against"),
    ("more", "not more", "against"), ("more", "not less", "undecided"),
    ("more", "undecided", "undecided"),
    ("less", "less", "agrees"), ("less", "more", "opposite"), ("less", "not less", "against"),
    ("parity", "parity", "agrees"), ("parity", "more", "opposite"),
    ("parity", "less", "opposite"), ("parity", "not more", "undecided"),
    ("no more", "parity", "agrees"), ("no more", "less", "agrees"),
    ("no more", "not more", "agrees"), ("no more", "more", "opposite"),
    ("no more", "not less", "undecided"),
    ("no less", "more", "agrees"), ("no less", "not less", "agrees"),
    ("no less", "less", "opposite"), ("no less", "not more", "undecided"),
])
def test_outcomes_for_each_direction(direction, found, expected):
    assert outcome_of(direction, found) == expected


def test_a_misspelt_word_is_an_error():
    with pytest.raises(ValueError, match="direction"):
        outcome_of("More", "more")
    with pytest.raises(ValueError, match="unknown result"):
        outcome_of("more", "bigger")


@pytest.mark.parametrize("p, df, table", [(0.975, 1, 12.706), (0.975, 2, 4.303),
                                           (0.975, 4, 2.776), (0.95, 10, 1.812),
                                           (0.995, 20, 2.845), (0.8, 2, 1.061),
                                           (0.99167, 2, 7.649)])
def test_t_quantiles_match_the_printed_table(p, df, table):
    assert t_quantile(p, df) == pytest.approx(table, abs=2e-3)


def test_t_quantile_refuses_what_it_cannot_give():
    for p, df in ((0.4, 3), (1.0, 3), (0.9, 0), (0.9, 2.5)):
        with pytest.raises(ValueError):
            t_quantile(p, df)


def test_family_levels_are_bonferroni():
    assert family_level(1) == pytest.approx(0.95)
    assert family_level(3) == pytest.approx(1 - 0.05 / 3)
    assert family_level(10, 0.9) == pytest.approx(0.99)
    for bad in (0, 2.5):
        with pytest.raises(ValueError):
            family_level(bad)
    with pytest.raises(ValueError):
        family_level(2, 1.0)


def test_the_interval_is_students_t_of_the_mean_log_ratio():
    logs = np.log([1.5, 2.0, 3.0])
    c = compare(np.ones(3), np.exp(logs))
    half = 4.303 * logs.std(ddof=1) / np.sqrt(3)
    assert np.log(c.low) == pytest.approx(logs.mean() - half, abs=1e-3)
    assert np.log(c.high) == pytest.approx(logs.mean() + half, abs=1e-3)
    assert c.low < 1.5 and c.found == "undecided"  # three ratios above 1, but three is few
    assert compare(np.ones(12), np.exp(np.tile(logs, 4))).found == "more"
    # the level widens the interval: 99% against 95% (t quantiles 9.925 and 4.303, df 2)
    wide = compare(np.ones(3), np.exp(logs), level=0.99)
    assert np.log(wide.high / wide.low) == pytest.approx(
        np.log(c.high / c.low) * 9.925 / 4.303, rel=1e-3)


def test_estimates_refuse_too_few_or_non_finite_units():
    with pytest.raises(ValueError, match="at least 3"):
        paired_estimate([0.1, 0.2])
    with pytest.raises(ValueError, match="at least 3"):
        paired_estimate([0.1, np.nan, 0.2, 0.3])
    with pytest.raises(ValueError, match="at least 3"):
        groups_estimate([0.0, 1.0], [0.0, 1.0, 2.0])


def test_welch_estimate_against_the_formula():
    a, b = np.array([0.0, 1.0, 2.0, 3.0]), np.array([1.0, 1.5, 5.0])
    est = groups_estimate(a, b)
    va, vb = a.var(ddof=1) / 4, b.var(ddof=1) / 3
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)
    assert est.log_ratio == pytest.approx(b.mean() - a.mean())
    assert est.se == pytest.approx(math.sqrt(va + vb)) and est.df == int(df)
    assert est.units == (4, 3)
    constant = groups_estimate([1.0] * 3, [2.0] * 5)
    assert constant.se == 0 and constant.df == 2


def test_detectable_ratio_follows_the_power_formula():
    est = Estimate(0.0, 0.1, 4, (5,))
    t_level, t_power = t_quantile(0.975, 4), t_quantile(0.8, 4)
    assert est.detectable(0.95, "more") == pytest.approx(math.exp((t_level + t_power) * 0.1))
    # a small spread: the margin's own size sets the floor of what counts as detected
    tight = Estimate(0.0, 0.001, 4, (5,))
    assert tight.detectable(0.95, "more") == pytest.approx(1.1 * math.exp(t_power * 0.001))
    assert tight.detectable(0.95, "no more") == pytest.approx(
        math.exp((t_level + t_power) * 0.001))
    assert est.detectable(0.99, "more") > est.detectable(0.95, "more")
    assert est.detectable(0.95, "more", power=0.9) > est.detectable(0.95, "more")


def test_censored_values_enter_at_the_floor():
    logs, censored, tied = censored_logs([1e-20, 1e-3, 1e-20, 1.0], [1e-6, 1e-20, 1e-18, 2.0],
                                         floor=1e-15)
    assert logs == pytest.approx([np.log(1e-6 / 1e-15), np.log(1e-15 / 1e-3), 0.0, np.log(2)])
    assert censored.tolist() == [True, True, True, False]
    assert tied.tolist() == [False, False, True, False]
    with pytest.raises(ValueError, match="finite"):
        censored_logs([np.nan], [1.0], 1e-15)
    with pytest.raises(ValueError, match="non-negative"):
        censored_logs([-1.0], [1.0], 1e-15)
    with pytest.raises(ValueError, match="positive rounding floor"):
        censored_logs([0.0], [1.0], 0.0)
    with pytest.raises(ValueError, match="equal shapes"):
        censored_logs([1.0, 2.0], [1.0], 0.0)


def test_only_softmax_at_the_floor_counts_as_sinkhorn_keeping_more():
    """The pairs the old rule dropped: softmax collapsed to the floor, Sinkhorn did not."""
    floor = 2.2e-15
    softmax = np.full(5, 1e-17)  # at the floor: "at most 2.2e-15"
    sinkhorn = np.array([3e-9, 1e-8, 5e-9, 2e-8, 8e-9])
    c = compare(softmax, sinkhorn, floor=floor)
    assert c.found == "more" and c.censored == 5 and c.tied == 0
    assert c.ratio == pytest.approx(np.exp(np.mean(np.log(sinkhorn / floor))))
    mirror = compare(sinkhorn, softmax, floor=floor)
    assert mirror.found == "less"


def test_ties_at_the_floor_give_no_verdict_when_they_are_most_values():
    floor = 1e-15
    both = compare([1e-20] * 4 + [1.0], [1e-19] * 4 + [2.0], floor=floor)
    assert both.tied == 4 and both.found == "undecided" and not np.isfinite(both.low)
    assert "no interval" in both.summary()
    half = compare([1e-20] * 2 + [1.0] * 2, [1e-19] * 2 + [3.0] * 2, floor=floor)
    assert half.tied == 2 and np.isfinite(half.low)  # exactly half: still an interval


def test_few_units_give_no_interval():
    few = compare([1.0, 1.0], [2.0, 2.0])
    assert few.found == "undecided" and few.units == 2 and not np.isfinite(few.low)


def test_unpaired_groups_each_count_their_own_units():
    other = rng.lognormal(size=9) * 3.0  # a different number of units: no pairing possible
    c = compare_groups(BASE, other)
    expected = np.exp(np.log(other).mean() - np.log(BASE).mean())
    assert c.ratio == pytest.approx(expected) and c.units == 9 and c.low < c.ratio < c.high
    tight = 1 + 0.01 * rng.normal(size=24)
    assert compare_groups(tight, tight[::-1] * 1.02).found == "parity"
    assert compare_groups(BASE, BASE * 1.02).found == "undecided"  # unpaired: wide
    assert compare_groups(BASE, BASE / 10).found == "less"
    few = compare_groups(BASE, [1.0, 2.0])
    assert few.found == "undecided" and few.units == 2
    floored = compare_groups([1.0, 1.0, 1.0, 1e-30], [2.0, 2.0, 2.0], floor=1e-20)
    assert floored.censored == 1 and floored.ratio > 2  # the floored one enters at 1e-20
    with pytest.raises(ValueError, match="non-negative"):
        compare_groups([-1.0, 1.0, 1.0], [1.0, 1.0, 1.0])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="equal length"):
        compare([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="non-negative"):
        compare([-1.0, 1.0, 1.0], [1.0, 1.0, 1.0])


def test_units_are_summarised_by_their_median_before_comparing():
    """Unit 0 has 99 rows where Sinkhorn is 10x higher; units 1-3 one row each where it is
    lower. Counting rows would say 'more'; counting units says 'less' in 3 of 4."""
    rows = [{"unit": 0, "name": "softmax", "residual": 1.0}] * 99 + \
           [{"unit": 0, "name": "sinkhorn", "residual": 10.0}] * 99
    for unit in (1, 2, 3):
        rows += [{"unit": unit, "name": "softmax", "residual": 1.0},
                 {"unit": unit, "name": "sinkhorn", "residual": 0.5}]
    table = pd.DataFrame(rows).rename(columns={"name": "normalization"})
    wide = unit_values(table, "unit")
    assert len(wide) == 4 and wide.set_index("unit").loc[0, "sinkhorn"] == 10.0
    result = compare_table(table, "unit")
    assert result.units.item() == 4
    assert result.ratio.item() == pytest.approx(np.exp((np.log(10) + 3 * np.log(0.5)) / 4))


def _depth_table(factors, units=10):
    rows = []
    for depth, factor in factors:
        for unit, base in enumerate(BASE[:units]):
            rows += [{"depth": depth, "pool": unit, "normalization": "softmax", "residual": base},
                     {"depth": depth, "pool": unit, "normalization": "sinkhorn",
                      "residual": factor * base * (1 + 0.01 * (unit % 3 - 1))}]
    return pd.DataFrame(rows)


def test_compare_table_per_group_and_describe():
    rows = _depth_table([(1, 2.0), (2, 2.0), (3, 1.0), (4, 0.5)])
    result = compare_table(rows, "pool", by=["depth"])
    assert list(result.verdict) == ["more", "more", "parity", "less"]
    assert describe(result, "depth") == ("Sinkhorn keeps more at depths 1–2; Sinkhorn keeps "
                                         "less at depth 4; parity at depth 3.")
    with pytest.raises(ValueError, match="no rows for sinkhorn"):
        compare_table(rows.query("normalization == 'softmax'"), "pool")


def test_compare_table_intervals_hold_together_over_the_family():
    rows = _depth_table([(1, 2.0), (2, 2.0), (3, 1.0), (4, 0.5)])
    together = compare_table(rows, "pool", by=["depth"])
    assert together.level.tolist() == pytest.approx([1 - 0.05 / 4] * 4)
    single = compare(rows.query("depth == 1 and normalization == 'softmax'").residual.to_numpy(),
                     rows.query("depth == 1 and normalization == 'sinkhorn'").residual.to_numpy())
    assert together.high[0] - together.low[0] > single.high - single.low
    settings = pd.concat([rows.assign(setting="a"), rows[rows.depth <= 2].assign(setting="b")])
    per = compare_table(settings, "pool", by=["setting", "depth"], within=["setting"])
    assert per.level.tolist() == pytest.approx([1 - 0.05 / 4] * 4 + [1 - 0.05 / 2] * 2)


def test_small_helpers():
    assert ranges([7, 1, 2, 3]) == "1–3, 7" and ranges([4]) == "4"
    assert ranges([2.0, 0.5, 1.0]) == "0.5, 1, 2"  # only integers form runs
    assert loglog_slope([1, 10, 100], [1, 1000, 1e6]) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="two distinct"):
        loglog_slope([1.0], [0.79])
    with pytest.raises(ValueError, match="two distinct"):
        loglog_slope([2.0, 2.0], [1.0, 3.0])
    assert growth_factor([1, 2, 3], [1, 3, 9]) == pytest.approx(3.0)
    assert math.isnan(growth_factor([1, 2], [1, np.nan]))


def test_significant_digits_for_prose():
    assert [significant(x) for x in (0.90909, 1.0, 555.2, 1530.4, 2.5e-7, 12345.0)] == \
        ["0.909", "1.00", "555", "1530", "2.5e-07", "1.2e+04"]
