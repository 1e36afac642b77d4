"""The answer in plain words: a few sentences computed from the claims ledger's rows, never
typed, that open the intro's findings and the Claims page.

They say, for the models and data of the build's profile: where Sinkhorn keeps more
hidden-state rank in trained models and by how much (C4a), how that advantage behaves early
against late and with skips against without (C4b, C4c), what the attention output and the
attention products show (C4d, C4e) and what becomes of accuracy (C8), what products of
independent random matrices show (C6a), and what swapping the normalization at inference
does to the same weights (B3), and how the advantage changes with depth in the book's depth
sweep (B5). Tasks are named short ('MNIST digits'); the data each stands
for is said once, after the caveat (`data_sentence`). The conclusion that the advantage is
learned by the weights, not imposed by the normalization, is stated only where the numbers
say so (`learned`). Before them, where the profile is not the paper's, the caveat
(`caveat`).
"""

from __future__ import annotations

from rankcollapse.experiments.trained_models import seed_counts
from rankcollapse.names import joined
from rankcollapse.profiles import Profile, get_profile
from rankcollapse.stats import MARGIN, WORDS, mostly_at_floor
from rankcollapse_book.outcomes import (has_interval, shown_number, short_task, shown_results,
                                        task_legend)

DEMONSTRATION = ("the {profile} profile trains narrower models ({size}; {seeds}) "
                 "on stand-in data: its verdicts demonstrate the method at small scale and "
                 "are not a test of the paper's experiment ({paper}), which the full profile "
                 "runs at the paper's sizes")
# What a test of Sinkhorn / softmax found, as a clause about Sinkhorn (C4a, C6a, B3) ...
KEEPS = {"more": "Sinkhorn keeps more", "less": "Sinkhorn keeps less",
         "parity": "the two are at parity (within a factor {margin:g})",
         "not more": "Sinkhorn is not higher by the margin",
         "not less": "Sinkhorn is not lower by the margin", "undecided": "the test cannot tell"}
# ... and what a contrast of the advantage (C4b, C4c) found: the ledger's words (stats.WORDS).
ADVANTAGE = {**WORDS, "parity": "at parity (within a factor {margin:g})"}
EARLY_SAID = ("The paper reports the advantage larger early in the stack than late; in the "
              "{size}, Sinkhorn / softmax early, divided by that late: {found} — "
              "C4b: {verdict}.")
SKIPS_SAID = ("The paper reports the advantage larger with skip connections; in the {size}, "
              "Sinkhorn / softmax with skips, divided by that without, each inference variant "
              "over its own layers before the softmax models collapse to half (a matched "
              "residual level): {found} — C4c: {verdict}.")
BEYOND_SAID = "{what}, in the {size}: {found} — {id}: {verdict}."
# What the other trained-model claims measure (C4d, C4e) and accuracy (C8), each with the
# words its results are said in.
BEYOND = {"C4d": ("The attention sub-layer's own output", KEEPS),
          "C4e": ("Products of attention matrices along paths", KEEPS),
          "C8": ("Test accuracy, Sinkhorn / softmax", ADVANTAGE)}
# How each part of C4b splits the stack into early and late (registered part names).
SPLITS = {"trained models, by relative depth": "by relative depth (the first half of the "
          "layers over the second)", "trained models, by collapse": "before against after "
          "the softmax models' collapse to half"}
RANDOM_SAID = ("Products of independent random attention matrices ({n} tokens, depths 2 to "
               "{depth}, N(0, 1) logits): {found}, {paper} — C6a: {verdict}.")
PAPER_PARITY = {"agrees": "as the paper reports (essentially the same rank decay)",
                "against": "where the paper reports essentially the same rank decay",
                "opposite": "where the paper reports essentially the same rank decay",
                "undecided": "so the paper's parity can be neither confirmed nor refuted"}
# Sinkhorn lower on random products: the parity fails, but not the paper's point that the
# matrices alone give Sinkhorn no advantage.
NO_ADVANTAGE = (" (so the parity fails, not the paper's point that random matrices alone give "
                "Sinkhorn no advantage)")
# The depth sweep (B5): how Sinkhorn / softmax over the late layers changes per doubling of
# depth, in words about that ratio (an advantage only where it is above 1).
GROWS = {"more": "it grows with depth", "less": "it shrinks with depth",
         "parity": "it stays within a factor {margin:g} per doubling",
         "not more": "it does not grow by a factor {margin:g} per doubling",
         "not less": "it does not shrink by a factor {margin:g} per doubling",
         "undecided": "undecided"}
DEPTH_SAID = ("Across depths, in the book's depth sweep ({task}, models of {depths} layers "
              "trained alike), Sinkhorn / softmax over the second half of the layers, per "
              "doubling of depth: {found} (B5).")
LEARNED = ("On the Sinkhorn-trained weights of the {size}, swapping to softmax at inference "
           "leaves the rank at parity on {swapped}, while Sinkhorn- and softmax-trained models differ "
           "there (C4a): consistent with the weights, not the normalization, carrying the "
           "advantage on these tasks (B3).")
IMPOSED = ("On the Sinkhorn-trained weights of the {size}, Sinkhorn at inference keeps more "
           "rank than softmax on {imposed}: on those weights the normalization itself adds rank, "
           "beyond what they learned, though softmax runs them with a normalization they were "
           "not trained with (B3).")
SWAPPED = ("On the Sinkhorn-trained weights of the {size}, swapping the normalization at "
           "inference (Sinkhorn / softmax, the same weights): {found} (B3).")


def _sizes(settings: Profile, size: str) -> tuple[str | None, str]:
    """Each task's model size in the words of `size` (a format of `depth`, `d_model`,
    `n_heads`): the one size where all agree (None where there are no tasks), else None and
    'text: ...; mnist: ...'."""
    sizes = {t: size.format(**vars(x)) for t, x in settings.tasks.items()}
    if len(set(sizes.values())) <= 1:
        return next(iter(sizes.values()), None), ""
    return None, "; ".join(f"{t}: {s}" for t, s in sizes.items())


def model_size(settings: Profile) -> str:
    """'6 layers of width 48, 4 heads' (each task's where they differ)."""
    one, each = _sizes(settings, "{depth} layers of width {d_model}, {n_heads} heads")
    return one or each or "no trained models"


def models_words(settings: Profile) -> str:
    """'6-layer, width-48 trained models' (each task's where they differ): the size every
    sentence about trained models names."""
    one, each = _sizes(settings, "{depth}-layer, width-{d_model}")
    return f"{one} trained models" if one else f"trained models ({each})" if each else \
        "no trained models"


def data_sentence(rows: dict[str, dict]) -> str | None:
    """'Tasks, as named below: MNIST digits (stand-in: 10,000 MNIST digits); ...': what each
    task's short name stands for, said once (from C4a's tests, the trained tasks)."""
    legend = task_legend(_tests(rows, "C4a"))
    if not legend:
        return None
    return "Tasks, as named below: " + "; ".join(
        f"{name} ({data})" for name, data in legend.items()) + "."


def caveat(profile: str) -> str | None:
    """The caveat of a profile that is not the paper's (None for `full`)."""
    if profile == "full":
        return None
    settings = get_profile(profile)
    return DEMONSTRATION.format(profile=f"`{profile}`", size=model_size(settings),
                                seeds=seed_counts(settings),
                                paper=model_size(get_profile("full")))


def _ratio(r: dict) -> str:
    """'1.14×, 1.04–1.25': a test's ratio with its interval ('2.86×10⁴, 38.1–2.15×10⁷': a
    power of ten takes no second ×)."""
    interval = f", {shown_number(r['low'])}–{shown_number(r['high'])}" if has_interval(r) else ""
    number = shown_number(r["number"])
    power = any(c in number for c in "⁰¹²³⁴⁵⁶⁷⁸⁹")
    return number + ("" if power else "×") + interval


def _named(r: dict, number: bool = False) -> str:
    """A test's task by its short name, 'MNIST digits', and with `number` its ratio:
    'MNIST digits (1.14×, 1.04–1.25)'."""
    return short_task(r["task"]) + (f" ({_ratio(r)})" if number else "")


def _clauses(results: list[dict], words: dict[str, str], numbers: set[str]) -> str:
    """What `results` found, one clause per word of `words` that occurs, in its order:
    'lower on MNIST digits (0.870×, 0.810–0.930); at parity (within a factor 1.1) on Cats
    and Dogs', with the ratio where the word is in `numbers`, parity within the tests' own
    margin."""
    clauses = []
    for found, said in words.items():
        these = [r for r in results if r["found"] == found]
        if these:
            margin = these[0].get("margin", MARGIN)
            clauses.append(f"{said.format(margin=1 + margin)} on "
                           f"{joined([_named(r, found in numbers) for r in these])}")
    return "; ".join(clauses)


def _tests(rows: dict[str, dict], claim_id: str, part: str | None = None) -> list[dict]:
    row = rows.get(claim_id)
    if not row or row["verdict"] == "not testable here":
        return []
    return [r for r in shown_results(claim_id, row["results"])
            if r["units"] and (part is None or r["part"] == part)]


def _advantage(rows: dict[str, dict], settings: Profile) -> str | None:
    tests = _tests(rows, "C4a")
    if not tests:
        return None
    more = [_named(r, True) for r in tests if r["found"] == "more"]
    said = (f"In the {models_words(settings)}, Sinkhorn keeps more "
            f"hidden-state rank than softmax on {len(more)} of {len(tests)} tasks"
            + (f", {joined(more)}" if more else ""))
    rest = _clauses([r for r in tests if r["found"] != "more"],
                    {k: v for k, v in KEEPS.items() if k != "more"}, {"less"})
    return said + (f"; {rest}" if rest else "") + f" — C4a: {rows['C4a']['verdict']}."


def _variation(rows: dict[str, dict], settings: Profile, claim_id: str, template: str
               ) -> str | None:
    """How the advantage differs between two selections (C4b, C4c); a claim of several
    parts says each part's split first ('by relative depth (...): smaller on ...')."""
    tests = _tests(rows, claim_id)
    if not tests:
        return None
    parts = list(dict.fromkeys(r["part"] for r in tests))
    if len(parts) == 1:
        found = _clauses(tests, ADVANTAGE, {"more", "less"})
    else:
        found = "; ".join(f"{SPLITS.get(p, p)}, " + _clauses(
            [r for r in tests if r["part"] == p], ADVANTAGE, {"more", "less"}) for p in parts)
    return template.format(size=models_words(settings), found=found,
                           verdict=rows[claim_id]["verdict"])


def _beyond(rows: dict[str, dict], settings: Profile, claim_id: str) -> str | None:
    """What C4d, C4e or C8 found (`BEYOND`), with its verdict."""
    tests = _tests(rows, claim_id)
    if not tests:
        return None
    what, words = BEYOND[claim_id]
    return BEYOND_SAID.format(what=what, size=models_words(settings),
                              found=_clauses(tests, words, {"more", "less"}), id=claim_id,
                              verdict=rows[claim_id]["verdict"])


def _random(rows: dict[str, dict], settings: Profile) -> str | None:
    tests = _tests(rows, "C6a")
    if len(tests) != 1:
        return None
    r = tests[0]
    found = KEEPS[r["found"]].format(margin=1 + MARGIN)
    paper = PAPER_PARITY[r["outcome"]] + (NO_ADVANTAGE if r["found"] == "less" else "")
    return RANDOM_SAID.format(n=settings.n_tokens, depth=settings.depth,
                              found=f"{found} ({_ratio(r)})", paper=paper,
                              verdict=rows["C6a"]["verdict"])


def learned(advantage: list[dict], swapped: list[dict]) -> tuple[str, list[str]]:
    """What B3 on Sinkhorn-trained weights (`swapped`) says of the C4a advantage
    (`advantage`), task by task: 'learned' where C4a finds Sinkhorn ahead on some task and
    swapping the normalization shows parity on every such task; 'imposed' where swapping
    shows Sinkhorn ahead on some such task; '' otherwise (nothing follows). Returns the word
    and the task titles it is said of."""
    ahead = {r["task"] for r in advantage if r["found"] == "more"}
    at = {r["task"]: r["found"] for r in swapped if r["task"] in ahead}
    if not ahead or set(at) != ahead:
        return "", []
    if all(found == "parity" for found in at.values()):
        return "learned", sorted(ahead, key=list(at).index)
    imposed = [t for t, found in at.items() if found == "more"]
    return ("imposed", imposed) if imposed else ("", [])


def _swap(rows: dict[str, dict], settings: Profile) -> str | None:
    swapped = _tests(rows, "B3", "weights trained with Sinkhorn")
    if not swapped:
        return None
    word, tasks = learned(_tests(rows, "C4a"), swapped)
    if not word:
        return SWAPPED.format(size=models_words(settings),
                              found=_clauses(swapped, KEEPS, {"more", "less"}))
    named = joined([_named(next(r for r in swapped if r["task"] == t)) for t in tasks])
    if word == "learned":
        return LEARNED.format(size=models_words(settings), swapped=named)
    return IMPOSED.format(size=models_words(settings), imposed=named)


def _depth_trend(rows: dict[str, dict], settings: Profile) -> str | None:
    """What the depth sweep (B5) found, each inference variant's trend in words about the
    advantage: 'with skips, it grows with depth (1.20×, 1.00–1.44 per doubling)'."""
    tests, sweep = _tests(rows, "B5"), settings.depth_sweep
    if not tests or sweep is None:
        return None
    found = "; ".join(
        f"{r['part'].removeprefix('depth sweep, ')}, "
        + GROWS[r["found"]].format(margin=1 + r.get("margin", MARGIN))
        + (f" ({_ratio(r)} per doubling)" if r["found"] in ("more", "less") else "")
        + (" (its values mostly tied at the rounding floor)"
           if mostly_at_floor(r["tied"], r["values"]) else "")
        for r in tests)
    return DEPTH_SAID.format(task=short_task(tests[0]["task"]),
                             depths=joined([str(d) for d in sweep.depths]), found=found)


def sentences(rows: list[dict], profile: str) -> list[str]:
    """The summary, sentence by sentence: the caveat (where the profile is not the
    paper's) and the tasks' data, then what C4a, C4b and C4c, C4d and C4e, C8, C6a and B3
    found, and the depth sweep's trend (B5), each where it was tested."""
    settings, by_id = get_profile(profile), {r["id"]: r for r in rows}
    said = [caveat(profile), data_sentence(by_id), _advantage(by_id, settings),
            _variation(by_id, settings, "C4b", EARLY_SAID),
            _variation(by_id, settings, "C4c", SKIPS_SAID),
            *(_beyond(by_id, settings, claim_id) for claim_id in BEYOND),
            _random(by_id, settings), _swap(by_id, settings), _depth_trend(by_id, settings)]
    said = [s for s in said if s]
    if said and said[0] == caveat(profile):
        said[0] = said[0][0].upper() + said[0][1:] + "."
    return said


def paragraph(rows: list[dict], profile: str) -> str:
    return " ".join(sentences(rows, profile))
