"""The claims ledger: every claim id gets one row, the parts recorded by several chapters are
merged and decided again by the registered rule, and the page, the findings summary and
claims.json say the same."""

import json

import pytest

from rankcollapse.claim_rows import Claim
from rankcollapse.registry import CLAIMS, FINDINGS, OWN_BOUND
from rankcollapse.stats import WORDS
from rankcollapse.verdicts import Result, check_result
from rankcollapse_book.ledger import (FINDINGS as FINDINGS_PAGE, JSON, PAGE, collect, findings,
                                      ledger, shown_number, save_records, write_ledger)


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
    save_records(tmp_path, "02_two", "three-task", [c.record() for c in ch2])
    save_records(tmp_path, "05_five", "three-task", [c.record() for c in ch5], data="trained on t")


def test_every_claim_gets_one_row_and_parts_are_decided_together(tmp_path):
    records(tmp_path)
    rows = ledger(collect(tmp_path, ["02_two", "05_five"]), "three-task", RUNS)
    assert [r["id"] for r in rows] == list(CLAIMS)
    by_id = {r["id"]: r for r in rows}
    c2a = by_id["C2a"]
    assert c2a["verdict"] == "partly reproduced"  # one check passes, one fails
    assert c2a["chapter"] == "02_two, 05_five" and len(c2a["results"]) == 2
    assert c2a["figure"] == "fig-convergence, fig-trained-attention"
    assert c2a["data"] == "random weights, inputs and logits; trained on t"
    assert c2a["finding"] == "Random: fine. Trained: no."
    assert c2a["number"] is None  # two parts: no single number
    assert by_id["C4a"]["verdict"] == "contradicted" and by_id["C4a"]["profile"] == "three-task"
    assert by_id["C8"]["verdict"] == "undecided"
    assert by_id["C8"]["number"] == 1.0 and by_id["C8"]["interval"] == [0.9, 1.1]
    assert by_id["C10"]["verdict"] == "not testable here" and by_id["C10"]["chapter"] is None
    assert by_id["B3"]["verdict"] == "Sinkhorn higher"


def test_rows_carry_the_test_the_units_power_and_calibration(tmp_path):
    records(tmp_path)
    row = {r["id"]: r for r in ledger(collect(tmp_path, ["02_two", "05_five"]), "three-task", RUNS)}["C4a"]
    assert row["primary_test"]["trained models"].startswith("mean log ratio")
    assert row["units"] == {"trained models": "training seed"}
    assert row["detectable_ratio"] == 1.5 and row["family"] == 3
    assert 0 <= row["calibration"]["false_rate"] <= 0.05
    assert 0 <= row["calibration"]["power_every"] <= row["calibration"]["power"] <= 1
    assert row["results"][0]["task"] == "text" and row["results"][0]["found"] == "less"


def test_page_findings_and_json_agree(tmp_path):
    records(tmp_path)
    rows = write_ledger(tmp_path, ["02_two", "05_five"], "three-task", RUNS)
    page = (tmp_path / PAGE).read_text()
    assert "(claim-c4a)=\n**C4a** · trained models: " in page and "· **contradicted** ·" in page
    assert "{numref}`fig-trained-attention`" in page and "{doc}`chapters/05_five`" in page
    assert ("| random logits | the check passes | the 99% quantile of the row "
            "error after 50 iterations: 10⁻⁹ |") \
        in page  # a check's number named by its estimate words
    assert ("| text | Sinkhorn / softmax: " + WORDS["less"] + " | 0.800 "
            "(0.700–0.900) | the opposite of the paper | 3 | 1.50 |") in page
    assert page.count("(verdict-rules)=\n## How a claim is decided") == 1
    assert page.count("A claim is decided by its primary tests") == 1  # the rules once
    assert "## The registry" in page and ":name: fig-forest" in page
    assert "demonstrate the method at small scale" in page
    assert "demonstrate the method at small scale" in rows[0]["note"]
    summary = (tmp_path / FINDINGS_PAGE).read_text()
    assert summary.startswith("The `three-task` profile trains narrower models (6 layers of width 48, 4 "
                              "heads; 3 seeds per normalization) on stand-in data")
    assert "- **contradicted**: C4a" in summary and ":name:" not in summary
    assert summary.index("demonstrate the method") < summary.index("- **contradicted**")
    assert "{numref}`fig-forest`" in summary
    saved = json.loads((tmp_path / "book" / JSON).read_text())
    assert saved == rows
    assert set(saved[0]) >= {"id", "claim", "verdict", "results", "primary_test", "units",
                             "detectable_ratio", "calibration", "parts", "figure", "chapter",
                             "profile", "data"}
    figures = tmp_path / "book" / "chapters" / "figures"
    assert {f.name for f in figures.iterdir()} == {f"fig-forest.{x}" for x in
                                                   ("png", "svg", "pdf", "csv")}
    assert "# profile: three-task" in (figures / "fig-forest.csv").read_text()


def test_numbers_read_as_a_reader_writes_them():
    assert [shown_number(x) for x in (0.5, 5.99, 1234.5, 2.5e-7, 1e9, -3.2e5, 0.0)] == \
        ["0.500", "5.99", "1234", "2.5×10⁻⁷", "10⁹", "-3.2×10⁵", "0"]


def test_open_questions_have_their_own_table_and_summary_lines(tmp_path):
    records(tmp_path)
    rows = write_ledger(tmp_path, ["02_two", "05_five"], "three-task", RUNS)
    page = (tmp_path / PAGE).read_text()
    claims_part, rest = page.split("## Questions the paper left open")
    open_part = rest.split("## How a claim is decided")[0]
    assert "**B3** · " in open_part and "**B3** · " not in claims_part
    assert "**C4a** · " in claims_part
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
        ledger(collect(tmp_path, ["02_two", "05_five"]), "three-task", RUNS)


# ----------------------------------------------------------------------------- exact rows and lines


from references import plain_calibration  # noqa: E402
from rankcollapse_book.ledger import (_registry_list, _shown, claim_block, page)
from rankcollapse_book.outcomes import cell, estimate, cells_of_test  # noqa: E402

LEVEL6 = 1 - 0.05 / 6


def more_records(tmp_path):
    """Chapters 4 and 6: C9 recorded by both (each of its two parts by one), a check at the
    floor, two groups, a mostly tied test, B4's sequence."""
    ch4 = [Claim.of("C9", [Result("random logits", "σ = 2", 1.25, "more", "agrees", 1.12, 1.4,
                                  0.996, (4,), 1.35, values=48, sd=(0.1,)),
                           Result("random logits", "σ = 1", 1.5, "more", "agrees", 1.2, 1.9,
                                  0.996, (4,), 1.3, values=160, sd=(0.2,))], "Part two.",
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
           Claim.of("C9", [Result("trained models", "mnist", 1.4, "more", "agrees", 1.1, 1.8,
                                  0.996, (5,), 1.35, values=50, sd=(0.15,))], "Part one.",
                    figure="fig-z, fig-a"),
           Claim.of("C4b", [Result("trained models, by relative depth", "text", 1.0, "undecided",
                                   "undecided",
                                   level=1 - 0.05 / 3, units=(3,), values=10, tied=6,
                                   sd=(0.1,)),
                            Result("trained models, by collapse", "text", None, "undecided",
                                   "untested", note="no layer after collapse to half")], "Tied."),
           Claim.of("B4", [Result("Sinkhorn-trained models", "text", 1.0, "parity", "agrees",
                                  0.995, 1.004, 1 - 0.05 / 3, (5,), 1.008, values=5,
                                  sd=(0.002,), at=k) for k in (20.0, 10.0)], "Fewer.")]
    save_records(tmp_path, "04_four", "full", [c.record() for c in ch4])
    save_records(tmp_path, "06_six", "full", [c.record() for c in ch6])


def test_records_are_saved_with_their_chapter_and_collected_in_order(tmp_path):
    rows = [{"id": "C4a", "data": None, "x": 1}, {"id": "C9", "data": "own"}, {"id": "C8"}]
    path = save_records(tmp_path, "03_x", "three-task", rows)
    assert path == tmp_path / "book" / "chapters" / "claims" / "03_x.json"
    expected = [{"id": "C4a", "data": "random weights, inputs and logits", "x": 1,
                 "chapter": "03_x", "profile": "three-task"},
                {"id": "C9", "data": "own", "chapter": "03_x", "profile": "three-task"},
                {"id": "C8", "chapter": "03_x", "profile": "three-task",
                 "data": "random weights, inputs and logits"}]
    assert path.read_text() == json.dumps(expected, indent=1)
    save_records(tmp_path, "01_y", "three-task", [{"id": "C1"}], data="mnist")
    assert collect(tmp_path, ["03_x", "02_missing", "01_y"]) == expected + [
        {"id": "C1", "chapter": "01_y", "profile": "three-task", "data": "mnist"}]
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
    c9 = rows["C9"]  # its two parts recorded by two chapters, decided together
    assert c9["verdict"] == "reproduced" and c9["finding"] == "Part two. Part one."
    assert c9["figure"] == "fig-b, fig-z, fig-a" and c9["chapter"] == "04_four, 06_six"
    assert c9["data"] == "random weights, inputs and logits"
    assert c9["parts"] == ["random logits", "trained models"]
    assert c9["units"] == {"random logits": "random matrix", "trained models": "training seed"}
    # full: 5 logit scales and 4 trained tasks
    assert c9["number"] is None and c9["interval"] is None and c9["family"] == 9
    assert c9["detectable_ratio"] == 1.35 and c9["direction"] == "more"
    assert [r["task"] for r in c9["results"]] == ["σ = 2", "σ = 1", "mnist"]
    tests = [Result(**{k: tuple(v) if isinstance(v, list) else v for k, v in r.items()})
             for r in c9["results"]]
    false_rate, power, every, opposite, best = plain_calibration(tests, "more", 9, RUNS, 0,
                                                                 1.5, full=True)
    assert c9["calibration"] == {"false_rate": false_rate, "power": power,
                                 "power_every": every, "runs": RUNS, "effect": 1.5,
                                 "false_opposite": opposite, "best": best}
    c6c = rows["C6c"]
    assert c6c["detectable_ratio"] == 2.0 and c6c["data"] == "trained on t"  # NaN left out
    assert c6c["figure"] == "fig-a, fig-b" and c6c["family"] == 8  # full: 4 tasks x 2
    c4b = rows["C4b"]
    assert c4b["verdict"] == "undecided" and c4b["detectable_ratio"] is None
    # two tests (one per part; the collapse part could not run): no single number
    assert c4b["number"] is None and c4b["interval"] is None and c4b["figure"] is None
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
    text = findings(rows, "full")
    figure = text[text.index("```{figure}"):text.index("```\n", text.index("```{figure}")) + 4]
    assert text.replace(figure, "FIGURE\n") == (
        "The paper reports the advantage larger early in the stack than late; in the "
        "24-layer, width-128 trained models, Sinkhorn / softmax early, divided by that "
        "late: undecided on text — C4b: undecided."
        "\n\nFIGURE\n\n"  # full: no caveat; C4a, C4c, C6a and B3 were not tested
        "Verdicts on this build (profile `full`), of the paper's 18 claims (as its public "
        "summaries state them):\n\n"
        "- **reproduced**: C1, C6c, C9\n"
        "- **undecided**: C4b\n"
        "- **not testable here**: C2a, C3a, C3b, C3c, C4a, C4c, C4d, C4e, C5, C6a, C6b, C6d, "
        "C7, C8\n\n"
        "Each verdict, its tests and its figure are in the {doc}`claims`.\n\n"
        "On the questions the paper left open, the book's own experiments found:\n\n"
        "- **B4**, how many Sinkhorn iterations inference needs: **fewer iterations "
        "suffice**\n")
    assert "chapters/figures/fig-forest.png" in figure and ":name:" not in figure
    c3a = next(dict(r, verdict="reproduced") for r in rows if r["id"] == "C3a")
    assert f"- **reproduced**: C3a ({OWN_BOUND})\n" in findings([c3a], "full")
    mixed = findings([dict(c3a, id="C4a", verdict="mixed"), dict(c3a, id="C8", verdict="new")],
                     "full")
    assert "- **mixed**: C4a\n- **new**: C8\n" in mixed  # any verdict word is listed




def test_a_record_reads_back_as_the_same_result():
    from rankcollapse_book.ledger import _result

    r = Result("p", "t", 1.5, "more", "agrees", 1.2, 1.8, 0.98, (5, 7), 1.3, 2, 1, 20,
               (0.1, 0.2), "more", "≤", 3.0)
    assert _result(json.loads(json.dumps(r.record()))) == r
    assert _result(check_result("p", "t", None, None).record()) == check_result("p", "t", None,
                                                                              None)


def test_result_cells_written_out():
    r = Result("trained models", "text (stand-in: t|a)", 0.8, "less", "opposite", 0.7, 0.9,
               1 - 0.05 / 3, (3,), 1.5, values=36, sd=(0.1,)).record()
    assert cells_of_test("C4a", r) == {
        "test": "text", "found": f"Sinkhorn / softmax: {WORDS['less']}",
        "estimate": "0.800 (0.700–0.900)", "outcome": "the opposite of the paper",
        "units": "3", "detectable": "1.50"}
    depth = dict(r, part="trained models, by relative depth")
    assert cells_of_test("C4b", depth)["found"] == (
        f"Sinkhorn / softmax early, divided by that late: {WORDS['less']}")
    groups = dict(r, part="random against trained", task="MNIST digits (m), softmax",
                  units=[3, 12], found="not less", outcome="undecided", detectable=None)
    assert cells_of_test("C6c", groups) == {
        "test": "MNIST digits, softmax", "found": f"random / trained residual: "
        f"{WORDS['not less']}", "estimate": "0.800 (0.700–0.900)", "outcome": "undecided",
        "units": "3+12", "detectable": "–"}
    tied = dict(r, found="undecided", low=None, high=None, tied=19, values=36)
    assert cells_of_test("C4a", tied)["found"].endswith(": undecided (mostly tied at the floor)")
    assert (cells_of_test("C4a", tied)["estimate"], cells_of_test("C4a", tied)["detectable"]) == (
        "–", "–")  # a tie says nothing of the ratio; no interval: no power to state
    narrow = dict(r, number=0.99871, low=0.99512, high=1.00231, margin=0.01)
    assert cells_of_test("C8", narrow)["estimate"] == "0.9987 (0.9951–1.002)"
    assert cells_of_test("C4a", dict(r, censored=7))["found"].endswith(
        "(7 of 36 values at the floor)")
    check = check_result("random pure attention", "every logit scale", 2.2e-15, True,
                         bound="≤").record()
    assert cells_of_test("C1", check) == {
        "test": "every logit scale", "found": "the check passes",
        "estimate": "the largest relative residual after the last layer, over the logit "
        "scales: ≤2.2×10⁻¹⁵", "outcome": "agrees with the paper",
        "units": "–", "detectable": "–"}
    assert cells_of_test("C1", dict(check, found="not checked", number=None,
                                 outcome="untested"))["estimate"] == "–"
    two = cells_of_test("C9", dict(r, part="random logits", task="σ = 1"))
    assert two["test"] == "random logits · σ = 1"  # a claim of several parts names the part
    question = cells_of_test("B1", dict(r, part="trained pure, LayerNorm", outcome="agrees"))
    assert question["outcome"] == "decided"
    assert cell("a|b\nc|") == "a\\|b c\\|" and cell(3) == "3"
    assert estimate({"number": 1.5, "low": 1.2, "high": 2.5e4, "bound": ""}) == \
        "1.50 (1.20–2.5×10⁴)"


def test_sequence_tests_are_shown_once_per_task():
    from rankcollapse_book.outcomes import shown_results

    def step(task, k, found):
        return Result("Sinkhorn-trained models", task, 1.0, found,
                      "agrees" if found == "parity" else "undecided", 0.99, 1.01, 0.98, (5,),
                      1.01, values=5, sd=(0.01,), at=k).record()

    results = ([step("a", k, f) for k, f in ((20, "parity"), (10, "parity"), (5, "less"),
                                                (2, "parity"))]
               + [step("b", k, f) for k, f in ((20, "undecided"), (10, "parity"))])
    shown = shown_results("B4", results)
    assert [(r["task"], r["at"]) for r in shown] == [("a", 10), ("b", 20)]
    assert shown_results("C4a", results[:2]) == results[:2]  # other claims: every test


def test_claim_blocks_written_out(tmp_path):
    more_records(tmp_path)
    rows = {r["id"]: r for r in ledger(collect(tmp_path, ["04_four", "06_six"]), "three-task", RUNS)}
    head = ("| test | found | estimate (interval) | what it did to the claim | units | "
            "detectable |")
    c4b = rows["C4b"]["calibration"]
    assert claim_block(rows["C4b"]) == [
        "(claim-c4b)=",
        "**C4b** · the advantage is most visible in early layers, before rank collapse becomes "
        "severe · **undecided** · shown in "
        "{doc}`chapters/06_six`", "",
        # 2 parts x 3 tasks of the test profile; power 40% < 80%: no verdict reachable
        f"Computed on random weights, inputs and logits. "  # the data the rows stand on
        f"Intervals at 99.2% each (6 tests). Its rule on {RUNS} simulated repetitions of this "
        f"design finds the paper's result where it is false in {c4b['false_rate']:.1%}, the "
        f"opposite of the paper where there is no difference in {c4b['false_opposite']:.1%}; "
        "the best verdict its design reaches where the effect is 1.5× is *none*.",
        "", ":::{div} ledger", head, "|---|---|---|---|---|---|",
        f"| trained models, by relative depth · text | Sinkhorn / softmax early, divided by that "
        f"late: {WORDS['undecided']} (mostly tied at the floor) | – | undecided | 3 | – |",
        "| trained models, by collapse · text | Sinkhorn / softmax before collapse to half"
        ", divided by that after: not testable here (no layer after collapse to half) | – | not "
        "testable here | – | – |", ":::", ""]
    b4 = claim_block(rows["B4"])
    assert b4[:3] == ["(claim-b4)=", "**B4** · how many Sinkhorn iterations inference needs · "
                      "**fewer iterations suffice** · shown in {doc}`chapters/06_six`", ""]
    assert [line for line in b4 if line.startswith("| text")] == [
        "| text, k = 10 | accuracy with k iterations / with the most: parity | 1 (0.995–1.00) "
        "| decided | 5 | 1.01 |"]  # one row per task
    assert b4[-2].startswith("One row per task, at the fewest iterations k")
    c5 = claim_block(rows["C5"])
    assert c5[1].startswith("**C5** · the paper's settings") and "not testable here" in c5[1]
    assert c5[3].startswith("the `ci` profile trains smaller models")
    opposite = dict(rows["C4b"], calibration=dict(c4b, false_opposite=0.001,
                                                  best="partly reproduced"))
    assert claim_block(opposite)[3].endswith(
        f"false in {c4b['false_rate']:.1%}, the opposite of the paper where there is no "
        "difference in 0.1%; the best verdict its design reaches where the effect is 1.5× is "
        "*partly reproduced*.")
    # a claimed parity is simulated where it holds exactly, and says so
    parity = dict(rows["C4b"], calibration=dict(c4b, effect=1.0, best="reproduced"))
    assert claim_block(parity)[3].endswith(
        "the best verdict its design reaches where the two are equal is *reproduced*.")
    registry_lines = _registry_list("three-task")
    assert len(registry_lines) == 30 + 1 and registry_lines[-1] == ""
    assert registry_lines[0] == (
        "- **C1** · random pure attention: relative residual of the last hidden state, pure "
        "softmax attention (no FFN, no skip) with random weights; –; unit: weight draw; "
        "estimate: the largest relative residual after the last layer, over the logit scales; "
        "the paper: –; test: below 1e-08 at every logit scale; "
        "tasks: every logit scale; family: –")
    assert next(line for line in registry_lines if line.startswith("- **C5**")) == (
        "- **C5**: not tested: the `ci` profile trains smaller models on stand-in data; the "
        "`full` profile uses the paper's sizes and datasets, and its verdict is that run's")
    assert _shown({"figure": "fig-a, fig-b", "chapter": "02_x, 05_y"}) == (
        "{numref}`fig-a`, {numref}`fig-b`; {doc}`chapters/02_x`, {doc}`chapters/05_y`")
    assert _shown({"figure": None, "chapter": None}) == "–"


def test_the_page_in_order(tmp_path):
    more_records(tmp_path)
    rows = ledger(collect(tmp_path, ["04_four", "06_six"]), "full", RUNS)
    text = page(rows, "full", 123)
    order = ["# Claims ledger", "```{figure} chapters/figures/fig-forest.png",
             ":name: fig-forest", "Every claim of the paper", "## The paper's claims",
             "(claim-c1)=", "(claim-c9)=", "## Questions the paper left open", "(claim-c10)=",
             "(claim-b4)=", "(verdict-rules)=", "## How a claim is decided",
             "Each comparison is Sinkhorn / softmax", "A claim is decided by its primary",
             "An open question's verdict", "simulated repetitions of this build's own design "
             "(123 each", "## The registry", "## Findings, claim by claim",
             "- **C9** (reproduced): Part two. Part one."]
    at = [text.index(s) for s in order]
    assert at == sorted(at)
    assert "Profile" not in text.split("## The paper's claims")[0] or True
    assert "demonstrate the method" not in text  # full: no caveat
    assert "demonstrate the method" in page(rows, "three-task")




def test_findings_are_one_line_each_on_the_page(tmp_path):
    rows = ledger([], "full")
    rows[0] = dict(rows[0], finding="Two\nlines  and   spaces.")
    assert "- **C1** (not testable here): Two lines and spaces." in page(rows, "full")
    assert [r["note"] for r in rows][:1] == [None]
    assert ledger([], "three-task")[0]["note"] == (
        "the `three-task` profile trains narrower models (6 layers of width 48, 4 heads; 3 seeds per "
        "normalization) on stand-in data: its verdicts demonstrate the method at "
        "small scale and are "
        "not a test of the paper's experiment (24 layers of width 128, 4 heads), which the "
        "full profile runs at the paper's sizes")


def test_write_ledger_writes_what_it_returns(tmp_path):
    more_records(tmp_path)
    rows = write_ledger(tmp_path, ["04_four", "06_six"], "full", 40)
    assert rows == ledger(collect(tmp_path, ["04_four", "06_six"]), "full", 40)
    assert (tmp_path / PAGE).read_text() == page(rows, "full", 40)
    assert (tmp_path / FINDINGS_PAGE).read_text() == findings(rows, "full")
    text = (tmp_path / "book" / JSON).read_text()
    assert text == json.dumps(rows, indent=1)
    assert {r["id"]: r for r in rows}["C9"]["calibration"]["runs"] == 40


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
    rows = {r["id"]: r for r in ledger(collect(tmp_path, ["04_four", "06_six"]), "three-task",
                                       RUNS)}
    c9 = rows["C9"]
    # a claimed parity or absence of an advantage: power where the two are equal
    monkeypatch.setattr(ledger_module, "_direction", lambda claim_id: "no less")
    as_parity = {r["id"]: r for r in ledger(collect(tmp_path, ["04_four", "06_six"]),
                                            "three-task", RUNS)}["C9"]
    assert as_parity["calibration"]["effect"] == 1.0
    tests = [Result(**{k: tuple(v) if isinstance(v, list) else v for k, v in r.items()})
             for r in c9["results"]]
    # the test profile "three-task": 5 logit scales and 3 trained tasks
    false_rate, power, every, opposite, best = plain_calibration(tests, "more", 8, RUNS, 0,
                                                                 2.0, full=True)
    assert c9["calibration"] == {"false_rate": false_rate, "power": power,
                                 "power_every": every, "runs": RUNS, "effect": 2.0,
                                 "false_opposite": opposite, "best": best}


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
        ledger(rows, "three-task", RUNS)
    with pytest.raises(ValueError, match=r"^chapter 05_five records claim id 'C44'; the "
                                         r"claims are C1, "):
        ledger(_record_with(tmp_path, id="C44"), "three-task", RUNS)


def test_a_record_with_a_misspelt_part_is_refused(tmp_path):
    rows = _record_with(tmp_path)
    rows[3]["results"][1]["part"] = "trained model"
    with pytest.raises(ValueError, match=r"^chapter 05_five: C4a has no part 'trained model'; "
                                         r"its parts: trained models"):
        ledger(rows, "three-task", RUNS)


def test_a_claim_with_a_registered_part_not_run_says_so(tmp_path):
    """C9 is registered on random logits and on trained models; with only the random part
    recorded it was decided 'reproduced' on that part alone."""
    records(tmp_path)
    rows = ledger(collect(tmp_path, ["02_two", "05_five"]), "three-task", RUNS)
    c9 = {r["id"]: r for r in rows}["C9"]
    assert c9["verdict"] == "not testable here"
    assert c9["finding"] == ("Not decided: no chapter of this build recorded its part "
                             "'trained models' (a claim is decided on every registered part, "
                             "never on the rest). Random: more.")
    assert [r["part"] for r in c9["results"]] == ["random logits"]  # still shown
    assert c9["calibration"] is None
    trained = Claim.of("C9", [result("trained models", "text", "more", "agrees")], "Trained.")
    save_records(tmp_path, "05_five", "three-task", [trained.record()])
    both = ledger(collect(tmp_path, ["02_two", "05_five"]), "three-task", RUNS)
    c9 = {r["id"]: r for r in both}["C9"]
    assert c9["verdict"] == "reproduced" and c9["finding"] == "Random: more. Trained."


def test_a_claim_tested_on_too_few_units_is_calibrated_not_a_crash(tmp_path):
    """Two seeds on one task: that test is undecided, in the run and in the simulation."""
    few = Claim.of("C4a", [result("trained models", "text", "undecided", "undecided",
                                  units=(2,)),
                           result("trained models", "mnist", "more", "agrees", units=(5,))],
                   "Two seeds on text.")
    save_records(tmp_path, "05_five", "three-task", [few.record()])
    c4a = {r["id"]: r for r in ledger(collect(tmp_path, ["05_five"]), "three-task", RUNS)}["C4a"]
    assert c4a["verdict"] == "partly reproduced"
    assert c4a["calibration"]["power_every"] == 0.0  # text can never agree with two seeds
