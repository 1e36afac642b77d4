"""Intervals, censoring and comparisons on constructed data whose answer is known: each test
fails if the ratio is inverted, the sign flipped, above and below swapped, the level or the
margin changed, or units confused with rows. Expected values are written out, not imported
from the module under test."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rankcollapse.stats import (Estimate, censored_logs, compare, compare_groups, compare_table,
                                describe, family_level, found_of, groups_estimate, groups_tied,
                                loglog_slope,
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
    assert describe(result, "depth") == ("Sinkhorn higher at depths 1–2; Sinkhorn lower "
                                         "at depth 4; parity at depth 3.")
    with pytest.raises(ValueError, match="no rows for sinkhorn"):
        compare_table(rows.query("normalization == 'softmax'"), "pool")


def test_compare_table_intervals_hold_together_over_the_family():
    rows = _depth_table([(1, 2.0), (2, 2.0), (3, 1.0), (4, 0.5)])
    together = compare_table(rows, "pool", by=["depth"])
    assert together.level.tolist() == pytest.approx([1 - 0.05 / 4] * 4)
    single = compare(rows.query("depth == 1 and normalization == 'softmax'").residual.to_numpy(),
                     rows.query("depth == 1 and normalization == 'sinkhorn'").residual.to_numpy())
    assert together.high[0] - together.low[0] > single.high - single.low
    two = pd.concat([rows.assign(setting="a"), rows[rows.depth <= 2].assign(setting="b")])
    per = compare_table(two, "pool", by=["setting", "depth"], within=["setting"])
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
        ["0.909", "1.00", "555", "1530", "2.5×10⁻⁷", "1.23×10⁴"]


# ----------------------------------------------------------------------------- exact values
# The values below are written out, or computed by the plain loops of tests/references.py.

from references import (PLAIN_OUTCOMES, plain_censor, plain_detectable,  # noqa: E402
                        plain_interval, plain_mean, plain_sd, plain_welch, t_closed)
from rankcollapse.stats import mostly_at_floor  # noqa: E402


@pytest.mark.parametrize("p, df", [(0.975, 1), (0.9, 1), (0.99, 1), (0.6, 1), (0.8, 2),
                                   (0.975, 2), (0.6, 2), (0.99167, 2), (0.975, 4), (0.8, 4),
                                   (0.55, 4), (0.9995, 4)])
def test_t_quantiles_match_the_closed_forms_closely(p, df):
    assert t_quantile(p, df) == pytest.approx(t_closed(p, df), rel=1e-9)


@pytest.mark.parametrize("p, df, table", [(0.95, 10, 1.812461123), (0.995, 20, 2.845339710),
                                           (0.975, 30, 2.042272456), (0.6, 10, 0.260184829),
                                           (0.975, 3, 3.182446305), (0.9, 7, 1.414923928)])
def test_t_quantiles_match_nine_digit_tables(p, df, table):
    assert t_quantile(p, df) == pytest.approx(table, rel=1e-7)


def test_t_quantile_messages_and_edges():
    for p, df in ((0.5, 3), (1.0, 3), (0.9, 0), (0.9, 2.5), (0.9, -1)):
        with pytest.raises(ValueError, match=r"need 0\.5 < p < 1 and a whole df >= 1; got "
                                             rf"p={p}, df={df}$"):
            t_quantile(p, df)
    assert t_quantile(0.75, 1) == pytest.approx(1.0, rel=1e-9)  # tan(pi / 4)
    assert t_quantile(0.5000001, 1) == pytest.approx(math.tan(math.pi * 1e-7), rel=1e-4)


def test_family_level_messages_and_edges():
    assert family_level(1, 0.9) == pytest.approx(0.9)
    assert family_level(4) == pytest.approx(0.9875)
    assert family_level(2.0) == pytest.approx(0.975)  # a whole float is a whole number
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match=r"^a family has a positive whole number of "
                                             rf"members; got {bad}$"):
            family_level(bad)
    for bad in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match=r"^a confidence level lies strictly between 0 "
                                             rf"and 1; got {bad}$"):
            family_level(2, bad)
    assert family_level(2, 1e-9) == pytest.approx(1 - (1 - 1e-9) / 2)


def test_mostly_at_floor_is_strictly_more_than_half():
    assert not mostly_at_floor(5, 10) and mostly_at_floor(6, 10)
    assert not mostly_at_floor(0, 0) and mostly_at_floor(1, 1) and not mostly_at_floor(0, 1)
    assert mostly_at_floor([2, 3, 4], [6, 6, 6]).tolist() == [False, False, True]


@pytest.mark.parametrize("x, text", [
    (float("nan"), "nan"), (float("inf"), "inf"), (-float("inf"), "-inf"), (0.0, "0"),
    (1000.0, "1000"), (9999.4, "9999"), (10000.0, "10⁴"), (-1530.4, "-1530"),
    (999.4, "999"), (100.0, "100"), (0.001, "0.00100"), (0.000999, "9.99×10⁻⁴"), (-1e-9, "-10⁻⁹"), (2.86e4, "2.86×10⁴"),
    (-0.5, "-0.500"), (0.0012345, "0.00123"), (12.34, "12.3"), (-2.5e-7, "-2.5×10⁻⁷")])
def test_significant_at_its_edges(x, text):
    assert significant(x) == text


def test_estimate_interval_and_power_written_out():
    est = Estimate(math.log(1.2), 0.05, 4, (5,))
    t975, t80 = 2.7764451052, 0.9409645772  # df 4
    ratio, low, high = est.interval(0.95)
    assert ratio == pytest.approx(1.2, rel=1e-12)
    assert low == pytest.approx(1.2 * math.exp(-t975 * 0.05), rel=1e-9)
    assert high == pytest.approx(1.2 * math.exp(t975 * 0.05), rel=1e-9)
    # the level term (2.776 * 0.05 = 0.139) exceeds log(1.1) = 0.095; a margin of 0.5 does not
    assert est.detectable(0.95, "more") == pytest.approx(math.exp((t975 + t80) * 0.05), rel=1e-9)
    assert est.detectable(0.95, "less") == pytest.approx(math.exp((t975 + t80) * 0.05), rel=1e-9)
    assert est.detectable(0.95, "more", margin=0.5) == pytest.approx(
        1.5 * math.exp(t80 * 0.05), rel=1e-9)
    for direction in ("parity", "no more", "no less"):
        assert est.detectable(0.95, direction, margin=0.5) == pytest.approx(
            math.exp((t975 + t80) * 0.05), rel=1e-9)
    t90 = 1.5332062741  # df 4, power 0.9
    assert est.detectable(0.95, "no less", power=0.9) == pytest.approx(
        math.exp((t975 + t90) * 0.05), rel=1e-9)
    t995 = t_closed(0.995, 4)
    assert est.detectable(0.99, "parity") == pytest.approx(math.exp((t995 + t80) * 0.05),
                                                           rel=1e-9)


def test_paired_estimate_written_out():
    logs = [0.1, 0.3, -0.2, 0.4]
    est = paired_estimate(logs)
    assert est.log_ratio == pytest.approx(0.15, rel=1e-12)
    assert est.se == pytest.approx(plain_sd(logs) / 2, rel=1e-12)
    assert est.df == 3 and est.units == (4,)
    three = paired_estimate([1.0, 2.0, 3.0])
    assert (three.df, three.units, three.se) == (2, (3,), pytest.approx(1 / math.sqrt(3)))
    with pytest.raises(ValueError, match=r"^a paired estimate needs at least 3 finite per-unit "
                                         r"log ratios; got \[0\.1, 0\.2\]$"):
        paired_estimate([0.1, 0.2])
    with pytest.raises(ValueError, match=r"log ratios; got \[1\.0, 2\.0\]$"):
        paired_estimate([1, 2])  # whole numbers are read as floats
    with pytest.raises(ValueError, match="at least 3"):
        paired_estimate([[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]])
    with pytest.raises(ValueError, match="at least 3"):
        paired_estimate([0.1, np.inf, 0.2, 0.3])


def test_groups_estimate_rounds_the_welch_df_down():
    a, b = [0.0, 0.1, 0.3, 0.2, 0.5], [1.0, 3.0, 2.5]
    mean, se, df = plain_welch(a, b)
    est = groups_estimate(a, b)
    assert (est.log_ratio, est.se) == (pytest.approx(mean), pytest.approx(se))
    assert est.df == df == 2 and est.units == (5, 3)  # Welch df 2.08
    c, d = [0.0, 1.0, 2.0, 4.0], [0.5, 1.5, 2.0, 3.5, 4.0]
    exact = ((np.var(c, ddof=1) / 4 + np.var(d, ddof=1) / 5) ** 2
             / ((np.var(c, ddof=1) / 4) ** 2 / 3 + (np.var(d, ddof=1) / 5) ** 2 / 4))
    assert groups_estimate(c, d).df == math.floor(exact) == plain_welch(c, d)[2]
    assert exact % 1 > 0.5  # rounding would give one more
    one = groups_estimate([1.0] * 3, [2.0, 2.5, 3.0, 1.0])  # one group constant
    assert one.df == 3 and one.se == pytest.approx(plain_sd([2.0, 2.5, 3.0, 1.0]) / 2)
    with pytest.raises(ValueError, match=r"^each group needs at least 3 finite values; got "
                                         r"sizes \[3, 2\]$"):
        groups_estimate([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"got sizes \[6, 3\]"):
        groups_estimate([[1.0, 2.0, 3.0]] * 2, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"got sizes \[3, 3\]"):
        groups_estimate([1.0, 2.0, 3.0], [1.0, np.nan, 3.0])


@pytest.mark.parametrize("ratio, low, high, margin, found", [  # worked out by hand
    (1.0, 1 / 1.1, 1.1, 0.1, "parity"),  # the interval exactly fills the band
    (1.0, 0.9090909, 1.05, 0.1, "not more"),  # its bottom just below the band
    (1.05, 1.0, 1.1, 0.1, "parity"),
    (1.1, 1.0000001, 1.3, 0.1, "more"),  # above 1, the estimate exactly the margin's size
    (1.1, 1.0, 1.3, 0.1, "not less"),  # its bottom at 1 is not above 1
    (1 / 1.1, 0.8, 0.9999999, 0.1, "less"),
    (1 / 1.1, 0.8, 1.0, 0.1, "not more"),  # its top at 1 is not below 1
    (1.05, 0.95, 1.0999999, 0.1, "parity"),
    (1.05, 0.92, 1.1000001, 0.1, "not less"),  # its top just above the band
    (0.95, 1 / 1.1 + 1e-9, 1.2, 0.1, "not less"),
    (0.95, 1 / 1.1, 1.2, 0.1, "undecided"),  # its bottom at the band's edge excludes nothing
    (1.0, 1.0, 1.0, 0.0, "parity"),  # no margin: a point at 1
    (1.0, 0.99, 1.01, 0.0, "undecided"),
    (1.3, 1.2, 1.4, 0.3, "more"),
    (1.0, 0.9, 1.1, 0.1, "undecided"),  # wider than the band on both sides
    (1.29, 1.2, 1.4, 0.3, "not less"),  # above 1, but the estimate short of the margin
    (0.7, 0.6, 0.75, 0.3, "less"),
    (1 / 1.3, 0.6, 0.99, 0.3, "less"),
    (1.5, 0.5, 3.0, 0.1, "undecided")])
def test_found_of_at_its_edges_written_out(ratio, low, high, margin, found):
    assert found_of(ratio, low, high, margin) == found


MIRRORED = {"more": "less", "less": "more", "not more": "not less", "not less": "not more",
            "parity": "parity", "undecided": "undecided"}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-3, 3), min_size=3, max_size=3), st.sampled_from([0.0, 0.1, 0.3]))
def test_found_of_mirrors_under_swapping_the_normalizations(logs, margin):
    """Sinkhorn / softmax and softmax / Sinkhorn are the same comparison: inverting the
    interval mirrors what it finds (an independent statement of the rule, not a copy)."""
    low, ratio, high = (math.exp(x) for x in sorted(logs))
    edges = (1.0, 1 + margin, 1 / (1 + margin))
    assume(all(abs(math.log(v / e)) > 1e-9 for v in (low, ratio, high) for e in edges))
    assert found_of(1 / ratio, 1 / high, 1 / low, margin) == \
        MIRRORED[found_of(ratio, low, high, margin)]


def test_found_of_edges_written_out():
    assert found_of(1.0, 1 / 1.1, 1.1) == "parity"
    assert found_of(1.1, 1.0, 1.3) == "not less"  # the bottom exactly at 1: not above 1
    assert found_of(1 / 1.1, 0.8, 1.0) == "not more"
    assert found_of(1.0, 1.0, 1.0, margin=0.0) == "parity"
    assert found_of(0.95, 1 / 1.1, 1.2) == "undecided"  # exactly at the bottom: not above it
    assert found_of(1.0, 0.9, 1.1) == "undecided"  # the top exactly at the margin: not below
    assert found_of(1.0, 0.5, float("inf")) == "undecided"
    assert found_of(1.0, float("nan"), 2.0) == "undecided"
    with pytest.raises(ValueError, match=r"^an interval needs 0 < low <= ratio <= high; got "
                                         r"low=0\.0, ratio=1\.0, high=2\.0$"):
        found_of(1.0, 0.0, 2.0)
    with pytest.raises(ValueError, match=r"^a parity margin is a finite number >= 0 \(0\.1: "
                                         r"within a factor 1\.1 of 1\); got -0\.1$"):
        found_of(1.0, 0.9, 1.1, margin=-0.1)


@pytest.mark.parametrize("bad", [1.5, 0.0, 1.0, -0.2, float("nan"), "0.95", None, True])
def test_a_level_outside_zero_to_one_is_refused_by_name(bad):
    from rankcollapse.stats import compare, compare_groups

    values = [1.0, 2.0, 3.0, 4.0]
    for call in (lambda: compare(values, values, level=bad),
                 lambda: compare_groups(values, values, level=bad),
                 lambda: family_level(3, bad)):
        with pytest.raises(ValueError, match="confidence level"):
            call()


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "0.1", None])
def test_a_margin_that_is_not_a_finite_non_negative_number_is_refused_by_name(bad):
    """NaN once made every interval 'undecided' without a word."""
    from rankcollapse.stats import compare

    with pytest.raises(ValueError, match="parity margin"):
        compare([1.0, 2.0, 3.0], [1.1, 2.1, 3.2], margin=bad)
    with pytest.raises(ValueError, match="parity margin"):
        found_of(float("nan"), 1.0, 2.0, margin=bad)


def test_outcomes_for_every_direction_and_result():
    for direction, per in PLAIN_OUTCOMES.items():
        for found, outcome in per.items():
            assert outcome_of(direction, found) == outcome, (direction, found)
    with pytest.raises(ValueError, match=r"^a claim's direction is one of 'more', 'less', "
                                         r"'parity', 'no more', 'no less'; got 'either'$"):
        outcome_of("either", "more")
    with pytest.raises(ValueError, match=r"^unknown result 'bigger'; valid: more, less, parity, "
                                         r"not more, not less, undecided$"):
        outcome_of("more", "bigger")


def test_censored_logs_at_the_floor_exactly():
    a = [1e-10, 2e-10, 1e-10, 3.0, 0.0]
    b = [5e-10, 1e-10, 1e-10, 1.5, 2e-10]
    logs, censored, tied = censored_logs(a, b, 1e-10)
    ref_logs, ref_censored, ref_tied = plain_censor(a, b, 1e-10)
    assert logs == pytest.approx(ref_logs, rel=1e-12, abs=1e-15)
    assert censored.tolist() == ref_censored == [True, True, True, False, True]
    assert tied.tolist() == ref_tied == [False, False, True, False, False]
    with pytest.raises(ValueError, match=r"^a value of 0 needs a positive rounding floor to be "
                                         r"censored at$"):
        censored_logs([1.0], [0.0], 0.0)  # a zero on the Sinkhorn side only
    with pytest.raises(ValueError, match="a rounding floor is a finite number >= 0"):
        censored_logs([0.0], [1.0], -1.0)  # a negative floor is no floor at all
    with pytest.raises(ValueError, match=r"^paired values need equal shapes; got \(2,\) and "
                                         r"\(1,\)$"):
        censored_logs([1.0, 2.0], [1.0], 0.0)
    with pytest.raises(ValueError, match=r"^paired values must be finite \(a residual or norm "
                                         r"that is NaN or infinite is a failed measurement, not "
                                         r"a censored one\)$"):
        censored_logs([1.0], [np.inf], 1e-15)
    with pytest.raises(ValueError, match=r"^compared values must be non-negative \(residuals, "
                                         r"norms\)$"):
        censored_logs([1.0], [-1.0], 1e-15)
    logs, censored, tied = censored_logs([2.0, 3.0], [4.0, 1.0], 0.0)  # no floor: nothing censored
    assert logs == pytest.approx([math.log(2), math.log(1 / 3)])
    assert not censored.any() and not tied.any()


def _reference_paired(softmax, sinkhorn, floor=0.0, level=0.95, margin=0.1, direction="more"):
    logs, censored, tied = plain_censor(softmax, sinkhorn, floor)
    n = len(logs)
    se, df = plain_sd(logs) / math.sqrt(n), n - 1
    q = t_closed if df in (1, 2, 4) else t_quantile
    ratio, low, high = plain_interval(plain_mean(logs), se, df, level, q)
    return dict(ratio=ratio, low=low, high=high, level=level, units=n, censored=sum(censored),
                tied=sum(tied), margin=margin, found=found_of(ratio, low, high, margin),
                detectable=plain_detectable(se, df, level, direction, margin, q))


def _fields(c):
    return dict(ratio=c.ratio, low=c.low, high=c.high, level=c.level, units=c.units,
                censored=c.censored, tied=c.tied, margin=c.margin, found=c.found,
                detectable=c.detectable)


@pytest.mark.parametrize("softmax, sinkhorn, options", [
    ([1.0, 2.0, 3.0, 4.0, 5.0], [1.5, 2.2, 3.9, 4.1, 7.0], {}),
    ([1.0, 2.0, 3.0, 4.0, 5.0], [1.5, 2.2, 3.9, 4.1, 7.0], dict(level=0.99, margin=0.3,
                                                                direction="parity")),
    ([1e-18, 1e-3, 1.0, 2.0, 1e-20], [1e-9, 1e-18, 1.2, 2.2, 1e-19],
     dict(floor=1e-15, direction="no more")),
    ([1.0, 2.0, 4.0], [0.5, 0.9, 2.1], dict(direction="less", margin=0.2)),
    ([2.0, 2.0, 2.0, 2.0, 2.0], [2.05, 2.01, 2.1, 2.0, 2.02], dict(margin=0.05, level=0.9)),
])
def test_compare_matches_the_plain_loop_in_every_field(softmax, sinkhorn, options):
    c = compare(softmax, sinkhorn, **options)
    expected = _reference_paired(softmax, sinkhorn, **options)
    got = _fields(c)
    for key in ("found", "units", "censored", "tied", "level", "margin"):
        assert got[key] == expected[key], key
    for key in ("ratio", "low", "high", "detectable"):
        assert got[key] == pytest.approx(expected[key], rel=1e-9), key


def test_compare_without_an_interval_keeps_what_it_can():
    few = compare([1.0, 2.0], [2.0, 8.0], margin=0.3, level=0.9)
    assert math.isnan(few.ratio) and math.isnan(few.low) and math.isnan(few.high)
    assert math.isnan(few.detectable)
    assert (few.level, few.units, few.censored, few.tied, few.margin, few.found) == (
        0.9, 2, 0, 0, 0.3, "undecided")
    tied = compare([1e-20, 1e-20, 1e-20, 1.0, 2.0], [1e-19, 1e-18, 1e-20, 4.0, 8.0],
                   floor=1e-15, level=0.9, margin=0.2)
    assert tied.ratio == pytest.approx(4 ** 0.4, rel=1e-9)  # three ties (log 0), two 4x
    assert math.isnan(tied.low) and math.isnan(tied.high) and math.isnan(tied.detectable)
    assert (tied.level, tied.units, tied.censored, tied.tied, tied.margin, tied.found) == (
        0.9, 5, 3, 3, 0.2, "undecided")
    with pytest.raises(ValueError, match=r"^paired comparisons need two 1-D arrays of equal "
                                         r"length; got shapes \(2,\) and \(1,\)$"):
        compare([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="equal length"):
        compare([[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]])


def test_compare_groups_matches_welch_in_every_field():
    reference = [1.0, 1.5, 0.8, 1.2, 1e-25]
    other = [3.0, 2.5, 4.0, 1e-30]
    c = compare_groups(reference, other, floor=1e-20, level=0.9, margin=0.2, direction="parity")
    logs_ref = [math.log(max(v, 1e-20)) for v in reference]
    logs_other = [math.log(max(v, 1e-20)) for v in other]
    mean, se, df = plain_welch(logs_ref, logs_other)
    ratio, low, high = plain_interval(mean, se, df, 0.9, t_quantile)
    assert (c.ratio, c.low, c.high) == (pytest.approx(ratio), pytest.approx(low),
                                        pytest.approx(high))
    assert (c.level, c.units, c.censored, c.tied, c.margin) == (0.9, 4, 2, 0, 0.2)
    assert c.found == found_of(ratio, low, high, 0.2)
    assert c.detectable == pytest.approx(plain_detectable(se, df, 0.9, "parity", 0.2,
                                                          t_quantile))
    few = compare_groups([1.0, 2.0, 3.0, 1e-30], [1.0, 2.0], floor=1e-20, level=0.8)
    assert math.isnan(few.ratio) and math.isnan(few.low) and few.units == 2
    assert (few.censored, few.level, few.found) == (1, 0.8, "undecided")
    exactly = compare_groups([1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 2.0])
    assert exactly.units == 3 and np.isfinite(exactly.low)
    assert exactly.ratio == pytest.approx(math.exp(plain_mean(np.log([2.0, 4.0, 6.0, 2.0]))
                                                   - plain_mean(np.log([1.0, 2.0, 3.0]))))
    with pytest.raises(ValueError, match=r"^compare_groups needs two 1-D arrays$"):
        compare_groups([[1.0, 2.0, 3.0]], [1.0, 2.0, 3.0])


def test_summaries_written_out():
    c = compare([1.0] * 4 + [1e-20], [2.0, 2.2, 1.9, 2.1, 2e-15], floor=1e-15)
    assert c.summary() == ("ratio 2.04 (95% interval 1.90–2.18, 5 units, "
                           "1 at the rounding floor): higher")
    assert c.ratio == pytest.approx((2.0 * 2.2 * 1.9 * 2.1 * 2.0) ** 0.2)
    plain = compare([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], level=1 - 0.05 / 3)
    assert plain.summary("seeds") == (
        "ratio 2.00 (98.3% interval 2.00–2.00, 3 seeds): higher")
    few = compare([1.0, 2.0], [1.0, 2.0])
    assert few.summary("pools") == "no interval (2 pools, too few): undecided"
    tied = compare([1e-20] * 4 + [1.0], [1e-19] * 4 + [2.0], floor=1e-15)
    assert tied.summary() == ("no interval (5 units, mostly tied at the rounding floor): "
                              "undecided")


def test_unit_values_keys_order_and_messages():
    table = pd.DataFrame([
        {"task": t, "seed": s, "layer": l, "normalization": n, "residual": v, "other": 2 * v}
        for t in ("b", "a") for s in (0, 1) for l in (1, 2) for n, v in
        (("sinkhorn", 3.0 + s + l), ("softmax", 1.0 + s))])
    wide = unit_values(table, ["seed", "layer"], by=["task"])
    assert list(wide.columns) == ["task", "seed", "layer", "softmax", "sinkhorn"]
    assert len(wide) == 8
    row = wide[(wide.task == "a") & (wide.seed == 1) & (wide.layer == 2)].iloc[0]
    assert (row.softmax, row.sinkhorn) == (2.0, 6.0)
    medians = unit_values(table, "seed", value="other")
    assert list(medians.columns) == ["seed", "softmax", "sinkhorn"]
    assert medians.softmax.tolist() == [2.0, 4.0] and medians.sinkhorn.tolist() == [9.0, 11.0]
    with pytest.raises(ValueError, match=r"^the table has no rows for softmax$"):
        unit_values(table[table.normalization == "sinkhorn"], "seed")
    with pytest.raises(ValueError, match=r"^the table has no rows for sinkhorn, softmax$"):
        unit_values(table.assign(normalization="x"), "seed")


def test_compare_table_rows_match_compare_in_every_field():
    """Groups in the table's order (3, 1, 2), two curves of different sizes (within), options
    passed through, every column against the plain loop."""
    units = 5
    rows = []
    for setting, depths in (("a", (3, 1, 2)), ("b", (2, 1))):
        for depth in depths:
            for u in range(units):
                soft = 1.0 + 0.3 * u
                sink = soft * (1.0 + 0.5 * depth) * (1 + 0.05 * ((u * depth) % 3 - 1))
                if setting == "b" and u == 0:
                    soft, sink = 1e-20, 1e-9 * depth
                rows += [{"setting": setting, "depth": depth, "pool": u,
                          "normalization": "softmax", "residual": soft},
                         {"setting": setting, "depth": depth, "pool": u,
                          "normalization": "sinkhorn", "residual": sink}]
    table = pd.DataFrame(rows)
    result = compare_table(table, "pool", by=["setting", "depth"], within=["setting"],
                           level=0.9, margin=0.2, floor=1e-15, direction="parity")
    assert list(result.columns) == ["setting", "depth", "ratio", "low", "high", "level",
                                    "units", "censored", "tied", "detectable", "verdict"]
    assert list(zip(result.setting, result.depth)) == [("a", 3), ("a", 1), ("a", 2), ("b", 2),
                                                       ("b", 1)]
    for _, row in result.iterrows():
        g = table[(table.setting == row.setting) & (table.depth == row.depth)]
        level = 1 - 0.1 / (3 if row.setting == "a" else 2)
        expected = _reference_paired(g[g.normalization == "softmax"].residual.tolist(),
                                     g[g.normalization == "sinkhorn"].residual.tolist(),
                                     floor=1e-15, level=level, margin=0.2, direction="parity")
        assert row.level == pytest.approx(level, rel=1e-12)
        assert row.verdict == expected["found"]
        assert (row.units, row.censored, row.tied) == (units, expected["censored"], 0)
        for key in ("ratio", "low", "high", "detectable"):
            assert row[key] == pytest.approx(expected[key], rel=1e-9), key
    assert result.censored.tolist() == [0, 0, 0, 1, 1]
    # two keys within: each (setting, half) is its own family
    two = compare_table(table.assign(half=table.depth > 1), "pool", by=["setting", "half", "depth"],
                        within=["setting", "half"])
    assert two.level.tolist() == pytest.approx([1 - 0.05 / 2, 1 - 0.05, 1 - 0.05 / 2,
                                                1 - 0.05, 1 - 0.05])
    other = compare_table(table.assign(entropy=table.residual, residual=1.0), "pool",
                          by=["setting", "depth"], value="entropy", floor=1e-15)
    assert other.ratio.tolist() == pytest.approx(
        compare_table(table, "pool", by=["setting", "depth"], floor=1e-15).ratio.tolist())
    assert (other.ratio != 1).all()
    whole = compare_table(table[table.setting == "a"], "pool")
    assert list(whole.columns) == ["ratio", "low", "high", "level", "units", "censored", "tied",
                                   "detectable", "verdict"]
    assert whole.units.item() == 5 and whole.level.item() == pytest.approx(0.95)


def test_slopes_and_growth_at_their_edges():
    assert loglog_slope([1.0, 2.0], [3.0, 12.0]) == pytest.approx(2.0)
    assert loglog_slope([1.0, 1.0, 4.0], [2.0, 2.0, 1.0]) == pytest.approx(-0.5)
    with pytest.raises(ValueError, match=r"^a slope needs at least two distinct x values and as "
                                         r"many y; got x=\[1\.0, 2\.0\], y=\[1\.0\]$"):
        loglog_slope([1.0, 2.0], [1.0])
    assert growth_factor([1, 2, 3, 4], [2.0, 0.0, 8.0, np.inf]) == pytest.approx(2.0)
    assert growth_factor([1, 2, 3], [1.0, -4.0, 4.0]) == pytest.approx(2.0)
    assert growth_factor([0, 5], [1.0, math.exp(10)]) == pytest.approx(math.exp(2.0))
    assert math.isnan(growth_factor([1, 2, 3], [1.0, 0.0, np.nan]))


def test_ranges_and_describe_written_out():
    assert ranges([]) == ""
    assert ranges([5, 3, 4, 9, 10, 1]) == "1, 3–5, 9–10"
    assert ranges([2.0, 3.0]) == "2–3"
    assert ranges([1, 2.5]) == "1, 2.5"
    results = pd.DataFrame({"layer": [1, 2, 3, 4, 5, 6, 7],
                            "verdict": ["not less", "undecided", "less", "more", "parity",
                                        "not more", "not more"]})
    assert describe(results, "layer", "layer", more="random higher", less="random lower") \
        == ("random higher at layer 4; random lower at layer 3; parity at layer 5; "
            "not higher by the margin at layers 6–7; not lower by the "
            "margin at layer 1; undecided at layer 2.")
    assert describe(results.iloc[:0], "layer") == "no comparison."
    assert describe(results.iloc[3:4], "layer") == "Sinkhorn higher at depth 4."


def test_two_groups_both_mostly_at_the_floor_tie_and_decide_nothing():
    floor = 1e-15
    low = [1e-16, 1e-17, 1e-18, 1e-15, 0.5]  # four of five at the floor
    c = compare_groups(low, [1e-20, 1e-16, 0.2, 1e-18, 1e-17], floor=floor)
    assert (c.censored, c.tied, c.found) == (8, 8, "undecided")
    assert not math.isfinite(c.low)
    # only one group mostly at the floor: its values are bounds, and the other is higher
    c = compare_groups(low, [0.5, 0.6, 0.4, 0.7, 0.55], floor=floor)
    assert (c.censored, c.tied, c.found) == (4, 0, "more")
    assert groups_tied([3, 3], [5, 5]) == 6 and groups_tied([3, 2], [5, 5]) == 0
    assert groups_tied([2, 3], [4, 5]) == 0  # exactly half is not "mostly"


def test_a_test_of_an_unknown_direction_is_refused():
    estimate = Estimate(0.1, 0.05, 4, (5,))
    with pytest.raises(ValueError, match="direction is one of"):
        estimate.detectable(0.95, "sideways")
    with pytest.raises(ValueError, match="direction is one of"):
        compare([1.0, 2.0, 3.0], [1.5, 2.5, 3.5], direction="either")
    # the default is a claimed difference, Sinkhorn ahead
    a, b = [1.0, 2.0, 3.0, 4.0], [1.30, 2.61, 3.89, 5.21]  # tight: the margin binds
    assert compare(a, b) == compare(a, b, direction="more")
    assert compare(a, b).detectable != compare(a, b, direction="parity").detectable
    x, y = [2.0, 2.02, 1.98, 2.01], [2.6, 2.62, 2.58, 2.61]  # groups of little spread
    assert compare_groups(x, y) == compare_groups(x, y, direction="more")
    assert compare_groups(x, y).detectable != compare_groups(x, y, direction="no more").detectable


def test_significant_with_more_digits():
    assert [significant(x, 4) for x in (0.99871, 1.0, 100.0, 999.94, 1234.5, 2.5e-7)] == \
        ["0.9987", "1.000", "100.0", "999.9", "1234", "2.5×10⁻⁷"]


@pytest.mark.parametrize("direction", ["More", "either", "", "sideways"])
def test_an_unknown_direction_is_refused_however_few_the_units(direction):
    """With fewer than three units no interval is drawn, so `detectable` never saw the
    direction: a misspelt one was accepted."""
    for units in (2, 4):
        a, b = [1.0, 2.0, 3.0, 4.0][:units], [1.5, 2.5, 3.5, 4.5][:units]
        with pytest.raises(ValueError, match=rf"^a test's direction is one of 'more', 'less', "
                                             rf"'parity', 'no more', 'no less'; got "
                                             rf"{direction!r}$"):
            compare(a, b, direction=direction)
        with pytest.raises(ValueError, match="direction is one of"):
            compare_groups(a, b, direction=direction)


@pytest.mark.parametrize("floor", [math.nan, -1e-15, math.inf, "1e-15", True, None])
def test_a_floor_that_is_not_a_floor_is_blamed_not_the_data(floor):
    """A NaN floor once made every log ratio NaN and the estimate blamed the values."""
    message = r"^a rounding floor is a finite number >= 0 \(0: nothing censored; .*\); got "
    with pytest.raises(ValueError, match=message):
        compare([1.0, 2.0, 3.0], [1.5, 2.5, 3.5], floor=floor)
    with pytest.raises(ValueError, match=message):
        compare_groups([1.0, 2.0, 3.0], [1.5, 2.5, 3.5], floor=floor)
    with pytest.raises(ValueError, match=message):
        censored_logs([1.0], [2.0], floor)
