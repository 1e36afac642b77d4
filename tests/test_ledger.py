"""The claims ledger: every claim id gets one row, chapters' rows are merged, the page, the
findings summary and claims.json say the same."""

import json

import pytest

from rankcollapse.stats import CLAIMS, OPEN_QUESTIONS, Claim
from rankcollapse_book.ledger import (FINDINGS, JSON, PAGE, collect, findings, ledger,
                                      readable, save_records, write_ledger)


def records(tmp_path):
    ch2 = [Claim("C2a", "random logits", "reproduced", "Random: fine.").with_numbers(
               number=1e-9, measure="largest row error"),
           Claim("C9", "entropy", "partly reproduced", "Random: partly.")]
    ch5 = [Claim("C2a", "trained logits", "not reproduced", "Trained: no.",
                 figure="fig-trained-attention"),
           Claim("C4a", "hidden", "contradicted", "Lower.").with_numbers(
               number=0.8, measure="a ratio"),
           Claim("B2", "mechanism", "supported", "It holds.")]
    save_records(tmp_path, "02_two", "ci", [c.record() for c in ch2])
    save_records(tmp_path, "05_five", "ci", [c.record() for c in ch5], data="trained on t")


def test_every_claim_gets_one_row_and_parts_are_merged(tmp_path):
    records(tmp_path)
    rows = ledger(collect(tmp_path, ["02_two", "05_five"]), "ci")
    assert [r["id"] for r in rows] == list(CLAIMS) + list(OPEN_QUESTIONS)
    by_id = {r["id"]: r for r in rows}
    assert by_id["C2a"]["verdict"] == "partly reproduced"  # reproduced + not reproduced
    assert by_id["C2a"]["chapter"] == "02_two, 05_five" and by_id["C2a"]["number"] == 1e-9
    assert by_id["C2a"]["measure"] == "largest row error"  # with the number it describes
    assert by_id["C2a"]["data"] == "random weights, inputs and logits; trained on t"
    assert by_id["C2a"]["finding"] == "Random: fine. Trained: no."
    assert by_id["C4a"]["verdict"] == "contradicted" and by_id["C4a"]["profile"] == "ci"
    assert by_id["C10"]["verdict"] == "not testable here" and by_id["C10"]["chapter"] is None


def test_page_findings_and_json_agree(tmp_path):
    records(tmp_path)
    rows = write_ledger(tmp_path, ["02_two", "05_five"], "ci")
    page = (tmp_path / PAGE).read_text()
    assert "| C4a |" in page and "**contradicted**" in page and "{numref}`fig-trained-attention`" in page
    assert "{doc}`chapters/05_five`" in page
    assert "| 10⁻⁹ | largest row error |" in page  # powers of ten written for a reader
    summary = (tmp_path / FINDINGS).read_text()
    assert "- **contradicted**: C4a" in summary and "Contradicted: C4a (" in summary
    saved = json.loads((tmp_path / "book" / JSON).read_text())
    assert saved == rows
    assert set(saved[0]) >= {"id", "claim", "verdict", "number", "interval", "measure",
                             "figure", "chapter", "profile", "data"}
    clean = findings([dict(r, verdict="reproduced") for r in rows], "ci")
    assert "Every claim that could be tested here was reproduced" in clean


def test_numbers_read_as_a_reader_writes_them():
    assert [readable(x) for x in (0.5, 5.99, 1234.5, 2.5e-7, 1e9, -3.2e5, 0.0)] == \
        ["0.500", "5.99", "1234", "2.5×10⁻⁷", "10⁹", "-3.2×10⁵", "0"]


def test_a_checked_number_must_say_what_it_is():
    with pytest.raises(ValueError, match="say what the checked number is"):
        Claim("C1", "collapse", "reproduced", "Yes.").with_numbers(number=1e-9)


def test_open_questions_have_their_own_table_and_summary_lines(tmp_path):
    records(tmp_path)
    rows = write_ledger(tmp_path, ["02_two", "05_five"], "ci")
    page = (tmp_path / PAGE).read_text()
    claims_part, open_part = page.split("## Questions the paper left open")
    assert "| B2 |" in open_part and "| B2 |" not in claims_part and "| C4a |" in claims_part
    summary = (tmp_path / FINDINGS).read_text()
    assert f"of the paper's {len(CLAIMS)} claims" in summary
    assert "**B2**, " in summary and "**supported**" in summary
    assert "B1" not in summary  # not run: no line in the summary, a row on the page
    assert {r["id"]: r["verdict"] for r in rows}["B1"] == "not testable here"
