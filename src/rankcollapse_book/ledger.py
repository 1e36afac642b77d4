"""The claims ledger: one row per claim of the paper, from the chapters' own claim records.

Each chapter's summary box records its `stats.Claim` rows in
`book/chapters/claims/<chapter>.json` when it runs (`chapter.Chapter.glue_claims`). At build
time `write_ledger` turns them into the book's Claims page (`book/claims.md`), the findings
summary the intro includes (`book/findings.md`) and `claims.json`, which `build` copies to
`_build/html/claims.json`. A claim no chapter decides is listed as not testable here, with
the reason below. Rows of one claim from several chapters are merged by
`stats.merge_verdicts`.
"""

from __future__ import annotations

import json
from pathlib import Path

from rankcollapse.files import atomic_write_text
from rankcollapse.stats import (CLAIM_VERDICTS, CLAIMS, FINDING_IDS, OPEN_QUESTIONS,
                                merge_verdicts, significant)

RECORDS = Path("book") / "chapters" / "claims"
PAGE, FINDINGS, JSON = Path("book") / "claims.md", Path("book") / "findings.md", "claims.json"
UNDECIDED = {  # why a claim has no chapter deciding it in this version of the book
    "C5": "the `ci` profile trains smaller models on stand-in data; the `full` profile uses "
          "the paper's sizes and datasets, and its verdict is that run's",
    "C7": "a statement of the paper's limits, not a result to reproduce; the open question B1 "
          "trains pure attention from scratch",
    "C10": "future work of the paper; the chapter that measures it did not run in this build",
    **{q: "the chapter that answers it did not run in this build" for q in OPEN_QUESTIONS},
}


SYNTHETIC = "random weights, inputs and logits"  # what chapters without datasets compute on


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


def ledger(rows: list[dict], profile: str) -> list[dict]:
    """One row per claim id of `stats.CLAIMS`, then per open question of
    `stats.OPEN_QUESTIONS`, in their order: the chapters' rows merged (verdict by
    `merge_verdicts`, for `FINDING_IDS` the one verdict or 'mixed'; findings, chapters and
    figures joined; the number and interval of the first part that has one), or not testable
    here with the reason."""
    merged = []
    for claim_id, text in {**CLAIMS, **OPEN_QUESTIONS}.items():
        parts = [r for r in rows if r["id"] == claim_id]
        if not parts:
            merged.append({"id": claim_id, "claim": text, "verdict": "not testable here",
                           "finding": UNDECIDED.get(claim_id, "no chapter decides it yet") + ".",
                           "number": None, "interval": None, "measure": None, "figure": None,
                           "chapter": None, "data": None,
                           "profile": profile})
            continue
        numbered = next((p for p in parts if p.get("number") is not None), {})
        merged.append({
            "id": claim_id, "claim": text,
            "verdict": _merged_verdict(claim_id, [p["verdict"] for p in parts]),
            "finding": " ".join(f"{p['finding']}" for p in parts),
            "number": numbered.get("number"), "interval": numbered.get("interval"),
            "measure": numbered.get("measure"),
            "figure": ", ".join(dict.fromkeys(p["figure"] for p in parts if p.get("figure")))
            or None,
            "chapter": ", ".join(dict.fromkeys(p["chapter"] for p in parts)),
            "data": "; ".join(dict.fromkeys(p.get("data") or SYNTHETIC for p in parts)),
            "profile": parts[0]["profile"]})
    return merged


def _merged_verdict(claim_id: str, verdicts: list[str]) -> str:
    if claim_id in FINDING_IDS:
        return verdicts[0] if len(set(verdicts)) == 1 else "mixed"
    return merge_verdicts(verdicts)


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def readable(x: float) -> str:
    """A number for a reader: three significant digits, and powers of ten written out
    (1.2×10⁻⁷, not 1.2e-07) outside 0.001–10000."""
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    if x == 0 or (float(x).is_integer() and abs(x) < 1e4):
        return f"{int(x)}"
    if 1e-3 <= abs(x) < 1e4:
        return significant(x)
    mantissa, exponent = f"{x:.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    power = f"10{str(int(exponent)).translate(SUPERSCRIPT)}"
    return power if mantissa == "1" else f"{mantissa}×{power}"


def _number(row: dict) -> str:
    if row["number"] is None:
        return "–"
    interval = (f" ({readable(row['interval'][0])}–{readable(row['interval'][1])})"
                if row["interval"] else "")
    return f"{readable(row['number'])}{interval}"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, on one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(rows: list[dict]) -> list[str]:
    """Ledger rows as one wide Markdown table (the page's `ledger` style)."""
    lines = [":::{div} ledger",
             "| id | claim | verdict | number (range) | what the number is | shown in | data |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        figures = ", ".join(f"{{numref}}`{f.strip()}`" for f in (r["figure"] or "").split(",")
                            if f.strip()) or "–"
        chapters = ", ".join(f"{{doc}}`chapters/{c.strip()}`"
                             for c in (r["chapter"] or "").split(",") if c.strip()) or "–"
        shown = "; ".join(part for part in (figures, chapters) if part != "–") or "–"
        lines.append(f"| {r['id']} | {_cell(r['claim'])} | **{r['verdict']}** | {_number(r)} | "
                     f"{_cell(r.get('measure') or '–')} | {shown} | {_cell(r.get('data') or '–')} |")
    return lines + [":::", ""]


def page(rows: list[dict]) -> str:
    """The Claims page (MyST markdown)."""
    lines = ["---", "html_theme.sidebar_secondary.remove: true", "---", "",  # a wide table
             "# Claims ledger", "",
             "Every claim of the paper, its verdict on this build, the number that decided it "
             "and where it is shown. The verdicts are computed by the chapters from their own "
             "numbers with the rules stated in each chapter's summary box; nothing here is "
             "typed by hand. The column *what the number is* says, row by row, what the "
             "number measures. For a claim decided by comparisons, it is the geometric mean "
             "of their ratios and the range spans their intervals (a summary over several "
             "comparisons, not an interval of its own; a range of many powers of ten comes "
             "from comparisons near the rounding floor, where ratios mean little); for a "
             "claim decided by a check, the checked value. "
             f"The same rows are in `{JSON}` beside this page.", "",
             "", f"Profile of this build: `{rows[0]['profile'] if rows else '–'}`.", "",
             *_table([r for r in rows if r["id"] not in FINDING_IDS]),
             "## Questions the paper left open", "",
             "The paper leaves some questions open or names them as future work (C10). The "
             "book answers them with its own experiments; their verdicts say what was found, "
             "not whether a claim of the paper held.", "",
             *_table([r for r in rows if r["id"] in FINDING_IDS]),
             "## Findings, claim by claim", ""]
    lines += [f"- **{r['id']}** ({r['verdict']}): {' '.join(r['finding'].split())}"
              for r in rows]
    return "\n".join(lines) + "\n"


def findings(rows: list[dict], profile: str) -> str:
    """The short findings summary the intro includes: claim ids per verdict, one line on
    what was not reproduced, and what the book's own experiments found on the questions the
    paper left open."""
    claims = [r for r in rows if r["verdict"] in CLAIM_VERDICTS and r["id"] in CLAIMS]
    open_rows = [r for r in rows if r not in claims and r["verdict"] != "not testable here"]
    by = {v: [r["id"] for r in claims if r["verdict"] == v] for v in CLAIM_VERDICTS}
    lines = [f"On this build (profile `{profile}`), of the paper's {len(claims)} claims (as its "
             "public summaries state them):", ""]
    lines += [f"- **{v}**: {', '.join(ids)}" for v, ids in by.items() if ids]
    text = {r["id"]: r["claim"] for r in rows}
    failed = [f"{verdict.capitalize()}: " + "; ".join(f"{i} ({text[i]})" for i in by[verdict])
              + "." for verdict in ("not reproduced", "contradicted") if by[verdict]]
    lines += ["", (" ".join(failed) if failed else "Every claim that could be tested here was "
                   "reproduced, at least in part."),
              "Each verdict, its number and its figure are in the {doc}`claims`."]
    if profile != "full":
        lines += ["", f"The `{profile}` profile trains small models on stand-in datasets with "
                  "three seeds: its verdicts on trained models are a demonstration of the "
                  "method at small scale, not a test of the paper's experiment, which the "
                  "`full` profile runs at the paper's sizes."]
    if open_rows:
        lines += ["", "On the questions the paper left open, the book's own experiments found:",
                  ""]
        lines += [f"- **{r['id']}**, {r['claim']}: **{r['verdict']}**"
                  + (f" ({r['measure']})" if r.get("measure") else "") for r in open_rows]
    return "\n".join(lines) + "\n"


def write_ledger(root: Path, chapters: list[str], profile: str) -> list[dict]:
    """Write the Claims page, the findings summary and claims.json (in `book/`, for `build`
    to copy); returns the rows."""
    rows = ledger(collect(root, chapters), profile)
    atomic_write_text(root / PAGE, page(rows))
    atomic_write_text(root / FINDINGS, findings(rows, profile))
    atomic_write_text(root / "book" / JSON, json.dumps(rows, indent=1))
    return rows
