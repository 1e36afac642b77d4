"""The summary in plain words: each sentence from written-out ledger rows, every branch,
including the one where the advantage must not be called learned."""

from rankcollapse.verdicts import Result
from rankcollapse_book.ledger import chapter_box
from rankcollapse_book.summary import learned, sentences

MNIST, CATS = "MNIST digits (stand-in: 10,000 MNIST digits)", "Cats and Dogs (stand-in: shirts)"
DEPTH, COLLAPSE = "trained models, by relative depth", "trained models, by collapse"  # C4b


def result(part, task, found, number=1.0, low=0.95, high=1.05, outcome="agrees"):
    return Result(part, task, number, found, outcome, low, high, 0.98, (3,), 1.2, values=3,
                  sd=(0.1,)).record()


def rows(c4a=("more", "parity"), swap=("parity", "parity"), c6a="less"):
    trained = [result("trained models", t, f, 1.2 if f == "more" else 1.0, 1.1, 1.3)
               for t, f in zip((MNIST, CATS), c4a)]
    return [{"id": "C4a", "verdict": "partly reproduced", "results": trained},
            {"id": "C4b", "verdict": "contradicted",
             "results": [result(DEPTH, MNIST, "less", 0.87, 0.81, 0.93, "opposite"),
                         result(DEPTH, CATS, "parity"),
                         result(COLLAPSE, MNIST, "more", 1.3, 1.2, 1.4)]},
            {"id": "C4d", "verdict": "partly reproduced",
             "results": [result("trained models", MNIST, "more", 1.2, 1.1, 1.3),
                         result("trained models", CATS, "not less", outcome="undecided")]},
            {"id": "C8", "verdict": "reproduced",
             "results": [{**result("trained models", MNIST, "parity", 1.0, 0.995, 1.005),
                          "margin": 0.01}]},
            {"id": "C6a", "verdict": "contradicted",
             "results": [result("random matrices", "independent logits", c6a, 0.8, 0.79, 0.81,
                                "opposite")]},
            {"id": "B3", "verdict": "parity",
             "results": [result("weights trained with Sinkhorn", t, f, 1.3 if f == "more" else 1.0)
                         for t, f in zip((MNIST, CATS), swap)]}]


def test_the_sentences_written_out():
    said = sentences(rows(), "three-task")
    assert said[0].startswith("The `three-task` profile trains narrower models (6 layers of width 48, 4 "
                              "heads; 3 seeds per normalization) on stand-in data: its "
                              "verdicts")
    assert said[1] == ("Tasks, as named below: MNIST digits (stand-in: 10,000 MNIST digits); "
                       "Cats and Dogs (stand-in: shirts).")
    assert said[2] == (
        "In the 6-layer, width-48 trained models, Sinkhorn keeps more hidden-state rank than "
        "softmax on 1 of 2 tasks, MNIST digits (1.20×, 1.10–1.30); the two are at parity "
        "(within a factor 1.1) on Cats and Dogs — C4a: partly reproduced.")
    assert said[3] == (
        "The paper reports the advantage larger early in the stack than late; in the "
        "6-layer, width-48 trained models, Sinkhorn / softmax early, divided by that late: by "
        "relative depth (the first half of the layers over the second), lower on MNIST digits "
        "(0.870×, 0.810–0.930); at parity (within a factor 1.1) on Cats and Dogs; before "
        "against after the softmax models' collapse to half, higher on MNIST digits (1.30×, "
        "1.20–1.40) — C4b: contradicted.")
    assert said[4] == (
        "The attention sub-layer's own output, in the 6-layer, width-48 trained models: "
        "Sinkhorn keeps more on MNIST digits (1.20×, 1.10–1.30); Sinkhorn is not lower by the "
        "margin on Cats and Dogs — C4d: partly reproduced.")
    assert said[5] == (
        "Test accuracy, Sinkhorn / softmax, in the 6-layer, width-48 trained models: at "
        "parity (within a factor 1.01) on MNIST digits — C8: reproduced.")
    assert said[6] == (
        "Products of independent random attention matrices (32 tokens, depths 2 to 12, N(0, 1) "
        "logits): Sinkhorn keeps less (0.800×, 0.790–0.810), where the paper reports "
        "essentially the same rank decay (so the parity fails, not the paper's point that "
        "random matrices alone give Sinkhorn no advantage) — C6a: contradicted.")
    assert said[7] == (
        "On the Sinkhorn-trained weights of the 6-layer, width-48 trained models, swapping to "
        "softmax at inference leaves the rank at parity on MNIST digits, while Sinkhorn- and "
        "softmax-trained models differ there (C4a): consistent with the weights, not the "
        "normalization, carrying the advantage on these tasks (B3).")
    assert len(said) == 8  # C4c and C4e were not recorded: no sentence
    assert sentences(rows(), "full")[0].startswith("Tasks, as named below")
    assert sentences(rows(), "full")[1].startswith("In the 24-layer, width-128 trained models")


def of(claim_id, table=None):
    """The results of `claim_id` among `table` (default `rows()`)."""
    return next(r for r in table or rows() if r["id"] == claim_id)["results"]


def test_learned_only_where_the_numbers_say_so():
    assert learned(of("C4a"), of("B3")) == ("learned", [MNIST])
    # C4a finds no advantage anywhere: nothing was learned, whatever the swap shows
    no_advantage = sentences(rows(c4a=("parity", "parity")), "three-task")[-1]
    assert "carrying the advantage" not in no_advantage and no_advantage.startswith(
        "On the Sinkhorn-trained weights of the 6-layer, width-48 trained models, swapping "
        "the normalization at inference (Sinkhorn / softmax, the same weights): the two are at "
        "parity")
    # the swap keeps Sinkhorn ahead where C4a finds the advantage: (partly) imposed
    imposed = sentences(rows(swap=("more", "parity")), "three-task")[-1]
    assert "carrying the advantage" not in imposed and imposed.startswith(
        "On the Sinkhorn-trained weights of the 6-layer, width-48 trained models, Sinkhorn at "
        "inference keeps more rank than softmax on MNIST digits: on those weights the normalization itself adds rank")
    # the swap cannot tell where the advantage is: nothing follows, the numbers are said
    unclear = sentences(rows(swap=("undecided", "parity")), "three-task")[-1]
    assert "carrying the advantage" not in unclear and "the test cannot tell on MNIST digits" in unclear
    assert learned([], of("B3")) == ("", [])


def test_the_random_sentence_follows_the_outcome():
    table = [r for r in rows() if r["id"] != "B3"]
    c6a = next(r for r in table if r["id"] == "C6a")
    c6a["results"] = [dict(c6a["results"][0], found="more", outcome="opposite", number=1.3)]
    said = sentences(table, "three-task")
    assert "Sinkhorn keeps more (1.30×, 0.790–0.810)" in said[-1]
    assert "where the paper reports essentially the same rank decay" in said[-1]


def test_untested_claims_say_nothing():
    empty = [{"id": i, "verdict": "not testable here", "results": []}
             for i in ("C4a", "C4b", "C4c", "C4d", "C4e", "C8", "C6a", "B3")]
    assert len(sentences(empty, "three-task")) == 1  # the caveat alone
    assert sentences(empty, "full") == []


def test_a_chapter_box_gives_a_claim_verdict_only_for_whole_claims():
    whole = {"id": "C4a", "claim": "higher", "verdict": "partly reproduced",
             "results": of("C4a")}
    part = {"id": "C9", "claim": "entropy", "verdict": "reproduced",
            "results": [result("random logits", "σ = 1", "more"), dict(
                result("random logits", "σ = 2", "parity"), outcome="against")]}
    box = chapter_box([whole, part], "three-task")
    lines = box.split("\n")
    assert lines[1] == ("| id | claim | task | estimate (interval) | found | what it did to "
                        "the claim |")
    assert lines[3].startswith("| {ref}`C4a <claim-c4a>` | higher: **partly reproduced** | "
                               "MNIST digits | 1.20 (1.10–1.30) | Sinkhorn / softmax: ")
    assert lines[4].startswith("|  |  | Cats and Dogs | 1 (1.10–1.30) |")
    assert lines[5].startswith("| {ref}`C9 <claim-c9>` | entropy: this part: 1 of 2 tests "
                               "agree with the paper | random logits · σ = 1 |")
    assert "reproduced" not in lines[5]  # C9's verdict is the ledger's, from both parts
    assert lines[-1].startswith("How tests are decided: see {ref}`verdict-rules`")


def test_a_power_of_ten_takes_no_second_times_sign():
    from rankcollapse_book.summary import _ratio

    r = {"number": 2.86e4, "low": 38.1, "high": 2.15e7}
    assert _ratio(r) == "2.86×10⁴, 38.1–2.15×10⁷"
    assert _ratio({"number": 10.0, "low": 1.5, "high": 20.0}) == "10×, 1.50–20"


def test_the_depth_sweeps_trend_in_words_about_the_advantage():
    b5 = {"id": "B5", "verdict": "grows with depth in part", "results": [
        result("depth sweep, with skips", MNIST, "more", 1.2, 1.0, 1.44),
        result("depth sweep, without skips", MNIST, "undecided", 0.65, 0.2, 2.0)]}
    said = sentences(rows() + [b5], "three-task")
    assert said[-1] == (
        "Across depths, in the book's depth sweep (MNIST digits, models of 3, 6, 12 and 24 "
        "layers trained alike), Sinkhorn / softmax over the second half of the layers, per "
        "doubling of depth: with skips, it grows with depth (1.20×, 1–1.44 per "
        "doubling); without skips, undecided (B5).")
    tied = dict(b5["results"][1], tied=100, values=115, low=None, high=None)
    said = sentences(rows() + [dict(b5, results=[b5["results"][0], tied])], "three-task")
    assert said[-1].endswith("without skips, undecided (its values mostly tied at the rounding "
                             "floor) (B5).")
