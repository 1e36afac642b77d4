"""The claims ledger: one row per claim of the paper, decided from the chapters' own results.

Each chapter's summary box records its `claim_rows.Claim` rows in
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

from itertools import groupby

import json
import math
from pathlib import Path

from rankcollapse import __version__, registry
from rankcollapse.names import TASKS as ROLES
from rankcollapse.files import atomic_write_text
from rankcollapse.profiles import get_profile
from rankcollapse.stats import LEVEL, MARGIN, POWER
from rankcollapse.verdicts import (CLAIM_RULE, CLAIM_VERDICTS, COMPARISON_RULE, FINDING_RULE,
                                   Result, calibration, stated_at)
from rankcollapse_book import forest, outcomes, summary
from rankcollapse_book.export import FIGURE_DIR, git_commit, save_figure
from rankcollapse_book.outcomes import shown_number  # noqa: F401 (the ledger's numbers)
from rankcollapse_book.summary import caveat

RECORDS = Path("book") / "chapters" / "claims"
PAGE, FINDINGS, JSON = Path("book") / "claims.md", Path("book") / "findings.md", "claims.json"
NOT_RUN = "the chapter that decides it did not run in this build"
INCOMPLETE = ("Not decided: no chapter of this build recorded its part{s} {parts} (a claim is "
              "decided on every registered part, never on the rest).")
SYNTHETIC = "random weights, inputs and logits"  # what chapters without datasets compute on
CALIBRATION_RUNS = 1000  # simulated repetitions of each claim's design
EFFECT = 1.5  # the effect at which the ledger states power


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
            "finding": " ".join(filter(None, missing + (
                [registry.off_depth(claim_id, settings)] if parts and not not_run else [])
                + [p["finding"] for p in parts]))
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
                             "effect": stated_at(direction, EFFECT),
                             "false_opposite": calibrated.false_opposite,
                             "best": calibrated.best}
                            if calibrated else None),
            "figure": ", ".join(dict.fromkeys(f.strip() for p in parts
                                              for f in (p.get("figure") or "").split(",")
                                              if f.strip())) or None,
            "chapter": ", ".join(dict.fromkeys(p["chapter"] for p in parts)) or None,
            "data": "; ".join(dict.fromkeys(p.get("data") or SYNTHETIC for p in parts)) or None,
            "depth": entry.depth,  # the model depth the paper states the claim at
            "profile": profile,
            "note": caveat(profile)})
    return merged


def _shown(row: dict) -> str:
    figures = [f"{{numref}}`{f.strip()}`" for f in (row["figure"] or "").split(",") if f.strip()]
    chapters = [f"{{doc}}`chapters/{c.strip()}`" for c in (row["chapter"] or "").split(",")
                if c.strip()]
    return "; ".join(part for part in (", ".join(figures), ", ".join(chapters)) if part) or "–"


# The page's text: templates filled by `page` and `findings` (prose, not logic).
TEST_COLUMNS = {"test": "test", "found": "found", "estimate": "estimate (interval)",
                "outcome": "what it did to the claim", "units": "units",
                "detectable": "detectable"}
ANCHOR = "claim-{id}"  # each claim's block on the page: {ref}`C4a <claim-c4a>`
RULES_ANCHOR = "verdict-rules"
FOREST = "fig-forest"
HEADER = "**{id}** · {claim} · **{verdict}** · shown in {shown}"
LEVEL_WORDS = "Intervals at {level}."
DATA_WORDS = "Computed on {data}."  # the models (depth, width) and data a verdict stands on
CALIBRATED = ("Its rule on {runs} simulated repetitions of this design finds the paper's "
              "result where it is false in {false_rate}{opposite}{best}.")
OPPOSITE = ", the opposite of the paper where there is no difference in {rate}"
BEST = "; the best verdict its design reaches {where} is *{best}*"
EVERY = "; {where} on every task it is *reproduced* in {rate}"
SEQUENCE_NOTE = ("One row per task, at the fewest iterations k whose accuracy shows parity "
                 "with the most at k and at every count above (at the most tested k where "
                 "none does); the tests at every k are in `{json}`.")
PAGE_INTRO = (
    "Every claim of the paper, its verdict on this build, the primary tests that decided it "
    "and where it is shown; the verdicts are computed from the run's numbers by "
    "{{ref}}`the rules below <{rules}>`, from tests registered in the library before anything "
    "ran (the registry is printed at the end of this page); nothing here is typed by hand. "
    "Under each claim, one row per test: the task (and part of the claim) it tests, what its "
    "interval found of the estimate it names, the estimate with its interval (for a check, "
    "the checked value; ≤ marks a value at the rounding floor, which is at most that), what "
    "that did to the claim, the independent units (one count per group for two groups) and "
    "the smallest effect the test's design detects with {power:.0%} power, given its units "
    "and observed spread (for a test of parity: the narrowest margin within which it shows "
    "parity with that power when the true ratio is 1). The same rows are in `{json}` beside "
    "this page.")
TASKS_INTRO = "Tasks are named short; their data:"
QUESTIONS_INTRO = (
    "The paper leaves some questions open or names them as future work (C10). The book "
    "answers them with its own experiments; their verdicts say what was found, not whether a "
    "claim of the paper held.")
CALIBRATION_INTRO = (
    "Each claim's rule was run on simulated repetitions of this build's own design ({runs} "
    "each: the same tasks, units and observed spread of the per-unit scores, decided by the "
    "same code); under each claim, how often it finds the paper's result (reproduced or "
    "partly reproduced) where that result is false, at the boundary (no difference for a "
    "claimed difference, a ratio at the margin for a claimed parity or absence of an "
    "advantage), which should be at most {alpha:.0%}, and what it finds where the paper's "
    "result holds on every task: with an effect of {effect:g}× for a claimed difference, with the two equal for a claimed parity or absence of an advantage. (A test that presupposes an "
    "advantage is simulated without that condition, which can only raise the first rate.)")
REGISTRY_INTRO = (
    "The primary test of every claim and question, as the library declares it "
    "(`rankcollapse.registry`); $L$ is the depth of the model or stack, the family the number "
    "of tests whose intervals hold together.")
REGISTRY_ITEM = ("- **{id}** · {part}: {quantity}; {where}; unit: {unit}; estimate: {estimate}; "
                 "the paper: {direction}; test: {test}; tasks: {tasks}; family: {family}")
FINDINGS_INTRO = ("Verdicts on this build (profile `{profile}`), of the paper's {count} "
                  "claims (as its public summaries state them):")
SEE_LEDGER = "Each verdict, its tests and its figure are in the {doc}`claims`."
QUESTIONS_FOUND = "On the questions the paper left open, the book's own experiments found:"
FOREST_CAPTION = (
    "Every primary test of this build that has an interval (the numerical checks are in the "
    "ledger's tables): the estimate (dot) and its interval (line) on a log "
    "scale, Sinkhorn / softmax unless the right-hand label names another estimate; the grey "
    "band behind each row is its parity margin: a factor {margin:g}, narrower for accuracies "
    "and entropies ({narrow}). Top: the paper's claims, each test coloured "
    "by what it did to its claim; an interval that leaves the band on the paper's side "
    "agrees, one on the other side is the opposite. Bottom: the book's own questions, "
    "coloured by what they found. Arrows at the axis's ends mark intervals beyond it; the "
    "values printed there are their estimates.")


def _percent(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def _where(ratio: float) -> str:
    """Where a claim's power is stated, in words: 'where the effect is 1.5×' for a claimed
    difference, 'where the two are equal' for a claimed parity or absence of an advantage."""
    if ratio == 1:
        return "where the two are equal"
    return f"where the effect is {max(ratio, 1 / ratio):.3g}×"


def _calibration_words(row: dict) -> list[str]:
    c = row["calibration"]
    if not c:
        return []
    best = (BEST.format(where=_where(c["effect"]), best=c["best"]) if c.get("best") else
            EVERY.format(where=_where(c["effect"]), rate=f"{c['power_every']:.0%}"))
    opposite = (OPPOSITE.format(rate=_percent(c["false_opposite"]))
                if c.get("false_opposite") is not None else "")
    return [CALIBRATED.format(runs=c["runs"], false_rate=_percent(c["false_rate"]),
                              opposite=opposite, best=best)]


def claim_block(row: dict) -> list[str]:
    """One claim on the page: its anchor, a header line (id, claim, verdict, where shown),
    what it was computed on (the models' depth and width, the data), the level of its
    intervals and its rule's calibration, then a table of its tests."""
    shown = outcomes.shown_results(row["id"], row["results"])
    lines = [f"({ANCHOR.format(id=row['id'].lower())})=",
             HEADER.format(id=row["id"], claim=row["claim"], verdict=row["verdict"],
                           shown=_shown(row)), ""]
    said = [DATA_WORDS.format(data=row["data"])] if row.get("data") else []
    said += ([LEVEL_WORDS.format(level=registry.family_level_words(row["family"]))]
             if row["family"] and any(map(outcomes.is_test, shown)) else [])
    said += _calibration_words(row)
    if not shown:
        said.append(" ".join(row["finding"].split()))
    lines += [" ".join(said), ""] if said else []
    if shown:
        lines += outcomes.table(TEST_COLUMNS,
                                [outcomes.cells_of_test(row["id"], r) for r in shown])
    if len(shown) < len(row["results"]):
        lines += [SEQUENCE_NOTE.format(json=JSON), ""]
    return lines


def _legend(rows: list[dict]) -> list[str]:
    legend = outcomes.task_legend([r for row in rows for r in row["results"]])
    return [TASKS_INTRO, ""] + [f"- {name}: {data}" for name, data in legend.items()] + [""] \
        if legend else []


def _task_words(task: str) -> str:
    """A registered task for a reader: 'text, softmax' -> 'text classification / softmax'."""
    role, _, rest = task.partition(", ")
    return ROLES[role] + (f" / {rest}" if rest else "") if role in ROLES else task


def _registry_list(profile: str) -> list[str]:
    """The registry, one item per part of every claim (a list: ten columns would not fit
    the page)."""
    lines = []
    for r in registry.rows(get_profile(profile)):
        if r["part"] == "–":
            lines.append(f"- **{r['id']}**: {r['test']}")
            continue
        r = {**r, "tasks": "; ".join(_task_words(t) for t in r["tasks"]) or "–"}
        lines.append(REGISTRY_ITEM.format(**r))
    return lines + [""]


def forest_caption() -> str:
    """The forest plot's caption, its margins from the registry (the parts whose margin is
    not the default named with theirs)."""
    narrow = {}
    for cid, claim in registry.CLAIMS.items():
        for margin in sorted({p.margin for p in claim.parts} - {MARGIN}):
            narrow.setdefault(margin, []).append(cid)
    words = "; ".join(f"{summary.joined(ids)}: a factor {1 + m:g}" for m, ids in narrow.items())
    return FOREST_CAPTION.format(margin=1 + MARGIN, narrow=words)


def forest_figure(caption: str, name: str | None) -> list[str]:
    """The forest plot as a MyST figure (named only where it is cited: once in the book)."""
    return ["```{figure} " + f"chapters/figures/{FOREST}.png", *([f":name: {name}"] if name
                                                                   else []),
            ":alt: every primary test's estimate and interval, coloured by its outcome",
            ":width: 100%", "", caption, "```", ""]


def page(rows: list[dict], profile: str, runs: int = CALIBRATION_RUNS) -> str:
    """The Claims page (MyST markdown)."""
    claims = [r for r in rows if r["id"] not in registry.FINDINGS]
    questions = [r for r in rows if r["id"] in registry.FINDINGS]
    lines = ["---", "html_theme.sidebar_secondary.remove: true", "---", "",
             "# Claims ledger", "", summary.paragraph(rows, profile), "",
             *forest_figure(forest_caption(), FOREST),
             PAGE_INTRO.format(rules=RULES_ANCHOR, power=POWER, json=JSON), "",
             *_legend(rows), "## The paper's claims", ""]
    for row in claims:
        lines += claim_block(row)
    lines += ["## Questions the paper left open", "", QUESTIONS_INTRO, ""]
    for row in questions:
        lines += claim_block(row)
    lines += [f"({RULES_ANCHOR})=", "## How a claim is decided", "", COMPARISON_RULE, "",
              CLAIM_RULE, "", FINDING_RULE, "",
              CALIBRATION_INTRO.format(runs=runs, alpha=1 - LEVEL, effect=EFFECT), "",
              "## The registry", "", REGISTRY_INTRO, "", *_registry_list(profile),
              "## Findings, claim by claim", ""]
    lines += [f"- **{r['id']}** ({r['verdict']}): {' '.join(r['finding'].split())}"
              for r in rows]
    return "\n".join(lines) + "\n"


def _with_caveats(rows: list[dict]) -> str:
    """'C1, C3a and C3b (the bound tested is ...), C3c': the ids, each run of neighbours
    that share a caveat (where a verdict was reached and the registry states one) followed
    by it once."""
    def caveat(row: dict) -> str:
        tested = row["verdict"] != "not testable here"
        return registry.CLAIMS[row["id"]].caveat if tested else ""

    runs = [([r["id"] for r in group], said) for said, group in groupby(rows, key=caveat)]
    return ", ".join(f"{summary.joined(ids)} ({said})" if said else ", ".join(ids)
                     for ids, said in runs)


def findings(rows: list[dict], profile: str) -> str:
    """The findings the intro includes: the answer in plain words with the caveat
    (`summary.paragraph`), the forest plot, then the claim ids per verdict word (every
    word of `CLAIM_VERDICTS`, and any other a row carries) and what the book's own
    experiments found on the questions the paper left open."""
    claims = [r for r in rows if r["id"] not in registry.FINDINGS]
    open_rows = [r for r in rows if r["id"] in registry.FINDINGS
                 and r["verdict"] != "not testable here"]
    words = list(dict.fromkeys([*CLAIM_VERDICTS, *(r["verdict"] for r in claims)]))
    by = {v: [r for r in claims if r["verdict"] == v] for v in words}
    lines = [summary.paragraph(rows, profile), "",
             *forest_figure(forest_caption() + " As "
                            "{numref}`" + FOREST + "` on the {doc}`claims`.", None),
             FINDINGS_INTRO.format(profile=profile, count=len(claims)), ""]
    lines += [f"- **{v}**: {_with_caveats(these)}" for v, these in by.items() if these]
    lines += ["", SEE_LEDGER]
    if open_rows:
        lines += ["", QUESTIONS_FOUND, ""]
        lines += [f"- **{r['id']}**, {r['claim']}: **{r['verdict']}**" for r in open_rows]
    return "\n".join(lines) + "\n"


def write_ledger(root: Path, chapters: list[str], profile: str,
                 runs: int = CALIBRATION_RUNS) -> list[dict]:
    """Write the Claims page, the findings summary, the forest plot (`fig-forest` with its
    numbers, among the chapters' figure exports) and claims.json (in `book/`, for `build`
    to copy), each claim's rule calibrated on `runs` simulations; returns the rows."""
    rows = ledger(collect(root, chapters), profile, runs)
    figure, data = forest.forest(rows)
    save_figure(figure, FOREST, data, root / FIGURE_DIR,
                {"profile": profile, "rankcollapse": __version__, "git commit": git_commit(),
                 "made from": JSON})
    atomic_write_text(root / PAGE, page(rows, profile, runs))
    atomic_write_text(root / FINDINGS, findings(rows, profile))
    atomic_write_text(root / "book" / JSON, json.dumps(rows, indent=1))
    return rows


# ----------------------------------------------------------------------------- chapter boxes

BOX_COLUMNS = {"id": "id", "claim": "claim", "test": "task", "estimate": "estimate (interval)",
               "found": "found", "outcome": "what it did to the claim"}
IN_PART = "this part: {agree} of {count} tests {word}"
BOX_RULES = ("How tests are decided: see {{ref}}`{rules}`; each claim's verdict, from all its "
             "parts, is in the {{doc}}`/book/claims` (linked from its id).")


def _box_verdict(record: dict, settings) -> str:
    """The claim's verdict where this chapter records every registered part (with tasks
    under the profile) of it; otherwise what this chapter's tests of it did, so that an id
    has one verdict in the book: the ledger's."""
    recorded = {r["part"] for r in record["results"]}
    registered = {p.name for p in registry.CLAIMS[record["id"]].parts
                  if registry.tasks_of(p, settings)}
    if registered <= recorded:
        return f"**{record['verdict']}**"
    question = record["id"] in registry.FINDINGS
    agree = sum(r["outcome"] == "agrees" for r in record["results"])
    return IN_PART.format(agree=agree, count=len(record["results"]),
                          word="decided" if question else "agree with the paper")


def chapter_box(records: list[dict], profile: str) -> str:
    """A chapter's summary box (MyST markdown): one table of the claims it tests (id linked
    to its ledger row, claim with its verdict or what this chapter's part of it did, then
    per test: task, estimate, found and outcome, as on the ledger: `outcomes.cells_of_test`)
    and one sentence linking to the rules."""
    settings, rows = get_profile(profile), []
    for record in records:
        anchor = ANCHOR.format(id=record["id"].lower())
        first = {"id": f"{{ref}}`{record['id']} <{anchor}>`",
                 "claim": f"{record['claim']}: {_box_verdict(record, settings)}"}
        shown = outcomes.shown_results(record["id"], record["results"]) or [None]
        for i, r in enumerate(shown):
            cells = outcomes.cells_of_test(record["id"], r) if r else dict.fromkeys(
                BOX_COLUMNS, "–")
            rows.append({**cells, **(first if i == 0 else {"id": "", "claim": ""})})
    return "\n".join(outcomes.table(BOX_COLUMNS, rows) + [BOX_RULES.format(rules=RULES_ANCHOR)])
