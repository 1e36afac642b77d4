"""Each primary test as a reader sees it: what it found of its estimate, what that did to its
claim, its number with the words that say what the number is, and its task by a short name.

The claims ledger (`ledger`), the chapters' summary boxes (`chapter.Chapter.glue_claims`),
the forest plot (`forest`) and the summary in words (`summary`) all read tests through
`shown_results` and `cells_of_test`, so a test reads the same wherever it appears. Tests are
the records of `verdicts.Result` (`Result.record()`: plain dicts, as in claims.json).
"""

from __future__ import annotations

import math
import re

from rankcollapse import registry
from rankcollapse.stats import MARGIN, WORDS, digits_for, mostly_at_floor, significant
from rankcollapse.verdicts import OUTCOME_WORDS  # what a test did to its claim

# An open question has no claim of the paper: its tests say what they decided.
QUESTION_WORDS = {"agrees": "decided", "against": "decided against the hypothesis",
                  "opposite": "the opposite of the hypothesis", "undecided": "undecided",
                  "untested": "not testable here"}
CHECK_WORDS = {"passes": "the check passes", "fails": "the check fails",
               "not checked": "not checked on this run"}
TIED = " (mostly tied at the floor)"
CENSORED = " ({censored} of {values} values at the floor)"
_TITLE = re.compile(r"^(?P<name>[^(]*?) \((?P<data>[^)]*)\)(?P<rest>.*)$")


def shown_number(x: float, digits: int = 3) -> str:
    """A number for a reader: `digits` significant digits, whole numbers below 10000 as
    they are, and powers of ten written out (1.2×10⁻⁷, not 1.2e-07) outside 0.001–10000."""
    if math.isfinite(x) and float(x).is_integer() and abs(x) < 1e4:  # zero too
        return f"{int(x)}"
    return significant(x, digits) if math.isfinite(x) else str(x)


def has_interval(r: dict) -> bool:
    return r["low"] is not None and math.isfinite(r["low"])


def estimate(r: dict) -> str:
    """'1.32 (1.10–1.58)' for a test, the value for a check, '–' without one (or for a
    test whose values are mostly tied at the rounding floor); four
    significant digits where the test's margin is narrow."""
    if r["number"] is None or not math.isfinite(r["number"]) or (
            mostly_at_floor(r.get("tied", 0), r.get("values", 0))):  # a tie has no ratio
        return "–"
    if not has_interval(r):
        return f"{r['bound']}{shown_number(r['number'])}"
    digits = digits_for(r.get("margin", MARGIN))
    return (f"{shown_number(r['number'], digits)} ({shown_number(r['low'], digits)}–"
            f"{shown_number(r['high'], digits)})")


def short_task(task: str) -> str:
    """A task's title without its data: 'MNIST digits (stand-in: 10,000 MNIST digits),
    softmax' -> 'MNIST digits, softmax' (`task_legend` says the data once)."""
    m = _TITLE.match(task)
    return m["name"] + m["rest"] if m else task


def task_legend(results: list[dict]) -> dict[str, str]:
    """Each short task name of `results` -> the data its title names, in order of first
    appearance: {'MNIST digits': 'stand-in: 10,000 MNIST digits', ...}."""
    return {m["name"]: m["data"] for m in map(_TITLE.match, (r["task"] for r in results))
            if m}


def part_of(claim_id: str, r: dict) -> registry.Part:
    return registry.CLAIMS[claim_id].part(r["part"])


def shown_results(claim_id: str, results: list[dict]) -> list[dict]:
    """The tests a reader is shown: every result, except that a sequence of tests (B4: one
    per iteration count k on each task) is shown as one per task, at the fewest k that
    shows parity there and at every count above (at the most tested k where none does)."""
    sequence = {p.name for p in registry.CLAIMS[claim_id].parts if p.test == "sequence"}
    shown, tasks = [], {}
    for r in results:
        if r["part"] in sequence:
            tasks.setdefault((r["part"], r["task"]), []).append(r)
        else:
            shown.append(r)
    for steps in tasks.values():
        steps = sorted(steps, key=lambda r: -r["at"])
        enough = None
        for r in steps:
            if r["found"] != "parity":
                break
            enough = r
        shown.append(enough or steps[0])
    return shown


def is_test(r: dict) -> bool:
    """A statistical test (it has units), not a check."""
    return bool(r["units"])


def found_words(claim_id: str, r: dict) -> str:
    """What the test found, of the estimate its part names: 'Sinkhorn / softmax early over
    that late: lower' (`stats.WORDS`), or what the check found."""
    note = (f" ({r['note']})" if r.get("note") else
            f" (left out: {r['left_out']})" if r.get("left_out") else "")
    if r["found"] in CHECK_WORDS:
        return CHECK_WORDS[r["found"]]
    if not is_test(r):  # a test this run could not carry out on this task
        return f"{part_of(claim_id, r).estimate()}: not testable here{note}"
    tied = (TIED if mostly_at_floor(r["tied"], r["values"]) else
            CENSORED.format(censored=r["censored"], values=r["values"]) if r["censored"] else "")
    return f"{part_of(claim_id, r).estimate()}: {WORDS[r['found']]}{tied}{note}"


def outcome_words(claim_id: str, r: dict) -> str:
    """What the test did to its claim ('agrees with the paper', ...); for an open question,
    what it decided."""
    words = QUESTION_WORDS if claim_id in registry.FINDINGS else OUTCOME_WORDS
    return words[r["outcome"]]


def test_label(claim_id: str, r: dict) -> str:
    """'MNIST digits', with the part where the claim has several ('random logits · σ = 1')
    and the setting within the task ('MNIST digits, k = 2')."""
    at = f", k = {r['at']:g}" if r.get("at") is not None else ""
    several = len(registry.CLAIMS[claim_id].parts) > 1 and r["part"] != r["task"]
    return (f"{r['part']} · " if several else "") + short_task(r["task"]) + at


def cells_of_test(claim_id: str, r: dict) -> dict[str, str]:
    """One test's cells, in words: `test` (its label), `found`, `estimate` (the number with
    its interval; a check's value named by its estimate words), `outcome`, `units` and
    `detectable` ('–' where there is none)."""
    shown = is_test(r) and has_interval(r)  # power belongs to an interval
    value = estimate(r)
    if not is_test(r) and value != "–":
        value = f"{part_of(claim_id, r).estimate()}: {value}"
    return {"test": test_label(claim_id, r), "found": found_words(claim_id, r),
            "estimate": value, "outcome": outcome_words(claim_id, r),
            "units": "+".join(map(str, r["units"])) if is_test(r) else "–",
            "detectable": shown_number(r["detectable"]) if shown and r["detectable"] is not None
            else "–"}


def cell(text) -> str:
    """Text for a Markdown table cell: pipes escaped, on one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(columns: dict[str, str], rows: list[dict[str, str]]) -> list[str]:
    """A Markdown table (in the site's `ledger` style) of `rows`' cells under `columns`
    (key -> header)."""
    lines = [":::{div} ledger", "| " + " | ".join(columns.values()) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r[k]) for k in columns) + " |" for r in rows]
    return lines + [":::", ""]
