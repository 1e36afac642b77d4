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
            {"id": "C6a", "verdict": "contradicted",
             "results": [result("random matrices", "independent logits", c6a, 0.8, 0.79, 0.81,
                                "opposite")]},
            {"id": "B3", "verdict": "parity",
             "results": [result("weights trained with Sinkhorn", t, f, 1.3 if f == "more" else 1.0)
                         for t, f in zip((MNIST, CATS), swap)]}]


def test_the_sentences_written_out():
    said = sentences(rows(), "ci")
    assert said[0].startswith("The `ci` profile trains small models (6 layers of width 48, 4 "
                              "heads, 3 seeds per task) on stand-in data: its verdicts")
    assert said[1] == (
        "In the trained models (6 layers of width 48, 4 heads), Sinkhorn keeps more "
        "hidden-state rank than softmax on 1 of 2 tasks, MNIST digits (stand-in: 10,000 MNIST digits) by "
        "1.20× (1.10–1.30); the two are at parity (within a factor 1.1) on Cats and Dogs "
        "(stand-in: shirts) — C4a: partly reproduced.")
    assert said[2] == (
        "The paper reports the advantage larger early in the stack than late; in the trained "
        "models (6 layers of width 48, 4 heads), Sinkhorn / softmax early over late: by "
        "relative depth (the first half of the layers over the second), lower on MNIST digits "
        "(stand-in: 10,000 MNIST digits) by 0.870× (0.810–0.930); at parity (within a factor "
        "1.1) on Cats and Dogs (stand-in: shirts); before against after the softmax models' "
        "collapse to half, higher on MNIST digits (stand-in: 10,000 MNIST digits) by 1.30× "
        "(1.20–1.40) — C4b: contradicted.")
    assert said[3] == (
        "Products of independent random attention matrices (32 tokens, depths 2 to 12, N(0, 1) "
        "logits): Sinkhorn keeps less, by 0.800× (0.790–0.810), where the paper reports "
        "essentially the same rank decay — C6a: contradicted.")
    assert said[4] == (
        "On weights trained with Sinkhorn (6 layers of width 48, 4 heads), swapping to softmax "
        "at inference leaves the rank at parity on MNIST digits (stand-in: 10,000 MNIST digits), while "
        "Sinkhorn- and softmax-trained models differ there (C4a): consistent with the weights, "
        "not the normalization, carrying the advantage on these tasks (B3).")
    assert len(said) == 5  # C4c was not recorded: no sentence
    assert sentences(rows(), "full")[0].startswith("In the trained models (24 layers")


def test_learned_only_where_the_numbers_say_so():
    assert learned(rows()[0]["results"], rows()[3]["results"]) == ("learned", [MNIST])
    # C4a finds no advantage anywhere: nothing was learned, whatever the swap shows
    no_advantage = sentences(rows(c4a=("parity", "parity")), "ci")[-1]
    assert "carrying the advantage" not in no_advantage and no_advantage.startswith(
        "On weights trained with Sinkhorn (6 layers of width 48, 4 heads), swapping the "
        "normalization at inference (Sinkhorn / softmax, the same weights): the two are at "
        "parity")
    # the swap keeps Sinkhorn ahead where C4a finds the advantage: (partly) imposed
    imposed = sentences(rows(swap=("more", "parity")), "ci")[-1]
    assert "carrying the advantage" not in imposed and imposed.startswith(
        "On weights trained with Sinkhorn (6 layers of width 48, 4 heads), Sinkhorn at "
        "inference keeps more rank than softmax on MNIST digits (stand-in: 10,000 MNIST digits): part")
    # the swap cannot tell where the advantage is: nothing follows, the numbers are said
    unclear = sentences(rows(swap=("undecided", "parity")), "ci")[-1]
    assert "carrying the advantage" not in unclear and "the test cannot tell on MNIST digits" in unclear
    assert learned([], rows()[3]["results"]) == ("", [])


def test_the_random_sentence_follows_the_outcome():
    said = sentences(rows(c6a="more") [:2] + [dict(rows()[2], results=[dict(
        rows()[2]["results"][0], found="more", outcome="opposite", number=1.3)])], "ci")
    assert "Sinkhorn keeps more, by 1.30×" in said[-1]
    assert "where the paper reports essentially the same rank decay" in said[-1]


def test_untested_claims_say_nothing():
    empty = [{"id": i, "verdict": "not testable here", "results": []}
             for i in ("C4a", "C4b", "C4c", "C6a", "B3")]
    assert len(sentences(empty, "ci")) == 1  # the caveat alone
    assert sentences(empty, "full") == []


def test_a_chapter_box_gives_a_claim_verdict_only_for_whole_claims():
    whole = {"id": "C4a", "claim": "higher", "verdict": "partly reproduced",
             "results": rows()[0]["results"]}
    part = {"id": "C9", "claim": "entropy", "verdict": "reproduced",
            "results": [result("random logits", "σ = 1", "more"), dict(
                result("random logits", "σ = 2", "parity"), outcome="against")]}
    box = chapter_box([whole, part], "ci")
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
