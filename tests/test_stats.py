"""The verdict layer on constructed data whose answer is known: each test fails if the ratio
is inverted, the sign flipped, above and below swapped, or units confused with rows."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankcollapse.stats import (MARGIN, Claim, check_verdict, claim_verdict, compare,
                                compare_groups, compare_table, describe, loglog_slope, ranges,
                                finding_verdict, significant, t_quantile, unit_values, verdict_of)

rng = np.random.default_rng(0)
BASE = rng.lognormal(size=24)  # softmax residuals of 24 independent units


@pytest.mark.parametrize("factor, expected", [(2.0, "more"), (0.5, "less"), (1.0, "parity"),
                                              (1.03, "parity")])
def test_direction_on_constructed_data(factor, expected):
    c = compare(BASE, factor * BASE)
    assert c.verdict == expected
    assert c.ratio == pytest.approx(factor) and c.low <= c.ratio <= c.high


def test_noise_is_inconclusive():
    noisy = BASE * 10 ** np.random.default_rng(1).normal(size=len(BASE))
    c = compare(BASE, noisy)
    assert c.verdict == "inconclusive" and c.low < 1 < c.high


def test_sinkhorn_is_the_numerator():
    assert compare([1.0] * 5, [4.0] * 5).ratio == 4.0
    assert compare([4.0] * 5, [1.0] * 5).ratio == 0.25


@given(st.floats(0.05, 20.0), st.integers(3, 40))
def test_constant_ratios_are_decided_by_the_margin(factor, units):
    c = compare(np.ones(units), np.full(units, factor))
    if 1 / (1 + MARGIN) <= factor <= 1 + MARGIN:
        assert c.verdict == "parity"
    else:
        assert c.verdict == ("more" if factor > 1 else "less")


def test_verdict_rule_order_and_edges():
    assert verdict_of(0.95, 1.05) == "parity"
    assert verdict_of(1.01, 1.08) == "parity"  # above 1, but within the margin
    assert verdict_of(1.05, 1.5) == "more" and verdict_of(0.5, 0.95) == "less"
    assert verdict_of(0.8, 1.3) == "inconclusive"
    assert verdict_of(float("nan"), 2.0) == "inconclusive"


def test_floor_and_non_finite_values_are_left_out_and_counted():
    a = np.array([1.0, 1.0, 1.0, 1.0, 1e-20, np.inf])
    b = np.array([2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    c = compare(a, b, floor=1e-15)
    assert c.units == 4 and c.excluded == 2 and c.verdict == "more"
    assert "2 left out" in c.summary()
    few = compare(a[:2], b[:2])
    assert few.verdict == "inconclusive" and few.units == 2  # fewer than three units
    floored = compare(np.r_[a[:4], [1e-20] * 5], np.full(9, 2.0), floor=1e-15)
    assert floored.excluded == 5 and floored.units == 4 and floored.verdict == "inconclusive"


def test_unpaired_groups_are_resampled_each_on_its_own():
    other = rng.lognormal(size=9) * 3.0  # a different number of units: no pairing possible
    c = compare_groups(BASE, other)
    expected = np.exp(np.log(other).mean() - np.log(BASE).mean())
    assert c.ratio == pytest.approx(expected) and c.units == 9 and c.low < c.ratio < c.high
    tight = 1 + 0.01 * rng.normal(size=24)
    assert compare_groups(tight, tight[::-1] * 1.02).verdict == "parity"
    assert compare_groups(BASE, BASE * 1.02).verdict == "inconclusive"  # unpaired: wide
    assert compare_groups(BASE, BASE / 10).verdict == "less"
    # an independent check of the interval's width: the normal approximation of the
    # difference of two means of logs
    se = np.sqrt(np.log(BASE).var() / len(BASE) + np.log(other).var() / len(other))
    width = np.log(c.high) - np.log(c.low)
    assert width == pytest.approx(2 * 1.96 * se, rel=0.25)
    few = compare_groups(BASE, [1.0, 2.0])
    assert few.verdict == "inconclusive" and few.units == 2
    floored = compare_groups([1.0, 1.0, 1.0, 1e-30], [2.0, 2.0, 2.0], floor=1e-20)
    assert floored.excluded == 1 and floored.verdict == "more"
    with pytest.raises(ValueError, match="non-negative"):
        compare_groups([-1.0, 1.0, 1.0], [1.0, 1.0, 1.0])


@pytest.mark.parametrize("p, df, table", [(0.975, 1, 12.706), (0.975, 2, 4.303),
                                           (0.975, 4, 2.776), (0.95, 10, 1.812),
                                           (0.995, 20, 2.845)])
def test_t_quantiles_match_the_printed_table(p, df, table):
    assert t_quantile(p, df) == pytest.approx(table, abs=1e-3)


def test_few_units_get_a_t_interval_not_a_bootstrap():
    logs = np.log([1.5, 2.0, 3.0])
    c = compare(np.ones(3), np.exp(logs))
    half = 4.303 * logs.std(ddof=1) / np.sqrt(3)
    assert np.log(c.low) == pytest.approx(logs.mean() - half, abs=1e-3)
    assert np.log(c.high) == pytest.approx(logs.mean() + half, abs=1e-3)
    assert c.low < 1.5  # wider than the range of the three values
    assert c.verdict == "inconclusive"  # the three ratios are above 1, but three is few
    many = compare(np.ones(12), np.exp(np.tile(logs, 4)))
    assert many.verdict == "more"  # the bootstrap from BOOTSTRAP_UNITS units on


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


def test_compare_table_per_group_and_describe():
    rows = []
    for depth, factor in [(1, 2.0), (2, 2.0), (3, 1.0), (4, 0.5)]:
        for unit, base in enumerate(BASE[:10]):
            rows += [{"depth": depth, "pool": unit, "normalization": "softmax", "residual": base},
                     {"depth": depth, "pool": unit, "normalization": "sinkhorn",
                      "residual": factor * base}]
    result = compare_table(pd.DataFrame(rows), "pool", by=["depth"])
    assert list(result.verdict) == ["more", "more", "parity", "less"]
    assert describe(result, "depth") == ("Sinkhorn keeps more at depths 1–2; Sinkhorn keeps "
                                         "less at depth 4; parity at depth 3.")
    with pytest.raises(ValueError, match="no rows for sinkhorn"):
        compare_table(pd.DataFrame(rows).query("normalization == 'softmax'"), "pool")


def test_claim_verdicts():
    assert claim_verdict("more", ["more", "more"]) == "reproduced"
    assert claim_verdict("more", ["more", "parity"]) == "partly reproduced"
    assert claim_verdict("more", ["more", "less"]) == "partly reproduced"
    assert claim_verdict("more", ["more", "less", "less"]) == "contradicted"  # mostly opposite
    assert claim_verdict("more", ["less", "parity"]) == "contradicted"
    # one task of three against, nothing for: not reproduced, too little to contradict
    assert claim_verdict("more", ["less", "parity", "inconclusive"]) == "not reproduced"
    assert claim_verdict("more", ["parity", "inconclusive"]) == "not reproduced"
    assert claim_verdict("parity", ["less", "less"]) == "contradicted"
    assert claim_verdict("parity", ["inconclusive"]) == "not reproduced"
    assert claim_verdict("parity", []) == "not testable here"
    # "no Sinkhorn advantage": keeping less agrees, keeping more is the opposite
    assert claim_verdict("no more", ["parity", "less"]) == "reproduced"
    assert claim_verdict("no more", ["more", "more", "parity"]) == "contradicted"
    assert claim_verdict("no more", ["inconclusive", "less"]) == "partly reproduced"
    # "matches or improves": the mirror image
    assert claim_verdict("no less", ["parity", "more"]) == "reproduced"
    assert claim_verdict("no less", ["less", "less", "more"]) == "contradicted"
    assert check_verdict(True) == "reproduced" and check_verdict(False) == "not reproduced"
    with pytest.raises(ValueError):
        claim_verdict("higher", ["more"])
    with pytest.raises(ValueError, match="unknown verdict"):
        Claim("C1", "x", "maybe", "")
    assert Claim("C1", "claim", "reproduced", "Found.").markdown() == \
        "- **C1** claim: **reproduced**. Found."


def test_small_helpers():
    assert ranges([7, 1, 2, 3]) == "1–3, 7" and ranges([4]) == "4"
    assert ranges([2.0, 0.5, 1.0]) == "0.5, 1, 2"  # only integers form runs
    assert loglog_slope([1, 10, 100], [1, 1000, 1e6]) == pytest.approx(3.0)


def test_claim_numbers_records_and_merged_verdicts():
    from rankcollapse.stats import merge_verdicts, summarise

    table = pd.DataFrame({"ratio": [2.0, 0.5, np.nan], "low": [1.5, 0.4, np.nan],
                          "high": [2.5, 0.6, np.nan]})
    assert summarise(table) == (pytest.approx(1.0), (0.4, 2.5))
    claim = Claim("C4a", "claim", "reproduced", "Found.").with_numbers(table, figure="fig-x")
    record = claim.record()
    assert record["number"] == pytest.approx(1.0) and record["interval"] == [0.4, 2.5]
    assert record["figure"] == "fig-x" and record["id"] == "C4a"
    assert Claim("C1", "c", "reproduced", "").with_numbers(number=3.0, measure="a slope").record()["number"] == 3.0
    with pytest.raises(ValueError, match="unknown claim id"):
        Claim("C99", "c", "reproduced", "")
    assert merge_verdicts(["reproduced", "reproduced"]) == "reproduced"
    assert merge_verdicts(["reproduced", "not reproduced"]) == "partly reproduced"
    assert merge_verdicts(["contradicted", "not reproduced"]) == "contradicted"
    assert merge_verdicts(["not testable here", "reproduced"]) == "reproduced"
    assert merge_verdicts(["not testable here"]) == "not testable here"


@pytest.mark.parametrize("found, expected", [
    (["more", "more", "inconclusive"], "Sinkhorn higher in part"),
    (["more", "parity"], "Sinkhorn higher in part"),
    (["more", "inconclusive"], "Sinkhorn higher in part"),
    (["more", "more"], "Sinkhorn higher"),
    (["parity", "parity"], "parity"),
    (["less", "parity", "inconclusive"], "Sinkhorn lower in part"),
    (["more", "less"], "mixed"),
    (["parity", "inconclusive"], "parity in part"),
    (["inconclusive"], "inconclusive"),
    ([], "inconclusive"),
])
def test_findings_say_what_was_found(found, expected):
    assert finding_verdict(found) == expected


def test_open_questions_take_finding_verdicts_only():
    assert Claim("B1", "q", "Sinkhorn higher", "Found.").verdict == "Sinkhorn higher"
    with pytest.raises(ValueError, match="unknown verdict 'reproduced' for B2"):
        Claim("B2", "q", "reproduced", "")
    with pytest.raises(ValueError, match="unknown verdict 'supported' for C4a"):
        Claim("C4a", "q", "supported", "")


def test_significant_digits_for_prose():
    assert [significant(x) for x in (0.90909, 1.0, 555.2, 1530.4, 2.5e-7, 12345.0)] == \
        ["0.909", "1.00", "555", "1530", "2.5e-07", "1.2e+04"]
