"""The claims ledger: every claim id gets one row, the parts recorded by several chapters are
merged and decided again by the registered rule, and the page, the findings summary and
claims.json say the same."""

import json

import pytest

from rankcollapse.registry import CLAIMS, FINDINGS, Claim
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
           Claim.of("B2", [result("trained models", "mnist", "more", "agrees")], "It holds.")]
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
    assert by_id["B2"]["verdict"] == "supported"


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
    assert "Undecided (this run could not tell): C8 (smallest ratio detectable 1.50)" in summary
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
    assert "| **B2** |" in open_part and "| **B2** |" not in claims_part
    assert "| **C4a** |" in claims_part
    summary = (tmp_path / FINDINGS_PAGE).read_text()
    assert f"of the paper's {len(CLAIMS) - len(FINDINGS)} claims" in summary
    assert "**B2**, " in summary and "**supported**" in summary
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
