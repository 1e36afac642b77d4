"""The rules that turn primary-test results into verdict words, written out case by case."""

import math

import numpy as np
import pytest

from rankcollapse.verdicts import (Result, boundary, alternative, calibration, check_result,
                                   claim_verdict, finding_verdict, iterations_verdict,
                                   mechanism_verdict, result_words, results_sentence,
                                   simulate_outcomes)


@pytest.mark.parametrize("outcomes, expected", [
    (["agrees", "agrees", "agrees"], "reproduced"),
    (["agrees", "undecided", "against"], "partly reproduced"),
    (["agrees", "opposite"], "contradicted"),
    (["against", "opposite"], "contradicted"),
    (["opposite"], "contradicted"),
    (["against", "undecided"], "not reproduced"),
    (["against"], "not reproduced"),
    (["undecided", "undecided"], "undecided"),
    (["untested", "agrees"], "reproduced"),
    (["untested"], "not testable here"),
    ([], "not testable here"),
])
def test_claim_verdicts(outcomes, expected):
    assert claim_verdict(outcomes) == expected


def test_a_misspelt_outcome_is_an_error_not_a_verdict():
    for bad in (["Agrees"], ["agrees", "more"], ["reproduced"]):
        with pytest.raises(ValueError, match="unknown outcomes"):
            claim_verdict(bad)
    with pytest.raises(ValueError, match="unknown results"):
        finding_verdict(["More"])
    with pytest.raises(ValueError, match="unknown outcome"):
        Result("p", "t", 1.0, "more", "reproduced")


@pytest.mark.parametrize("found, expected", [
    (["more", "more", "undecided"], "Sinkhorn higher in part"),
    (["more", "parity"], "Sinkhorn higher in part"),
    (["more", "not less"], "Sinkhorn higher in part"),
    (["more", "more"], "Sinkhorn higher"),
    (["less", "less"], "Sinkhorn lower"),
    (["parity", "parity"], "parity"),
    (["less", "parity", "undecided"], "Sinkhorn lower in part"),
    (["more", "less"], "mixed"),
    (["parity", "undecided"], "parity in part"),
    (["not more", "not less"], "undecided"),
    (["undecided"], "undecided"),
    ([], "not testable here"),
])
def test_findings_say_what_was_found(found, expected):
    assert finding_verdict(found) == expected


@pytest.mark.parametrize("outcomes, expected", [
    (["agrees", "undecided"], "supported"), (["against", "opposite"], "not supported"),
    (["agrees", "against"], "mixed"), (["undecided"], "undecided"),
    ([], "not testable here")])
def test_mechanism_words(outcomes, expected):
    assert mechanism_verdict(outcomes) == expected


def test_iterations_are_tested_from_the_most_down_and_stop_at_the_first_gap():
    full = {50: "parity"}
    found = {"a": {**full, 20: "parity", 10: "parity", 5: "undecided", 2: "parity"},
             "b": {**full, 20: "parity", 10: "parity", 5: "parity", 2: "parity"}}
    assert iterations_verdict(found) == ("fewer iterations suffice", 10)  # 2 is not reached
    lost = {"a": {**full, 20: "less", 10: "parity"}, "b": {**full, 20: "parity", 10: "parity"}}
    assert iterations_verdict(lost) == ("all iterations needed", 50)
    unsure = {"a": {**full, 20: "undecided", 10: "parity"}}
    assert iterations_verdict(unsure) == ("undecided", 50)
    with pytest.raises(ValueError, match="every iteration count"):
        iterations_verdict({"a": {**full, 20: "parity"}, "b": {**full}})


def test_checks_and_their_words():
    ok, bad = check_result("p", "t", 0.5, True), check_result("p", "t", 2.0, False)
    assert (ok.found, ok.outcome, bad.found, bad.outcome) == ("passes", "agrees", "fails",
                                                              "against")
    assert check_result("p", "t", None, None).outcome == "untested"
    floor = check_result("p", "t", 2.2e-15, True, bound="≤")
    assert result_words(floor) == "≤2.2e-15"
    assert results_sentence([ok]) == "t: the check passes, value 0.500."


def test_results_read_with_their_interval_level_units_and_power():
    r = Result("trained models", "text", 1.32, "more", "agrees", 1.1, 1.58, 1 - 0.05 / 3, (5,),
               1.45)
    assert result_words(r) == "1.32 (98.3% interval 1.10–1.58, 5 seeds; detectable 1.45)"
    assert results_sentence([r], words={"more": "larger"}) == \
        "text: larger, ratio 1.32 (98.3% interval 1.10–1.58, 5 seeds; detectable 1.45)."
    tied = Result("p", "t", 1.0, "undecided", "undecided", values=10, tied=6)
    assert "mostly tied at the rounding floor" in results_sentence([tied])
    assert results_sentence([]) == "no test."
    with pytest.raises(ValueError, match="inverted"):
        Result("p", "t", 1.0, "more", "agrees", 1.2, 1.1)


def test_boundaries_and_alternatives_of_each_direction():
    assert boundary("more") == 0 and boundary("less") == 0
    assert boundary("no more") == pytest.approx(math.log(1.1))
    assert boundary("no less") == pytest.approx(-math.log(1.1))
    assert boundary("parity") == pytest.approx(math.log(1.1))
    assert alternative("more") == pytest.approx(math.log(1.5))
    assert alternative("less") == pytest.approx(-math.log(1.5))
    assert alternative("no more") == 0


def test_simulated_designs_find_no_effect_rarely_and_a_large_one_often():
    rng = np.random.default_rng(0)
    null = simulate_outcomes([(1.0,)] * 3, [(3,)] * 3, "more", 0.0, 3, 400, rng)
    assert np.mean([v in ("reproduced", "partly reproduced") for v in null]) <= 0.05
    strong = simulate_outcomes([(0.05,)] * 3, [(8,)] * 3, "more", math.log(1.5), 3, 200, rng)
    assert np.mean([v == "reproduced" for v in strong]) > 0.9
    groups = simulate_outcomes([(0.05, 0.05)], [(6, 6)], "more", math.log(1.5), 1, 100, rng)
    assert np.mean([v == "reproduced" for v in groups]) > 0.9


def test_calibration_uses_the_design_of_the_results():
    tests = [Result("p", t, 1.0, "undecided", "undecided", units=(3,), sd=(0.2,))
             for t in "abc"]
    c = calibration(tests, "more", 3, runs=300)
    assert c.false_rate <= 0.05 and 0 <= c.power <= 1 and c.runs == 300
    many = [Result("p", t, 1.0, "undecided", "undecided", units=(12,), sd=(0.05,))
            for t in "abc"]
    assert calibration(many, "more", 3, runs=200).power > c.power
    parity = calibration(many, "no more", 3, runs=200)
    assert parity.false_rate <= 0.05 and parity.power > 0.9
    assert calibration([check_result("p", "t", 1.0, True)], "more", 1) is None
    assert calibration(tests, "either", 3) is None
