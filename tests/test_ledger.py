"""The claims ledger: every claim id gets one row, the parts recorded by several chapters are
merged and decided again by the registered rule, and the page, the findings summary and
claims.json say the same."""

import json

import pytest

from rankcollapse.registry import CLAIMS, FINDINGS, OWN_BOUND, Claim
from rankcollapse.verdicts import Result, check_result
from rankcollapse_book.ledger import (FINDINGS as FINDINGS_PAGE, JSON, PAGE, collect, findings,
                                      ledger, readable, save_records, write_ledger)


RUNS = 200  # simulations per claim's calibration: enough to test, fast to run


def result(part, task, found, outcome, number=1.2, low=1.1, high=1.3, units=(3,), sd=(0.1,)):
    return Result(part, task, number, found, outcome, low, high, 0.98, units, 1.5,
                  values=36, sd=sd)


def records(tmp_path):
    ch2 = [Claim.of("C2a", [check_result("random logits", "random logits", 1e-9, True)],
                    "Random: fine.", figure="fig-convergence"),
           Claim.of("C9", [result("random logits", "σ = 1", "more", "agrees")], "Random: more.")]
    ch5 = [Claim.of("C2a", [check_result("trained models", "text", 2e-3, False)],
                    "Trained: no.", figure="fig-trained-attention"),
           Claim.of("C4a", [result("trained models", "text", "less", "opposite", 0.8, 0.7, 0.9),
                            result("trained models", "mnist", "undecided", "undecided", 1.0, 0.5,
                                 2.0)], "Lower."),
           Claim.of("C8", [result("trained models", "text", "undecided", "undecided", 1.0, 0.9,
                                1.1)], "Could not tell."),
           Claim.of("B3", [result("weights trained with softmax", "mnist", "more", "agrees"),
                           result("weights trained with Sinkhorn", "mnist", "more", "agrees")],
                    "It holds.")]
    save_records(tmp_path, "02_two", "ci", [c.record() for c in ch2])
    save_records(tmp_path, "05_five", "ci", [c.record() for c in ch5], data="trained on t")


def test_every_claim_gets_one_row_and_parts_are_decided_together(tmp_path):
    records(tmp_path)
    rows = ledger(collect(tmp_path, ["02_two", "05_five"]), "ci", RUNS)
    assert [r["id"] for r in rows] == list(CLAIMS)
    by_id = {r["id"]: r for r in rows}
    c2a = by_id["C2a"]
    assert c2a["verdict"] == "partly reproduced"  # one check passes, one fails
    assert c2a["chapter"] == "02_two, 05_five" and len(c2a["results"]) == 2
    assert c2a["figure"] == "fig-convergence, fig-trained-attention"
    assert c2a["data"] == "random weights, inputs and logits; trained on t"
    assert c2a["finding"] == "Random: fine. Trained: no."
    assert c2a["number"] is None  # two parts: no single number
    assert by_id["C4a"]["verdict"] == "contradicted" and by_id["C4a"]["profile"] == "ci"
    assert by_id["C8"]["verdict"] == "undecided"
    assert by_id["C8"]["number"] == 1.0 and by_id["C8"]["interval"] == [0.9, 1.1]
    assert by_id["C10"]["verdict"] == "not testable here" and by_id["C10"]["chapter"] is None
    assert by_id["B3"]["verdict"] == "Sinkhorn higher"


def test_rows_carry_the_test_the_units_power_and_calibration(tmp_path):
    records(tmp_path)
    row = {r["id"]: r for r in ledger(collect(tmp_path, ["02_two", "05_five"]), "ci", RUNS)}["C4a"]
    assert row["primary_test"]["trained models"].startswith("mean log ratio")
    assert row["units"] == {"trained models": "training seed"}
    assert row["detectable_ratio"] == 1.5 and row["family"] == 3
    assert 0 <= row["calibration"]["false_rate"] <= 0.05
    assert 0 <= row["calibration"]["power_every"] <= row["calibration"]["power"] <= 1
    assert row["results"][0]["task"] == "text" and row["results"][0]["found"] == "less"


def test_page_findings_and_json_agree(tmp_path):
    records(tmp_path)
    rows = write_ledger(tmp_path, ["02_two", "05_five"], "ci", RUNS)
    page = (tmp_path / PAGE).read_text()
    assert "| **C4a** |" in page and "**contradicted**" in page
    assert "{numref}`fig-trained-attention`" in page and "{doc}`chapters/05_five`" in page
    assert "| 10⁻⁹ |" in page  # powers of ten written for a reader
    assert "| 0.800 (0.700–0.900) | 98% | 3 | 1.50 |" in page
    assert "## The registry" in page and "## How often each rule is wrong" in page
    assert "demonstrate the method at small scale" in page
    assert "demonstrate the method at small scale" in rows[0]["note"]
    summary = (tmp_path / FINDINGS_PAGE).read_text()
    assert "- **contradicted**: C4a" in summary and "Contradicted (the opposite shown): C4a (" \
        in summary
    assert ("Undecided (this run could not tell): C8 (it could have shown parity within a factor "
            "1.50)") in summary
    differ = findings([dict(r, verdict="undecided", detectable_ratio=2.0) for r in rows
                       if r["id"] == "C4a"], "ci")
    assert "C4a (it could have detected a ratio of 1.50 to 2, depending on the task)" in differ
    lower = findings([dict(r, verdict="undecided", detectable_ratio=2.0, direction="less")
                      for r in rows if r["id"] == "C4a"], "ci")
    assert "C4a (it could have detected a ratio of 1.50 to 2, depending on the task)" in lower
    saved = json.loads((tmp_path / "book" / JSON).read_text())
    assert saved == rows
    assert set(saved[0]) >= {"id", "claim", "verdict", "results", "primary_test", "units",
                             "detectable_ratio", "calibration", "parts", "figure", "chapter",
                             "profile", "data"}
    clean = findings([dict(r, verdict="reproduced") for r in rows], "ci")
    assert "Every claim that could be tested here was reproduced" in clean


def test_numbers_read_as_a_reader_writes_them():
    assert [readable(x) for x in (0.5, 5.99, 1234.5, 2.5e-7, 1e9, -3.2e5, 0.0)] == \
        ["0.500", "5.99", "1234", "2.5×10⁻⁷", "10⁹", "-3.2×10⁵", "0"]


def test_open_questions_have_their_own_table_and_summary_lines(tmp_path):
    records(tmp_path)
    rows = write_ledger(tmp_path, ["02_two", "05_five"], "ci", RUNS)
    page = (tmp_path / PAGE).read_text()
    claims_part, rest = page.split("## Questions the paper left open")
    open_part = rest.split("## How often")[0]
    assert "| **B3** |" in open_part and "| **B3** |" not in claims_part
    assert "| **C4a** |" in claims_part
    summary = (tmp_path / FINDINGS_PAGE).read_text()
    assert f"of the paper's {len(CLAIMS) - len(FINDINGS)} claims" in summary
    assert "**B3**, " in summary and "**Sinkhorn higher**" in summary
    assert "B1" not in summary  # not run: no line in the summary, a row on the page
    assert {r["id"]: r["verdict"] for r in rows}["B1"] == "not testable here"


def test_a_record_with_a_misspelt_word_is_refused(tmp_path):
    records(tmp_path)
    path = tmp_path / "book" / "chapters" / "claims" / "05_five.json"
    rows = json.loads(path.read_text())
    rows[1]["results"][0]["outcome"] = "Agrees"
    path.write_text(json.dumps(rows))
    with pytest.raises(ValueError, match="unknown outcome"):
        ledger(collect(tmp_path, ["02_two", "05_five"]), "ci", RUNS)


# ----------------------------------------------------------------------------- exact rows and lines

import math  # noqa: E402

from references import plain_calibration  # noqa: E402
from rankcollapse_book.ledger import (_calibration_table, _cell, _estimate,  # noqa: E402
                                      _registry_table, _result_row, _shown, _table, page)

LEVEL6 = 1 - 0.05 / 6


def more_records(tmp_path):
    """Chapters 4 and 6: C6d recorded by both (each of its four parts by one), a check at the
    floor, two groups, a mostly tied test, B4's sequence."""
    ch4 = [Claim.of("C6d", [Result("random networks with skips, no LayerNorm, hidden states",
                                   "σ = 2", 1.25, "more", "agrees", 1.12, 1.4, 0.996, (4,), 1.35,
                                   values=48, sd=(0.1,)),
                            Result("random networks with skips and LayerNorm, path products",
                                   "σ = 1", 1.5, "more", "agrees", 1.2, 1.9, 0.996, (4, 12), 1.3,
                                   values=160, sd=(0.1, 0.2))], "Part two.",
                    figure="fig-b, fig-z")]
    ch6 = [Claim.of("C1", [check_result("random pure attention", "every logit scale", 2.2e-15,
                                        True, bound="≤")], "Collapsed.", figure="fig-c1"),
           Claim.of("C6c", [Result("random against trained", "text, softmax", 2.5, "more",
                                   "agrees", 1.5, 4.0, LEVEL6, (3, 12), float("nan"), values=100,
                                   sd=(0.2, 0.3)),
                            Result("random against trained", "text, sinkhorn", 3.0, "more",
                                   "agrees", 1.2, 7.5, LEVEL6, (3, 12), 2.0, values=100,
                                   sd=(0.2, 0.4))], "Slower.", figure="fig-a, fig-b",
                    data="trained on t"),
           Claim.of("C6d", [Result("random networks with skips and LayerNorm, hidden states",
                                   "σ = 1", 1.3, "more", "agrees", 1.15, 1.5, 0.996, (4,), 1.4,
                                   values=48, sd=(0.1,)),
                            Result("trained models, correlation broken", "mnist", 1.4, "more",
                                   "agrees", 1.1, 1.8, 0.996, (5,), 1.35, values=50,
                                   sd=(0.15,), requirement="more")], "Part one.",
                    figure="fig-z, fig-a"),
           Claim.of("C4b", [Result("trained models", "text", 1.0, "undecided", "undecided",
                                   level=1 - 0.05 / 3, units=(3,), values=10, tied=6,
                                   sd=(0.1,))], "Tied."),
           Claim.of("B4", [Result("Sinkhorn-trained models", "text", 1.0, "parity", "agrees",
                                  0.995, 1.004, 1 - 0.05 / 3, (5,), 1.008, values=5,
                                  sd=(0.002,), at=k) for k in (20.0, 10.0)], "Fewer.")]
    save_records(tmp_path, "04_four", "full", [c.record() for c in ch4])
    save_records(tmp_path, "06_six", "full", [c.record() for c in ch6])


def test_records_are_saved_with_their_chapter_and_collected_in_order(tmp_path):
    rows = [{"id": "C4a", "data": None, "x": 1}, {"id": "C9", "data": "own"}, {"id": "C8"}]
    path = save_records(tmp_path, "03_x", "ci", rows)
    assert path == tmp_path / "book" / "chapters" / "claims" / "03_x.json"
    expected = [{"id": "C4a", "data": "random weights, inputs and logits", "x": 1,
                 "chapter": "03_x", "profile": "ci"},
                {"id": "C9", "data": "own", "chapter": "03_x", "profile": "ci"},
                {"id": "C8", "chapter": "03_x", "profile": "ci",
                 "data": "random weights, inputs and logits"}]
    assert path.read_text() == json.dumps(expected, indent=1)
    save_records(tmp_path, "01_y", "ci", [{"id": "C1"}], data="mnist")
    assert collect(tmp_path, ["03_x", "02_missing", "01_y"]) == expected + [
        {"id": "C1", "chapter": "01_y", "profile": "ci", "data": "mnist"}]
    assert collect(tmp_path, []) == []


def test_merged_rows_written_out(tmp_path):
    more_records(tmp_path)
    rows = {r["id"]: r for r in ledger(collect(tmp_path, ["04_four", "06_six"]), "full", RUNS)}
    c1 = rows["C1"]
    assert c1["verdict"] == "reproduced" and c1["finding"] == "Collapsed."
    assert c1["number"] == 2.2e-15 and c1["interval"] is None
    assert (c1["direction"], c1["family"], c1["detectable_ratio"], c1["calibration"]) == (
        None, None, None, None)
    assert c1["primary_test"] == {"random pure attention": "below 1e-08 at every logit scale"}
    assert c1["units"] == {"random pure attention": "weight draw"}
    assert c1["parts"] == ["random pure attention"] and c1["note"] is None
    assert (c1["figure"], c1["chapter"], c1["data"], c1["profile"]) == (
        "fig-c1", "06_six", "random weights, inputs and logits", "full")
    c6d = rows["C6d"]
    assert c6d["verdict"] == "reproduced" and c6d["finding"] == "Part two. Part one."
    assert c6d["figure"] == "fig-b, fig-z, fig-a" and c6d["chapter"] == "04_four, 06_six"
    assert c6d["data"] == "random weights, inputs and logits"
    assert c6d["parts"] == ["random networks with skips and LayerNorm, path products",
                            "random networks with skips and LayerNorm, hidden states",
                            "random networks with skips, no LayerNorm, hidden states",
                            "trained models, correlation broken"]
    assert c6d["units"]["random networks with skips and LayerNorm, path products"] == \
        "network / pool"
    assert c6d["number"] is None and c6d["interval"] is None and c6d["family"] == 12
    assert c6d["detectable_ratio"] == 1.4 and c6d["direction"] == "more"
    assert [r["task"] for r in c6d["results"]] == ["σ = 2", "σ = 1", "σ = 1", "mnist"]
    tests = [Result(**{k: tuple(v) if isinstance(v, list) else v for k, v in r.items()})
             for r in c6d["results"]]
    false_rate, power, every = plain_calibration(tests, "more", 12, RUNS, 0, 1.5)
    assert c6d["calibration"] == {"false_rate": false_rate, "power": power,
                                  "power_every": every, "runs": RUNS, "effect": 1.5}
    c6c = rows["C6c"]
    assert c6c["detectable_ratio"] == 2.0 and c6c["data"] == "trained on t"  # NaN left out
    assert c6c["figure"] == "fig-a, fig-b" and c6c["family"] == 8  # full: 4 tasks x 2
    c4b = rows["C4b"]
    assert c4b["verdict"] == "undecided" and c4b["detectable_ratio"] is None
    assert c4b["number"] == 1.0 and c4b["interval"] is None and c4b["figure"] is None
    b4 = rows["B4"]
    assert b4["verdict"] == "fewer iterations suffice" and b4["calibration"] is None
    assert b4["direction"] == "parity" and b4["family"] == 4  # full: 4 tasks
    assert b4["detectable_ratio"] == 1.008
    assert rows["C10"]["direction"] == "either" and rows["C2a"]["direction"] is None
    assert rows["C7"]["finding"] == ("a statement of the paper's limits, not a result to "
                                     "reproduce; the open question B1 trains pure attention "
                                     "from scratch.")
    assert rows["C10"]["finding"] == "the chapter that decides it did not run in this build."
    assert rows["C10"]["verdict"] == "not testable here" and rows["C10"]["results"] == []
    assert rows["C10"]["figure"] is None and rows["C10"]["data"] is None
    assert rows["C10"]["family"] is None and rows["C10"]["number"] is None


def test_the_findings_summary_written_out(tmp_path):
    more_records(tmp_path)
    rows = ledger(collect(tmp_path, ["04_four", "06_six"]), "full", RUNS)
    assert findings(rows, "full") == (
        "On this build (profile `full`), of the paper's 18 claims (as its public summaries "
        "state them):\n\n"
        "- **reproduced**: C1, C6c, C6d\n"
        "- **undecided**: C4b\n"
        "- **not testable here**: C2a, C3a, C3b, C3c, C4a, C4c, C4d, C4e, C5, C6a, C6b, C7, "
        "C8, C9\n\n"
        "Undecided (this run could not tell): C4b.\n"
        "Each verdict, its tests and its figure are in the {doc}`claims`.\n\n"
        "On the questions the paper left open, the book's own experiments found:\n\n"
        "- **B4**, how many Sinkhorn iterations inference needs: **fewer iterations "
        "suffice**\n")
    c3a = next(dict(r, verdict="reproduced") for r in rows if r["id"] == "C3a")
    assert f"- **reproduced**: C3a ({OWN_BOUND})\n" in findings([c3a], "full")
    records(tmp_path)
    both = ledger(collect(tmp_path, ["02_two", "04_four", "05_five", "06_six"]), "ci", RUNS)
    by = {r["id"]: r for r in both}
    assert by["C8"]["detectable_ratio"] == 1.5
    against = [dict(by["C4a"], verdict="not reproduced"), by["C8"], by["C4b"],
               dict(by["C9"], verdict="contradicted"), by["C2a"],
               dict(by["C6a"], verdict="contradicted")]
    assert findings(against, "ci") == (
        "On this build (profile `ci`), of the paper's 6 claims (as its public summaries state "
        "them):\n\n"
        "- **partly reproduced**: C2a\n"
        "- **not reproduced**: C4a\n"
        "- **contradicted**: C9, C6a\n"
        "- **undecided**: C8, C4b\n\n"
        "Contradicted (the opposite shown): C9 (doubly stochastic attention spreads attention "
        "more evenly (higher row entropy)); C6a (products of independent random matrices show "
        "no Sinkhorn advantage). Not reproduced (decided against the paper without "
        "the opposite): C4a (trained models: the hidden-state (block output) residual stays "
        "higher under Sinkhorn). Undecided (this run could not tell): C8 (it could have "
        "shown parity within a factor 1.50); C4b.\n"
        "Each verdict, its tests and its figure are in the {doc}`claims`.\n\n"
        "The `ci` profile trains small models on stand-in data with few seeds: its verdicts "
        "demonstrate the method at small scale and are not a test of the paper's experiment, "
        "which the full profile runs at the paper's sizes.\n")
    assert findings([], "full") == (
        "On this build (profile `full`), of the paper's 0 claims (as its public summaries "
        "state them):\n\n\nEvery claim that could be tested here was reproduced, at least in "
        "part.\nEach verdict, its tests and its figure are in the {doc}`claims`.\n")


def test_numbers_cells_and_links_at_their_edges():
    assert [readable(x) for x in (12.0, -3.0, 9999.0, 1e4, 12345.0, 1.5e-5, 0.001, 0.000999,
                                  2e-7, -1e-5, 1.1e5, 1e11, math.inf, -math.inf)] == [
        "12", "-3", "9999", "10⁴", "1.23×10⁴", "1.5×10⁻⁵", "0.00100", "9.99×10⁻⁴", "2×10⁻⁷",
        "-1×10⁻⁵", "1.1×10⁵", "10¹¹", "inf", "-inf"]
    assert readable(math.nan) == "nan"
    base = {"number": 1.5, "low": 1.2, "high": 2.5e4, "bound": ""}
    assert _estimate(base) == "1.50 (1.20–2.5×10⁴)"
    assert _estimate(dict(base, number=None)) == "–"
    assert _estimate(dict(base, number=math.nan)) == "–"
    assert _estimate(dict(base, low=None, bound="≤")) == "≤1.50"
    assert _estimate(dict(base, low=math.nan)) == "1.50"
    assert _cell("a|b\nc|") == "a\\|b c\\|" and _cell(3) == "3"
    assert _shown({"figure": "fig-a, fig-b", "chapter": "02_x, 05_y"}) == (
        "{numref}`fig-a`, {numref}`fig-b`; {doc}`chapters/02_x`, {doc}`chapters/05_y`")
    assert _shown({"figure": None, "chapter": "02_x"}) == "{doc}`chapters/02_x`"
    assert _shown({"figure": " fig-a ,", "chapter": None}) == "{numref}`fig-a`"
    assert _shown({"figure": None, "chapter": None}) == "–"


def test_a_record_reads_back_as_the_same_result():
    from rankcollapse_book.ledger import _result

    r = Result("p", "t", 1.5, "more", "agrees", 1.2, 1.8, 0.98, (5, 7), 1.3, 2, 1, 20,
               (0.1, 0.2), "more", "≤", 3.0)
    assert _result(json.loads(json.dumps(r.record()))) == r
    assert _result(check_result("p", "t", None, None).record()) == check_result("p", "t", None,
                                                                              None)


def test_result_rows_written_out():
    r = Result("trained models", "text|a", 0.8, "less", "opposite", 0.7, 0.9, 1 - 0.05 / 3, (3,),
               1.5, values=36, sd=(0.1,)).record()
    assert _result_row(r) == ("| | trained models: text\\|a | lower | 0.800 (0.700–0.900) | "
                              "98.3% | 3 | 1.50 | |")
    groups = dict(r, units=[3, 12], found="not less", level=0.995, detectable=None, at=5.0)
    assert _result_row(groups) == ("| | trained models: text\\|a, 5 | not lower by the margin | "
                                   "0.800 (0.700–0.900) | 99.5% | 3+12 | – | |")
    tied = dict(r, found="undecided", low=None, high=None, tied=19, values=36)
    # no interval: no level and no power to state
    assert _result_row(tied) == ("| | trained models: text\\|a | undecided (mostly tied at the "
                                 "floor) | 0.800 | – | 3 | – | |")
    narrow = dict(r, number=0.99871, low=0.99512, high=1.00231, margin=0.01)
    assert "| 0.9987 (0.9951–1.002) |" in _result_row(narrow)
    assert "| 0.999 (0.995–1.00) |" in _result_row(dict(narrow, margin=0.05))
    assert _result_row(dict(r, tied=18)).startswith("| | trained models: text\\|a | lower | ")
    check = check_result("p", "t", 2.2e-15, True, bound="≤").record()
    assert _result_row(check) == "| | p: t | check passes | ≤2.2×10⁻¹⁵ | – | – | – | |"
    assert _result_row(dict(check, found="not checked", number=None, level=0.95)) == \
        "| | p: t | not checked | – | – | – | – | |"
    assert _result_row(dict(r, level=None)) == ("| | trained models: text\\|a | lower | 0.800 "
                                                "(0.700–0.900) | – | 3 | 1.50 | |")


def test_tables_written_out(tmp_path):
    more_records(tmp_path)
    rows = {r["id"]: r for r in ledger(collect(tmp_path, ["04_four", "06_six"]), "ci", RUNS)}
    head = ("| id | claim, part and task | verdict / what the test found | estimate (interval) | "
            "level | units | detectable | shown in |")
    assert _table([rows["C4b"], rows["B4"]]) == [
        ":::{div} ledger", head + "\n|---|---|---|---|---|---|---|---|",
        "| **C4b** | the advantage is most visible in early layers | **undecided** | | | | | "
        "{doc}`chapters/06_six` |",
        "| | trained models: text | undecided (mostly tied at the floor) | 1 | – | 3 | – | |",
        "| **B4** | how many Sinkhorn iterations inference needs | **fewer iterations suffice** "
        "| | | | | {doc}`chapters/06_six` |",
        "| | Sinkhorn-trained models: text, 20 | parity | 1 (0.995–1.00) | 98.3% | 5 | 1.01 | |",
        "| | Sinkhorn-trained models: text, 10 | parity | 1 (0.995–1.00) | 98.3% | 5 | 1.01 | |",
        ":::", ""]
    assert _table([]) == [":::{div} ledger", head + "\n|---|---|---|---|---|---|---|---|",
                          ":::", ""]
    c6d, c4b = rows["C6d"]["calibration"], rows["C4b"]["calibration"]
    lines = _calibration_table([rows["C6d"], rows["C1"], rows["C4b"],
                                dict(rows["C6d"], direction="no more", family=1),
                                dict(rows["C4b"], direction="less", family=2)])
    assert lines == [
        ":::{div} ledger",
        "| id | direction | tests | each test's level | finds the paper's result where it is "
        "false | finds it on some task | on every task |\n|---|---|---|---|---|---|---|",
        f"| C6d | Sinkhorn higher | 4 | 99.6% each (12 tests) | {100 * c6d['false_rate']:.1f}% | "
        f"{100 * c6d['power']:.0f}% at a 1.5× effect | {100 * c6d['power_every']:.0f}% |",
        f"| C4b | Sinkhorn higher | 1 | 98.3% each (3 tests) | {100 * c4b['false_rate']:.1f}% | "
        f"{100 * c4b['power']:.0f}% at a 1.5× effect | {100 * c4b['power_every']:.0f}% |",
        f"| C6d | no Sinkhorn advantage | 4 | 95% each (1 test) | "
        f"{100 * c6d['false_rate']:.1f}% | {100 * c6d['power']:.0f}% where the true ratio is 1 "
        f"| {100 * c6d['power_every']:.0f}% |",
        f"| C4b | Sinkhorn lower | 1 | 97.5% each (2 tests) | {100 * c4b['false_rate']:.1f}% | "
        f"{100 * c4b['power']:.0f}% at a 1.5× effect | {100 * c4b['power_every']:.0f}% |",
        ":::", ""]
    assert c6d["power"] > 0.05  # the percentages above are not all zero
    registry_lines = _registry_table("ci")
    assert len(registry_lines) == 2 + 31 + 2 and registry_lines[-2:] == [":::", ""]
    assert registry_lines[:2] == [
        ":::{div} ledger",
        "| id | part | quantity | layers, depths, variants | unit | its estimate | direction | "
        "primary test | tasks | family |\n|---|---|---|---|---|---|---|---|---|---|"]
    assert registry_lines[2] == (
        "| C1 | random pure attention | relative residual of the last hidden state, pure "
        "softmax attention (no FFN, no skip) with random weights | – | weight draw | the checked "
        "value | – | below "
        "1e-08 at every logit scale | every logit scale | – |")
    c4a = next(line for line in registry_lines if line.startswith("| C4a |"))
    assert c4a == ("| C4a | trained models | relative residual of the hidden states (block "
                   "outputs), composite norm | layers 1–L; full model | training seed | Sinkhorn "
                   "/ softmax | Sinkhorn higher | mean log ratio Sinkhorn / softmax per unit, t interval over units; "
                   "margin 1.1 | text classification; MNIST digits; Cats and Dogs | 3 |")
    c6c = next(line for line in registry_lines if line.startswith("| C6c |"))
    assert "| random higher |" in c6c and "text classification / softmax; text " \
        "classification / sinkhorn; MNIST digits / softmax" in c6c
    c5 = next(line for line in registry_lines if line.startswith("| C5 |"))
    assert c5.endswith("| – | – | – | – | – | – | not tested: the `ci` profile trains smaller "
                       "models on stand-in data; the `full` profile uses the paper's sizes and "
                       "datasets, and its verdict is that run's | – | – |")


PAGE_HEAD = [
    "---", "html_theme.sidebar_secondary.remove: true", "---", "", "# Claims ledger", "",
    "Every claim of the paper, its verdict on this build, the primary tests that decided it and "
    "where it is shown. The verdicts are computed from the run's numbers by the rules below, "
    "from tests registered in the library before anything ran (the registry is printed at the "
    "end of this page); nothing here is typed by hand. Each claim's row is followed by one row "
    "per test: the task and part of the claim it tests, what its interval found, the estimate "
    "with its interval (for a check, the checked value; ≤ marks a value at the rounding floor, "
    "which is at most that), the interval's level (the intervals of one claim hold together at "
    "95%), the independent units (one count per group for two groups) and the smallest effect "
    "the test's design detects with 80% power, given its units and observed spread (for a test "
    "of parity: the narrowest margin within which it shows parity with that power when the "
    "true ratio is 1; a run can show parity at the margin where this is a little above it, "
    "with less than that power). The same rows are in `claims.json` beside this page.", ""]


def flat(lines):
    return "\n".join(lines).split("\n")


def test_the_page_line_by_line(tmp_path):
    more_records(tmp_path)
    rows = ledger(collect(tmp_path, ["04_four", "06_six"]), "full", RUNS)
    lines = page(rows, "full", 123).split("\n")
    assert lines[:8] == PAGE_HEAD
    assert lines[8:12] == ["Profile of this build: `full`.", "", "## How a claim is decided",
                           ""]
    assert lines[12].startswith("Each comparison is Sinkhorn / softmax") and lines[13] == ""
    assert lines[14].startswith("A claim is decided by its primary tests") and lines[15] == ""
    assert lines[16].startswith("An open question's verdict") and lines[17] == ""
    assert lines[18:20] == ["## The paper's claims", ""]
    claims = [r for r in rows if r["id"] not in FINDINGS]
    questions = [r for r in rows if r["id"] in FINDINGS]
    n = len(flat(_table(claims)))
    assert lines[20:20 + n] == flat(_table(claims))
    at = 20 + n
    assert lines[at:at + 4] == [
        "## Questions the paper left open", "",
        "The paper leaves some questions open or names them as future work (C10). The book "
        "answers them with its own experiments; their verdicts say what was found, not whether "
        "a claim of the paper held.", ""]
    at += 4
    assert lines[at:at + len(flat(_table(questions)))] == flat(_table(questions))
    at += len(flat(_table(questions)))
    assert lines[at:at + 4] == [
        "## How often each rule is wrong", "",
        "Each claim's rule was run on simulated repetitions of this build's own design (123 "
        "each: the same tasks, units and observed spread of the per-unit scores, decided by the "
        "same code): how often it finds the paper's result (reproduced or partly reproduced) "
        "where that result is false, at the boundary (no difference for a claimed difference, a "
        "ratio at the margin for a claimed parity or absence of an advantage), and how often it "
        "finds it where it holds. The first should be at most 5%. (A test that presupposes an "
        "advantage is simulated without that condition, which can only raise the first rate.)",
        ""]
    at += 4
    calibrated = flat(_calibration_table(claims))
    assert lines[at:at + len(calibrated)] == calibrated and len(calibrated) == 3 + 3 + 2
    at += len(calibrated)
    assert lines[at:at + 4] == [
        "## The registry", "",
        "The primary test of every claim and question, as the library declares it "
        "(`rankcollapse.registry`); $L$ is the depth of the model or stack, the family the "
        "number of tests whose intervals hold together.", ""]
    at += 4
    assert lines[at:at + 36] == flat(_registry_table("full"))
    at += 36
    assert lines[at:at + 2] == ["## Findings, claim by claim", ""]
    assert lines[at + 2:] == [
        f"- **{r['id']}** ({r['verdict']}): {' '.join(r['finding'].split())}" for r in rows] + [""]
    assert "- **C6d** (reproduced): Part two. Part one." in lines
    assert "- **C1** (reproduced): Collapsed." in lines
    ci = page(rows, "ci").split("\n")
    assert ci[8] == ("Profile of this build: `ci`. Note: the `ci` profile trains small models on "
                     "stand-in data with few seeds: its verdicts demonstrate the method at small "
                     "scale and are not a test of the paper's experiment, which the full profile "
                     "runs at the paper's sizes.")
    assert "repetitions of this build's own design (1000 each" in "\n".join(ci)


def test_findings_are_one_line_each_on_the_page(tmp_path):
    rows = ledger([], "full")
    rows[0] = dict(rows[0], finding="Two\nlines  and   spaces.")
    assert "- **C1** (not testable here): Two lines and spaces." in page(rows, "full")
    assert [r["note"] for r in rows][:1] == [None]
    assert ledger([], "ci")[0]["note"] == (
        "the ci profile trains small models on stand-in data with few seeds: its verdicts "
        "demonstrate the method at small scale and are not a test of the paper's experiment, "
        "which the full profile runs at the paper's sizes")


def test_write_ledger_writes_what_it_returns(tmp_path):
    more_records(tmp_path)
    rows = write_ledger(tmp_path, ["04_four", "06_six"], "full", 40)
    assert rows == ledger(collect(tmp_path, ["04_four", "06_six"]), "full", 40)
    assert (tmp_path / PAGE).read_text() == page(rows, "full", 40)
    assert (tmp_path / FINDINGS_PAGE).read_text() == findings(rows, "full")
    text = (tmp_path / "book" / JSON).read_text()
    assert text == json.dumps(rows, indent=1)
    assert {r["id"]: r for r in rows}["C6d"]["calibration"]["runs"] == 40


def test_a_claim_with_checks_and_tests_takes_the_tests_direction(monkeypatch):
    from dataclasses import replace

    from rankcollapse import registry
    from rankcollapse_book.ledger import _direction

    assert _direction("C4a") == "more" and _direction("C1") == "" and _direction("C2a") == ""
    assert _direction("C8") == "no less" and _direction("B4") == "parity"
    entry = registry.CLAIMS["C4a"]
    mixed = replace(entry, parts=(registry.CLAIMS["C1"].parts[0],) + entry.parts)
    monkeypatch.setitem(registry.CLAIMS, "C4a", mixed)
    assert _direction("C4a") == "more"


def test_the_ledger_states_power_at_its_own_effect(tmp_path, monkeypatch):
    import rankcollapse_book.ledger as ledger_module

    more_records(tmp_path)
    monkeypatch.setattr(ledger_module, "EFFECT", 2.0)
    c6d = {r["id"]: r for r in ledger(collect(tmp_path, ["04_four", "06_six"]), "ci", RUNS)}["C6d"]
    tests = [Result(**{k: tuple(v) if isinstance(v, list) else v for k, v in r.items()})
             for r in c6d["results"]]
    false_rate, power, every = plain_calibration(tests, "more", 12, RUNS, 0, 2.0)
    assert c6d["calibration"] == {"false_rate": false_rate, "power": power,
                                  "power_every": every, "runs": RUNS, "effect": 2.0}


def test_detectable_range_over_a_claims_tests():
    from rankcollapse_book.ledger import _detectable_range

    def test(d, units=(3,)):
        return {"units": list(units), "detectable": d}

    row = {"detectable_ratio": 273.0, "results": [test(1.58), test(273.0), test(9.6),
                                                  test(None), test(math.nan), test(0.5, ())]}
    assert _detectable_range(row) == "1.58 to 273, depending on the task"
    assert _detectable_range({"detectable_ratio": 1.5, "results": [test(1.5)]}) == "1.50"
    assert _detectable_range({"detectable_ratio": 1.5, "results": []}) == "1.50"
    assert _detectable_range({"detectable_ratio": 1.5, "results": [test(1.501), test(1.5)]}) \
        == "1.50"


def test_rows_say_how_many_values_were_at_the_floor():
    r = Result("trained models", "text", 0.8, "less", "opposite", 0.7, 0.9, 0.98, (3,), 1.5,
               censored=7, values=36).record()
    assert "| lower (7 of 36 values at the floor) | 0.800 (0.700–0.900) |" in _result_row(r)
    assert "| lower | 0.800" in _result_row(dict(r, censored=0))


# ----------------------------------------------------------------------------- bad records


def _record_with(tmp_path, **change):
    records(tmp_path)
    path = tmp_path / "book" / "chapters" / "claims" / "05_five.json"
    rows = json.loads(path.read_text())
    rows[3] = {**rows[3], **change}  # the C4a row
    path.write_text(json.dumps(rows))
    return collect(tmp_path, ["02_two", "05_five"])


def test_a_record_whose_id_differs_in_case_is_refused_not_dropped(tmp_path):
    """C4A once vanished from the ledger, and C4a read 'not testable here'."""
    rows = _record_with(tmp_path, id="C4A")
    with pytest.raises(ValueError, match=r"^chapter 05_five records claim id 'C4A'; did you "
                                         r"mean 'C4a'\? .*the claims are C1, "):
        ledger(rows, "ci", RUNS)
    with pytest.raises(ValueError, match=r"^chapter 05_five records claim id 'C44'; the "
                                         r"claims are C1, "):
        ledger(_record_with(tmp_path, id="C44"), "ci", RUNS)


def test_a_record_with_a_misspelt_part_is_refused(tmp_path):
    rows = _record_with(tmp_path)
    rows[3]["results"][1]["part"] = "trained model"
    with pytest.raises(ValueError, match=r"^chapter 05_five: C4a has no part 'trained model'; "
                                         r"its parts: trained models"):
        ledger(rows, "ci", RUNS)


def test_a_claim_with_a_registered_part_not_run_says_so(tmp_path):
    """C9 is registered on random logits and on trained models; with only the random part
    recorded it was decided 'reproduced' on that part alone."""
    records(tmp_path)
    rows = ledger(collect(tmp_path, ["02_two", "05_five"]), "ci", RUNS)
    c9 = {r["id"]: r for r in rows}["C9"]
    assert c9["verdict"] == "not testable here"
    assert c9["finding"] == ("Not decided: no chapter of this build recorded its part "
                             "'trained models' (a claim is decided on every registered part, "
                             "never on the rest). Random: more.")
    assert [r["part"] for r in c9["results"]] == ["random logits"]  # still shown
    assert c9["calibration"] is None
    trained = Claim.of("C9", [result("trained models", "text", "more", "agrees")], "Trained.")
    save_records(tmp_path, "05_five", "ci", [trained.record()])
    both = ledger(collect(tmp_path, ["02_two", "05_five"]), "ci", RUNS)
    c9 = {r["id"]: r for r in both}["C9"]
    assert c9["verdict"] == "reproduced" and c9["finding"] == "Random: more. Trained."


def test_a_claim_tested_on_too_few_units_is_calibrated_not_a_crash(tmp_path):
    """Two seeds on one task: that test is undecided, in the run and in the simulation."""
    few = Claim.of("C4a", [result("trained models", "text", "undecided", "undecided",
                                  units=(2,)),
                           result("trained models", "mnist", "more", "agrees", units=(5,))],
                   "Two seeds on text.")
    save_records(tmp_path, "05_five", "ci", [few.record()])
    c4a = {r["id"]: r for r in ledger(collect(tmp_path, ["05_five"]), "ci", RUNS)}["C4a"]
    assert c4a["verdict"] == "partly reproduced"
    assert c4a["calibration"]["power_every"] == 0.0  # text can never agree with two seeds
