"""The claims ledger: one row per claim of the paper, decided from the chapters' own results.

Each chapter's summary box records its `registry.Claim` rows in
`book/chapters/claims/<chapter>.json` when it runs (`chapter.Chapter.glue_claims`). At build
time `write_ledger` merges the results of every part of a claim (C2a and C9 on random and on
trained logits, C6d in chapters 4 and 6), decides the claim again from all of them with its
registered rule (`registry.decide`), measures each claim's calibration by simulating its
design (`verdicts.calibration`), and writes the book's Claims page (`book/claims.md`), the
findings summary the intro includes (`book/findings.md`) and `claims.json`, which `build`
copies to `_build/html/claims.json`. The page also prints the registry itself: the
pre-registered primary test of every claim.

A claim is decided on all its registered parts or not at all: where a part did not run in
this build, the claim is "not testable here" and its finding names the part. A record
under an id or part name that is not registered is an error, never dropped.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from rankcollapse import registry
from rankcollapse.names import TASKS as ROLES
from rankcollapse.files import atomic_write_text
from rankcollapse.profiles import get_profile
from rankcollapse.stats import (LEVEL, MARGIN, POWER, digits_for, mostly_at_floor,
                               significant)
from rankcollapse.verdicts import (CLAIM_RULE, CLAIM_VERDICTS, COMPARISON_RULE, FINDING_RULE,
                                   Result, calibration)

RECORDS = Path("book") / "chapters" / "claims"
PAGE, FINDINGS, JSON = Path("book") / "claims.md", Path("book") / "findings.md", "claims.json"
NOT_RUN = "the chapter that decides it did not run in this build"
INCOMPLETE = ("Not decided: no chapter of this build recorded its part{s} {parts} (a claim is "
              "decided on every registered part, never on the rest).")
SYNTHETIC = "random weights, inputs and logits"  # what chapters without datasets compute on
CALIBRATION_RUNS = 1000  # simulated repetitions of each claim's design
EFFECT = 1.5  # the effect at which the ledger states power
DEMONSTRATION = ("the {profile} profile trains small models on stand-in data with few seeds: "
                 "its verdicts demonstrate the method at small scale and are not a test of the "
                 "paper's experiment, which the full profile runs at the paper's sizes")


def save_records(root: Path, chapter: str, profile: str, rows: list[dict],
                 data: str = SYNTHETIC) -> Path:
    """Write one chapter's claim rows (`Claim.record()`) with the `data` they were computed
    on, atomically."""
    rows = [{**row, "chapter": chapter, "profile": profile, "data": row.get("data") or data}
            for row in rows]
    return atomic_write_text(root / RECORDS / f"{chapter}.json", json.dumps(rows, indent=1))


def collect(root: Path, chapters: list[str]) -> list[dict]:
    """Every claim row of the executed chapters, in the book's order."""
    rows = []
    for chapter in chapters:
        path = root / RECORDS / f"{chapter}.json"
        if path.is_file():
            rows += json.loads(path.read_text())
    return rows


def _result(record: dict) -> Result:
    return Result(**{k: tuple(v) if isinstance(v, list) else v for k, v in record.items()})


def _checked(rows: list[dict]) -> list[dict]:
    """`rows` if every one names a registered claim and its results registered parts of it;
    a ValueError naming the chapter otherwise (a row under another id would be dropped)."""
    for row in rows:
        chapter = row.get("chapter", "(no chapter)")
        if row["id"] not in registry.CLAIMS:
            raise ValueError(f"chapter {chapter} records claim id {row['id']!r}; "
                             f"{registry.claim_ids_words(row['id'])}; correct the id where "
                             "the chapter records its claims")
        entry = registry.CLAIMS[row["id"]]
        for part in dict.fromkeys(r["part"] for r in row.get("results", [])):
            try:
                entry.part(part)
            except ValueError as e:
                raise ValueError(f"chapter {chapter}: {e}; correct the part where the "
                                 "chapter records its results") from None
    return rows


def _not_run(claim_id: str, results: list[Result], settings) -> list[str]:
    """The registered parts of a claim (with tasks under the profile) without results, when
    some part has results: the claim cannot be decided on the rest."""
    recorded = {r.part for r in results}
    return [p.name for p in registry.CLAIMS[claim_id].parts
            if results and p.name not in recorded and registry.tasks_of(p, settings)]


def _calibration(claim_id: str, tests: list[Result], settings, runs: int):
    try:
        return calibration(tests, _direction(claim_id), registry.family(claim_id, settings),
                           runs, effect=EFFECT)
    except ValueError as e:
        raise ValueError(f"{claim_id}: {e}") from None


def _direction(claim_id: str) -> str:
    """The one direction of a claim's statistical parts ('' for checks and questions)."""
    directions = {p.direction for p in registry.CLAIMS[claim_id].parts if p.test != "check"}
    return directions.pop() if len(directions) == 1 else ""


def ledger(rows: list[dict], profile: str, runs: int = CALIBRATION_RUNS) -> list[dict]:
    """One row per claim of `registry.CLAIMS`, in its order: the results of every chapter's
    parts merged and decided again by `registry.decide`; findings, chapters and figures
    joined; the primary tests and units from the registry; the detectable ratio (the largest
    over the claim's tests: what every one of them could detect) and the calibration of its
    rule. A claim no chapter recorded is 'not testable here' with the reason; so is a claim
    with a registered part no chapter recorded (its finding names the part; the results of
    the other parts are shown, not decided on). A row whose id or part name is not
    registered is a ValueError naming its chapter."""
    settings = get_profile(profile)
    rows = _checked(rows)
    merged = []
    for claim_id, entry in registry.CLAIMS.items():
        parts = [r for r in rows if r["id"] == claim_id]
        results = [_result(x) for p in parts for x in p["results"]]
        tests = [r for r in results if r.units]
        detectable = [r.detectable for r in tests
                      if r.detectable is not None and math.isfinite(r.detectable)]
        direction = _direction(claim_id)
        not_run = _not_run(claim_id, results, settings)
        calibrated = (_calibration(claim_id, tests, settings, runs)
                      if tests and not entry.finding and not not_run else None)
        single = results[0] if len(results) == 1 else None
        missing = [INCOMPLETE.format(s="s" if len(not_run) > 1 else "", parts=" and ".join(
            map(repr, not_run)))] if not_run else []
        merged.append({
            "id": claim_id, "claim": entry.claim,
            # no results, or a part without: not testable here
            "verdict": "not testable here" if not_run else registry.decide(claim_id, results),
            "finding": " ".join(missing + [p["finding"] for p in parts])
            or (entry.untested or NOT_RUN) + ".",
            "parts": [p.name for p in entry.parts],
            "primary_test": {p.name: p.statement() for p in entry.parts},
            "units": {p.name: p.unit for p in entry.parts},
            "direction": direction or None,
            "family": registry.family(claim_id, settings) if tests else None,
            "results": [r.record() for r in results],
            "number": single.number if single else None,
            "interval": [single.low, single.high] if single and single.low is not None else None,
            "detectable_ratio": max(detectable) if detectable else None,
            "calibration": ({"false_rate": calibrated.false_rate, "power": calibrated.power,
                             "power_every": calibrated.power_every, "runs": calibrated.runs,
                             "effect": EFFECT}
                            if calibrated else None),
            "figure": ", ".join(dict.fromkeys(f.strip() for p in parts
                                              for f in (p.get("figure") or "").split(",")
                                              if f.strip())) or None,
            "chapter": ", ".join(dict.fromkeys(p["chapter"] for p in parts)) or None,
            "data": "; ".join(dict.fromkeys(p.get("data") or SYNTHETIC for p in parts)) or None,
            "profile": profile,
            "note": DEMONSTRATION.format(profile=profile) if profile != "full" else None})
    return merged


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def readable(x: float, digits: int = 3) -> str:
    """A number for a reader: `digits` significant digits, and powers of ten written out
    (1.2×10⁻⁷, not 1.2e-07) outside 0.001–10000."""
    if not math.isfinite(x):
        return str(x)
    if float(x).is_integer() and abs(x) < 1e4:  # zero too
        return f"{int(x)}"
    if 1e-3 <= abs(x) < 1e4:
        return significant(x, digits)
    mantissa, exponent = f"{x:.2e}".split("e")  # three significant digits
    mantissa = f"{float(mantissa):g}"  # without trailing zeros: 1.20 -> 1.2, 1.00 -> 1
    power = f"10{str(int(exponent)).translate(SUPERSCRIPT)}"
    return power if mantissa == "1" else f"{mantissa}×{power}"


def _has_interval(r: dict) -> bool:
    return r["low"] is not None and math.isfinite(r["low"])


def _estimate(r: dict) -> str:
    """'1.32 (1.10–1.58)' for a test, the value for a check, '–' without one; four
    significant digits where the test's margin is narrow."""
    if r["number"] is None or not math.isfinite(r["number"]):
        return "–"
    if not _has_interval(r):
        return f"{r['bound']}{readable(r['number'])}"
    digits = digits_for(r.get("margin", MARGIN))
    return (f"{readable(r['number'], digits)} ({readable(r['low'], digits)}–"
            f"{readable(r['high'], digits)})")


def _cell(text) -> str:
    """Text for a Markdown table cell: pipes escaped, on one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


FOUND_WORDS = {"more": "higher", "less": "lower", "parity": "parity",
               "not more": "not higher by the margin", "not less": "not lower by the margin",
               "undecided": "undecided", "passes": "check passes", "fails": "check fails",
               "not checked": "not checked"}


def _shown(row: dict) -> str:
    figures = [f"{{numref}}`{f.strip()}`" for f in (row["figure"] or "").split(",") if f.strip()]
    chapters = [f"{{doc}}`chapters/{c.strip()}`" for c in (row["chapter"] or "").split(",")
                if c.strip()]
    return "; ".join(part for part in (", ".join(figures), ", ".join(chapters)) if part) or "–"


# The page's text: templates filled by `page` and `findings` (prose, not logic).
TABLE_HEAD = ("| id | claim, part and task | verdict / what the test found | estimate (interval) "
              "| level | units | detectable | shown in |\n|---|---|---|---|---|---|---|---|")
CALIBRATION_HEAD = ("| id | direction | tests | each test's level | finds the paper's result "
                    "where it is false | finds it on some task | on every task |\n"
                    "|---|---|---|---|---|---|---|")
REGISTRY_HEAD = ("| id | part | quantity | layers, depths, variants | unit | its estimate | "
                 "direction | primary test | tasks | family |\n"
                 "|---|---|---|---|---|---|---|---|---|---|")
REGISTRY_COLUMNS = ("id", "part", "quantity", "where", "unit", "estimate", "direction", "test",
                    "tasks", "family")
TIED = " (mostly tied at the floor)"
CENSORED = " ({censored} of {values} values at the floor)"
POWER_AT = {True: "at a 1.5× effect", False: "where the true ratio is 1"}
PAGE_INTRO = (
    "Every claim of the paper, its verdict on this build, the primary tests that decided it "
    "and where it is shown. The verdicts are computed from the run's numbers by the rules "
    "below, from tests registered in the library before anything ran (the registry is "
    "printed at the end of this page); nothing here is typed by hand. Each claim's row is "
    "followed by one row per test: the task and part of the claim it tests, what its "
    "interval found, the estimate with its interval (for a check, the checked value; ≤ marks "
    "a value at the rounding floor, which is at most that), the interval's level (the "
    "intervals of one claim hold together at {level:.0%}), the independent units (one count "
    "per group for two groups) and the smallest effect the test's design detects with "
    "{power:.0%} power, given its units and observed spread (for a test of parity: the "
    "narrowest margin within which it shows parity with that power when the true ratio is 1; "
    "a run can show parity at the margin where this is a little above it, with less than "
    "that power). The "
    "same rows are in `{json}` beside this page.")
QUESTIONS_INTRO = (
    "The paper leaves some questions open or names them as future work (C10). The book "
    "answers them with its own experiments; their verdicts say what was found, not whether a "
    "claim of the paper held.")
CALIBRATION_INTRO = (
    "Each claim's rule was run on simulated repetitions of this build's own design ({runs} "
    "each: the same tasks, units and observed spread of the per-unit scores, decided by the "
    "same code): how often it finds the paper's result (reproduced or partly reproduced) "
    "where that result is false, at the boundary (no difference for a claimed difference, a "
    "ratio at the margin for a claimed parity or absence of an advantage), and how often it "
    "finds it where it holds. The first should be at most {alpha:.0%}. (A test that "
    "presupposes an advantage is simulated without that condition, which can only raise the "
    "first rate.)")
REGISTRY_INTRO = (
    "The primary test of every claim and question, as the library declares it "
    "(`rankcollapse.registry`); $L$ is the depth of the model or stack, the family the number "
    "of tests whose intervals hold together.")
FINDINGS_INTRO = ("On this build (profile `{profile}`), of the paper's {count} claims (as its "
                  "public summaries state them):")
FINDINGS_SAID = {"contradicted": "Contradicted (the opposite shown): ",
                 "not reproduced": "Not reproduced (decided against the paper without the "
                                   "opposite): ",
                 "undecided": "Undecided (this run could not tell): "}
DETECTABLE = {True: "{id} (it could have detected a ratio of {ratio})",  # a difference
              False: "{id} (it could have shown parity within a factor {ratio})"}
DEPENDING = "{low} to {high}, depending on the task"
ALL_REPRODUCED = "Every claim that could be tested here was reproduced, at least in part."
SEE_LEDGER = "Each verdict, its tests and its figure are in the {doc}`claims`."
QUESTIONS_FOUND = "On the questions the paper left open, the book's own experiments found:"


def _result_row(r: dict) -> str:
    tests = bool(r["units"])
    units = "+".join(map(str, r["units"])) if tests else "–"
    shown = tests and _has_interval(r)  # level and power belong to an interval
    detect = readable(r["detectable"]) if shown and r["detectable"] is not None else "–"
    level = f"{100 * r['level']:.3g}%" if shown and r["level"] else "–"
    at = f", {r['at']:g}" if r.get("at") is not None else ""
    tied = (TIED if mostly_at_floor(r["tied"], r["values"]) else
            CENSORED.format(censored=r["censored"], values=r["values"]) if r["censored"] else "")
    return (f"| | {_cell(r['part'])}: {_cell(r['task'])}{at} | {FOUND_WORDS[r['found']]}{tied} "
            f"| {_estimate(r)} | {level} | {units} | {detect} | |")


def _table(rows: list[dict]) -> list[str]:
    """Ledger rows as one wide Markdown table (the page's `ledger` style): a row per claim,
    then one per primary test (task of a part) under it."""
    lines = [":::{div} ledger", TABLE_HEAD]
    for row in rows:
        lines.append(f"| **{row['id']}** | {_cell(row['claim'])} | **{row['verdict']}** | | | | "
                     f"| {_shown(row)} |")
        lines += [_result_row(r) for r in row["results"]]
    return lines + [":::", ""]


def _calibration_table(rows: list[dict]) -> list[str]:
    lines = [":::{div} ledger", CALIBRATION_HEAD]
    for row in rows:
        c = row["calibration"]
        if not c:
            continue
        tests = sum(1 for r in row["results"] if r["units"])
        what = POWER_AT[row["direction"] in ("more", "less")]
        level = registry.family_level_words(row["family"])
        subject = {p.subject for p in registry.CLAIMS[row["id"]].parts if p.test != "check"}
        words = registry.direction_words(row["direction"], subject.pop() if len(subject) == 1
                                         else "Sinkhorn")
        lines.append(f"| {row['id']} | {words} | {tests} | "
                     f"{level} | {c['false_rate']:.1%} | {c['power']:.0%} {what} | "
                     f"{c['power_every']:.0%} |")
    return lines + [":::", ""]


def _task_words(task: str) -> str:
    """A registered task for a reader: 'text, softmax' -> 'text classification / softmax'."""
    role, _, rest = task.partition(", ")
    return ROLES[role] + (f" / {rest}" if rest else "") if role in ROLES else task


def _registry_table(profile: str) -> list[str]:
    lines = [":::{div} ledger", REGISTRY_HEAD]
    for r in registry.rows(get_profile(profile)):
        r = {**r, "tasks": "; ".join(_task_words(t) for t in r["tasks"]) or "–"}
        lines.append("| " + " | ".join(_cell(r[k]) for k in REGISTRY_COLUMNS) + " |")
    return lines + [":::", ""]


def page(rows: list[dict], profile: str, runs: int = CALIBRATION_RUNS) -> str:
    """The Claims page (MyST markdown)."""
    claims = [r for r in rows if r["id"] not in registry.FINDINGS]
    questions = [r for r in rows if r["id"] in registry.FINDINGS]
    note = f" Note: {DEMONSTRATION.format(profile=f'`{profile}`')}." if profile != "full" else ""
    lines = ["---", "html_theme.sidebar_secondary.remove: true", "---", "",  # a wide table
             "# Claims ledger", "", PAGE_INTRO.format(level=LEVEL, power=POWER, json=JSON), "",
             f"Profile of this build: `{profile}`.{note}", "",
             "## How a claim is decided", "", COMPARISON_RULE, "", CLAIM_RULE, "",
             FINDING_RULE, "", "## The paper's claims", "", *_table(claims),
             "## Questions the paper left open", "", QUESTIONS_INTRO, "", *_table(questions),
             "## How often each rule is wrong", "",
             CALIBRATION_INTRO.format(runs=runs, alpha=1 - LEVEL), "",
             *_calibration_table(claims),
             "## The registry", "", REGISTRY_INTRO, "", *_registry_table(profile),
             "## Findings, claim by claim", ""]
    lines += [f"- **{r['id']}** ({r['verdict']}): {' '.join(r['finding'].split())}"
              for r in rows]
    return "\n".join(lines) + "\n"


def _detectable_range(row: dict) -> str:
    """'1.58' for one detectable effect, '1.58 to 273, depending on the task' for several
    (the claim's best- and worst-measured tests; the row's `detectable_ratio` is the top)."""
    values = [r["detectable"] for r in row["results"]
              if r["units"] and r["detectable"] is not None and math.isfinite(r["detectable"])]
    low, high = min(values, default=row["detectable_ratio"]), row["detectable_ratio"]
    return readable(high) if readable(low) == readable(high) else \
        DEPENDING.format(low=readable(low), high=readable(high))


def _with_caveat(row: dict) -> str:
    """'C3a (the bound tested is ...)' where a verdict was reached and the registry states a
    caveat for it, else the id."""
    caveat = registry.CLAIMS[row["id"]].caveat
    tested = row["verdict"] != "not testable here"
    return f"{row['id']} ({caveat})" if caveat and tested else row["id"]


def findings(rows: list[dict], profile: str) -> str:
    """The short findings summary the intro includes: claim ids per verdict, what was not
    reproduced and what could not be decided (with the smallest effect each could have
    detected), and what the book's own experiments found on the questions the paper left
    open."""
    claims = [r for r in rows if r["id"] not in registry.FINDINGS]
    open_rows = [r for r in rows if r["id"] in registry.FINDINGS
                 and r["verdict"] != "not testable here"]
    by = {v: [r for r in claims if r["verdict"] == v] for v in CLAIM_VERDICTS}
    lines = [FINDINGS_INTRO.format(profile=profile, count=len(claims)), ""]
    lines += [f"- **{v}**: {', '.join(_with_caveat(r) for r in these)}"
              for v, these in by.items() if these]
    said = [FINDINGS_SAID[v] + "; ".join(f"{r['id']} ({r['claim']})" for r in by[v]) + "."
            for v in ("contradicted", "not reproduced") if by[v]]
    if by["undecided"]:
        said.append(FINDINGS_SAID["undecided"] + "; ".join(
            DETECTABLE[r["direction"] in ("more", "less")].format(
                id=r["id"], ratio=_detectable_range(r))
            if r["detectable_ratio"] else r["id"] for r in by["undecided"]) + ".")
    lines += ["", " ".join(said) or ALL_REPRODUCED, SEE_LEDGER]
    if profile != "full":
        lines += ["", DEMONSTRATION.format(profile=f"`{profile}`").capitalize() + "."]
    if open_rows:
        lines += ["", QUESTIONS_FOUND, ""]
        lines += [f"- **{r['id']}**, {r['claim']}: **{r['verdict']}**" for r in open_rows]
    return "\n".join(lines) + "\n"


def write_ledger(root: Path, chapters: list[str], profile: str,
                 runs: int = CALIBRATION_RUNS) -> list[dict]:
    """Write the Claims page, the findings summary and claims.json (in `book/`, for `build`
    to copy), each claim's rule calibrated on `runs` simulations; returns the rows."""
    rows = ledger(collect(root, chapters), profile, runs)
    atomic_write_text(root / PAGE, page(rows, profile, runs))
    atomic_write_text(root / FINDINGS, findings(rows, profile))
    atomic_write_text(root / "book" / JSON, json.dumps(rows, indent=1))
    return rows
