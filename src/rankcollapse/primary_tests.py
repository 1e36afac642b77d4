"""Running a registered primary test (`rankcollapse.registry`) on a chapter's data.

A chapter computes a part's registered quantity and hands it to `run_part`, which applies
exactly the registered selection (the part's span of layers or depths and its inference
variants) and test (paired, contrast, groups, check or trend) and nothing else, one result
per task; `run_sequence` runs B4's fixed sequence of tests. Every refusal (a unit missing
at a position, a layer outside the model, too few depths for a trend) is a ValueError
naming the claim, the part and the task.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .profiles import Profile
from .registry import (COLLAPSE_LEVEL, Part, Span, family, registered, registered_depth,
                       tasks_of)
from .stats import (MIN_UNITS, Estimate, censored_logs, family_level, found_of,
                    groups_estimate, groups_tied, mostly_at_floor, outcome_of, paired_estimate)
from .verdicts import Result


@dataclass(frozen=True)
class _Table:
    """One task's rows of the data handed to `run_part`, with what its errors name: the claim,
    the part and the task (`where`), and the depth its spans resolve against."""

    rows: pd.DataFrame
    where: str
    depth: int

    def refuse(self, problem: str) -> ValueError:
        return ValueError(f"{self.where}: {problem}")

    def check_units(self) -> None:
        """Every row names its unit (a row without one would drop out of the test)."""
        missing = int(self.rows["unit"].isna().sum())
        if missing:
            raise self.refuse(f"{missing} rows have no unit id (NaN); give every row the unit "
                              "it was measured on (training seed, weight draw, pool): rows "
                              "without one would drop out of the test")

    def check_positions(self) -> None:
        """Every position lies in 1..L (layers and depths are numbered from 1)."""
        positions = self.rows["position"]
        outside = positions[positions.isna() | (positions < 1) | (positions > self.depth)]
        if len(outside):
            raise self.refuse(f"positions {_listed(outside)} lie outside 1–{self.depth}, the "
                              "registered depth of this task (`registered_depth`); number "
                              "layers and depths from 1 (layer 0, the input embeddings, is in "
                              "no registered span) and leave out positions beyond the depth")

    def select(self, rows: pd.DataFrame, variants: tuple[str, ...], span: Span | None,
               collapse: dict[str, int] | None = None) -> pd.DataFrame:
        """The rows of the registered variants at the span's positions; every unit of `rows`
        must have rows at every one of them. With a data-defined span, each variant's
        positions are its own (`collapse`: variant -> k); the caller has left out the
        variants whose window is empty (`windows`)."""
        units = rows["unit"].unique()
        if variants:
            rows = rows[rows["variant"].isin(variants)]
            missing = set(variants) - set(rows["variant"])
            if missing:
                raise self.refuse(f"the data has no rows for the registered variants "
                                  f"{sorted(missing)}")
        cells = self.windows(variants, span, collapse)
        if span is not None:
            keep = pd.Series(False, index=rows.index)
            for variant, positions in cells.items():
                mine = rows["position"].isin(positions)
                keep |= mine & (rows["variant"] == variant) if variant is not None else mine
                absent = set(positions) - set(rows.loc[keep, "position"] if variant is None
                                              else rows.loc[mine & (rows["variant"] == variant),
                                                            "position"])
                if absent:
                    raise self.refuse(f"the table has no rows at {span.noun} {_listed(absent)} "
                                      f"of {span.words()} (depth {self.depth} registered for "
                                      "this task, `registered_depth`); record every registered "
                                      "position")
            rows = rows[keep]
        if variants or span is not None:
            self._check_complete(rows, units, cells, span)
        return rows

    def windows(self, variants: tuple[str, ...], span: Span | None,
                collapse: dict[str, int] | None = None) -> dict[str | None, list[int]]:
        """Per variant (None: the part names none), the positions of `span` (possibly none
        where the span is data-defined and the window empty)."""
        keys = list(variants) or [None]
        if span is None:
            return {v: [] for v in keys}
        if not span.data_defined:
            positions = span.positions(self.depth)
            return {v: positions for v in keys}
        return {v: span.window(self.depth, (collapse or {})[v]) for v in keys}

    def _check_complete(self, rows: pd.DataFrame, units, cells: dict[str | None, list[int]],
                        span: Span | None) -> None:
        """Each unit has rows at every (variant, position) of the selection: a unit measured
        at some of them only would be averaged over others than the rest, or drop out."""
        wanted = [(v, p) for v, positions in cells.items() for p in (positions or [None])]
        variants = [v for v in cells if v is not None]
        for unit in units:
            mine = rows[rows["unit"] == unit]
            blank = [None] * len(mine)
            have = set(zip(mine["variant"] if variants else blank,
                           mine["position"] if span is not None else blank))
            lacking = [_cell_words(v, p, span) for v, p in wanted if (v, p) not in have]
            if lacking:
                more = f" and {len(lacking) - 4} more" if len(lacking) > 4 else ""
                selection = " ".join(x for x in (span.words() if span else "",
                                                 ", ".join(variants)) if x)
                raise self.refuse(f"unit {_said(unit)} lacks rows at {', '.join(lacking[:4])}"
                                  f"{more} of the registered selection ({selection}); measure "
                                  "every unit at every registered variant and position, or "
                                  "leave the unit out of the table")


def _listed(values) -> str:
    """'[0, 13]': positions for a message, in order, whole numbers without '.0'."""
    values = list(values)
    known = sorted({v for v in values if not pd.isna(v)})
    unknown = ["nan"] if any(pd.isna(v) for v in values) else []
    return "[" + ", ".join([_said(v) for v in known] + unknown) + "]"


def _said(x) -> str:
    """A unit id or position for a message: 3, not 3.0; a name as it is."""
    return f"{x:g}" if isinstance(x, numbers.Real) else str(x)


def _cell_words(variant: str | None, position: int | None, span: Span | None) -> str:
    """'(full model, layer 4)': one cell of a selection in words."""
    noun = span.noun.removesuffix("s") if span else ""
    said = [x for x in (variant, f"{noun} {position}" if position is not None else None) if x]
    return f"({', '.join(said)})"


def _scores(g: pd.DataFrame, floor: float) -> tuple[pd.Series, int, int, int]:
    """Per unit, the mean censored log ratio (or mean censored log `value`) over its rows,
    and the counts of values, censored values and ties."""
    # one quantity per unit: against 1, so that it never ties at the floor
    pair = (np.ones(len(g)), g["value"]) if "value" in g else (g["softmax"], g["sinkhorn"])
    logs, censored, tied = censored_logs(*pair, floor)
    scores = pd.Series(logs, index=g.index).groupby(g["unit"]).mean()
    return scores, len(g), int(censored.sum()), int(tied.sum())


def _result(part: Part, task: str, estimate: Estimate | None, level: float, values: int,
            censored: int, tied: int, sd: tuple[float, ...],
            requirement: str | None = None, units: tuple[int, ...] = ()) -> Result:
    direction = part.direction
    if estimate is None or mostly_at_floor(tied, values):
        return Result(part.name, task, None if estimate is None else math.exp(
            estimate.log_ratio), "undecided", "undecided", level=level,
            units=estimate.units if estimate else units, values=values,
            censored=censored, tied=tied, sd=sd, requirement=requirement,
            margin=part.margin)
    ratio, low, high = estimate.interval(level)
    found = found_of(ratio, low, high, part.margin)
    if direction == "either":
        outcome = "agrees" if found in ("more", "less", "parity") else "undecided"
    else:
        outcome = outcome_of(direction, found)
        if requirement is not None and outcome == "agrees" and requirement != "more":
            # the advantage is larger there, but Sinkhorn is not shown ahead there at all
            outcome = "against" if requirement in ("parity", "not more", "less") else \
                "undecided"
    return Result(part.name, task, ratio, found, outcome, low, high, level, estimate.units,
                  estimate.detectable(level, "more" if direction == "either" else direction,
                                      part.margin),
                  censored, tied, values, sd, requirement, margin=part.margin)


def _estimate(scores: list[pd.Series]) -> Estimate | None:
    if len(scores) == 1:
        return paired_estimate(scores[0].to_numpy()) if len(scores[0]) >= MIN_UNITS else None
    if min(len(s) for s in scores) < MIN_UNITS:
        return None
    return groups_estimate(scores[0].to_numpy(), scores[1].to_numpy())


def run_part(claim_id: str, part_name: str, data: pd.DataFrame, profile: Profile,
        titles: dict[str, str] | None = None,
        collapse: dict[tuple[str, str], int] | None = None) -> list[Result]:
    """The registered test of one part of a claim, one `Result` per registered task.

    `data` holds one row per (task, unit, variant, position) with columns task, unit,
    variant (when the part names variants), position (layer or depth, when it has a span)
    and `softmax` and `sinkhorn` (paired values); for a `groups` test a column `group`
    ('reference' or 'other') and either `value` (a positive quantity) or the pair. `titles`
    maps task keys to the names results carry. A part whose span ends at the collapse
    layer ('collapse', 'collapse+1') needs `collapse`: (task, variant) -> k
    (`collapse_layers`) for every task and variant it selects, else a ValueError naming the
    claim, the part and the task; each variant is selected over its own window, a variant
    whose window is empty drops out of its selection (the result's `note` says so), and a
    selection left without a variant makes the task's test 'untested' (`note`: why).

    The table is taken as it is or refused, never reshaped: a ValueError naming the claim,
    the part and the task where a row has no unit id, a position lies outside 1..L (L the
    task's `registered_depth`, not the deepest position in the data), a registered
    position or variant has no rows, or a unit lacks rows at some of them (in either
    selection of a contrast)."""
    part = registered(claim_id).part(part_name)
    if part.test in ("check", "sequence"):
        raise ValueError(f"{claim_id} / {part_name} is a {part.test}; see check_result and "
                         "run_sequence")
    expected = tasks_of(part, profile)
    found_tasks = tuple(dict.fromkeys(data["task"]))
    if set(found_tasks) != set(expected):
        raise ValueError(f"{claim_id} / {part_name} is registered for tasks {list(expected)}; "
                         f"the data has {list(found_tasks)}")
    level = family_level(family(claim_id, profile))
    results = []
    for task in expected:
        if part.test == "trend":
            results.append(_trend(part, (titles or {}).get(task, task), data[data["task"] == task],
                                  level, f"{claim_id} / {part_name}, task {task!r}"))
            continue
        table = _Table(data[data["task"] == task], f"{claim_id} / {part_name}, task {task!r}",
                       registered_depth(task, profile))
        table.check_units()
        if part.span is not None:
            table.check_positions()
        g = table.rows
        name = (titles or {}).get(task, task)
        ks, note = {}, []
        if part.test == "contrast" and _data_defined(part):
            ks = _collapse_of(part, task, collapse, table)
            chosen = []
            for variants, span in ((part.variants, part.span),
                                   (part.against, part.against_span or part.span)):
                windows = table.windows(variants, span, ks)
                empty = [v for v in variants if not windows[v]]
                note += [f"{v}: {_empty_words(span, ks[v], table.depth)}" for v in empty]
                chosen.append(tuple(v for v in variants if windows[v]))
            if not all(chosen):
                results.append(Result(part.name, name, None, "undecided", "untested",
                                      level=level, margin=part.margin,
                                      note="; ".join(note) + "; the test cannot be carried "
                                      "out"))
                continue
            variants, against = chosen
        else:
            variants, against = part.variants, part.against
        if part.test == "groups":
            sides = [_scores(table.select(g[g["group"] == side], part.variants, part.span),
                             part.floor) for side in ("reference", "other")]
            scores = [s[0] for s in sides]
            est = _estimate(scores)
            censored = [s[2] for s in sides]
            ties = (groups_tied(censored, [s[1] for s in sides]) if "value" in g
                    else sum(s[3] for s in sides))
            results.append(_result(part, name, est, level, sum(s[1] for s in sides),
                                   sum(censored), ties,
                                   tuple(float(s.std(ddof=1)) for s in scores),
                                   units=tuple(len(s) for s in scores)))
            continue
        first_rows = table.select(g, variants, part.span, ks)
        if part.test == "paired":
            first = _scores(first_rows, part.floor)
            est = _estimate([first[0]])
            results.append(_result(part, name, est, level, *first[1:],
                                   (float(first[0].std(ddof=1)),), units=(len(first[0]),)))
            continue
        # every unit is in both selections (`select`): the difference is over all of them
        second_rows = table.select(g, against, part.against_span or part.span, ks)
        if part.identified:
            first_rows, second_rows, left_out = _identified(
                first_rows, second_rows, part.floor, part.unit, part.span.noun.rstrip("s"))
            note += left_out
        first, second = (_scores(r, part.floor) for r in (first_rows, second_rows))
        diff = first[0] - second[0][first[0].index]
        requirement = None
        if part.requires:
            ahead = _estimate([first[0]])
            requirement = (found_of(*ahead.interval(level), part.margin) if ahead
                           else "undecided")
        result = _result(part, name, _estimate([diff]), level, first[1] + second[1],
                         first[2] + second[2], first[3] + second[3],
                         (float(diff.std(ddof=1)),), requirement, (len(diff),))
        results.append(replace(result, left_out="; ".join(note)) if note else result)
    return results


def _identified(first: pd.DataFrame, second: pd.DataFrame, floor: float, unit: str,
                position: str) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The rows of both selections of a contrast at each unit's positions where no value of
    either is at the rounding floor (`floor`), and what was left out, in words (`unit` and
    `position` name them: 'training seed', 'depth')."""
    keys = ["unit", "position"]
    above = pd.concat([first, second]).assign(
        above=lambda d: (d["softmax"] > floor) & (d["sinkhorn"] > floor))
    kept = above.groupby(keys)["above"].all()
    kept = kept[kept].index
    chosen = [rows[pd.MultiIndex.from_frame(rows[keys]).isin(kept)] for rows in (first, second)]
    pairs = above.groupby(keys).ngroups
    said = [f"{pairs - len(kept)} of {pairs} ({unit}, {position}) pairs with a value at the "
            "rounding floor"] if pairs > len(kept) else []
    gone = sorted(set(first["unit"]) - set(chosen[0]["unit"]))
    said += [f"units {_listed(gone)}: no {position} above the floor"] if gone else []
    return chosen[0], chosen[1], said


def trend_scores(part: Part, rows: pd.DataFrame, where: str
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A trend's data per depth (a column `depth`, each depth's rows its own stack of that
    many layers): each unit's mean censored log ratio over the part's span of that depth, as
    a table unit x depth, and per depth the counts of `values`, `censored` values and
    `tied` pairs (a table depth x count). Every unit must be measured at every depth, and
    there must be two depths (a ValueError naming `where` otherwise)."""
    if "depth" not in rows:
        raise ValueError(f"{where}: a trend's data has a column depth (the depth of the model "
                         "each row was measured in)")
    scores, counts = {}, {}
    for depth, g in rows.groupby("depth"):
        table = _Table(g, f"{where}, depth {depth:g}", int(depth))
        table.check_units()
        table.check_positions()
        per_unit, *counted = _scores(table.select(g, part.variants, part.span), part.floor)
        scores[int(depth)] = per_unit
        counts[int(depth)] = dict(zip(("values", "censored", "tied"), counted))
    if len(scores) < 2:
        raise ValueError(f"{where}: a trend needs at least two depths; got {sorted(scores)}")
    wide = pd.DataFrame(scores)
    lacking = wide.index[wide.isna().any(axis=1)]
    if len(lacking):
        raise ValueError(f"{where}: units {_listed(lacking)} are not measured at every depth "
                         f"({', '.join(map(str, wide.columns))}); measure every unit at every "
                         "depth, or leave it out")
    return wide, pd.DataFrame.from_dict(counts, orient="index")


def _trend(part: Part, name: str, rows: pd.DataFrame, level: float, where: str) -> Result:
    """A trend over depths (`trend_scores`): per unit, the least-squares slope of its mean
    log ratios against log2 of the depth; the t interval of the mean slope over units, as
    the factor per doubling of depth."""
    wide, counts = trend_scores(part, rows, where)
    x = np.log2(wide.columns.to_numpy(float))
    x = x - x.mean()
    slopes = pd.Series(wide.to_numpy() @ x / (x @ x), index=wide.index)
    total = counts.sum()
    return _result(part, name, _estimate([slopes]), level, int(total["values"]),
                   int(total["censored"]), int(total["tied"]),
                   (float(slopes.std(ddof=1)),), units=(len(slopes),))


def _data_defined(part: Part) -> bool:
    return any(s is not None and s.data_defined for s in (part.span, part.against_span))


def _collapse_of(part: Part, task: str, collapse: dict[tuple[str, str], int] | None,
                 table: "_Table") -> dict[str, int]:
    """Variant -> k of `task` for the variants a data-defined part selects."""
    wanted = list(dict.fromkeys(part.variants + part.against))
    lacking = [v for v in wanted if (task, v) not in (collapse or {})]
    if lacking:
        raise table.refuse(f"the part's span ends at the collapse layer, and `collapse` has no "
                           f"k for {lacking}; pass collapse=collapse_layers(...) with every "
                           "(task, variant) the part selects")
    ks = {v: collapse[(task, v)] for v in wanted}
    for v, k in ks.items():
        if not (isinstance(k, numbers.Integral) and 0 <= k <= table.depth):
            raise table.refuse(f"the collapse layer of {v!r} is {k!r}; it is a whole number "
                               f"in 0–{table.depth}")
    return ks


def _empty_words(span: Span, k: int, depth: int) -> str:
    """Why a data-defined window is empty, in words."""
    level = "half" if COLLAPSE_LEVEL == 0.5 else f"{COLLAPSE_LEVEL:g} of"
    why = (f"the softmax model keeps less than {level} its input's residual already at "
           f"{span.noun.removesuffix('s')} 1" if k == 0 else
           f"the softmax model keeps at least {level} its input's residual at every "
           f"{span.noun.removesuffix('s')}" if k >= depth else f"k = {k}")
    return f"{why}: no {span.words().replace(span.noun, span.noun.removesuffix('s'), 1)}"


def collapse_layers(relative: pd.DataFrame, profile: Profile) -> dict[tuple[str, str], int]:
    """Per (task, variant), k: the last layer before the softmax models collapse to half,
    i.e. before their relative residual (to the input's at layer 0) first falls below
    `COLLAPSE_LEVEL`; L (`registered_depth`) when it never does, 0 when layer 1 is already
    below. `relative` is shaped as `run_part`'s data (`recording.per_unit(hidden, 'relative')`:
    columns task, variant, position, unit, softmax; per unit the median over inputs); the
    curve is the geometric mean over units per position. A ValueError naming the task and
    variant where a position of 1..L is missing or a value is not positive."""
    out = {}
    for (task, variant), g in relative.groupby(["task", "variant"], sort=False):
        depth = registered_depth(task, profile)
        where = f"collapse_layers, task {task!r}, variant {variant!r}"
        missing = sorted(set(range(1, depth + 1)) - set(g["position"]))
        if missing:
            raise ValueError(f"{where}: no rows at layers {_listed(missing)} of 1–{depth}")
        values = g["softmax"].to_numpy(dtype=float)
        if not (np.isfinite(values).all() and (values > 0).all()):
            raise ValueError(f"{where}: relative residuals must be positive and finite")
        curve = pd.Series(np.log(values), index=g.index).groupby(g["position"]).mean()
        below = [int(p) for p, v in curve.items() if 1 <= p <= depth and
                 math.exp(v) < COLLAPSE_LEVEL]
        out[(task, variant)] = min(below) - 1 if below else depth
    return out


def run_sequence(claim_id: str, data: pd.DataFrame, profile: Profile,
                 titles: dict[str, str] | None = None, floor: float = 0.0) -> list[Result]:
    """B4's registered test: per task and iteration count k below the most, the accuracy
    with k against that with the most (columns task, unit, position = k, value), paired
    over units, parity within the part's margin, each task's tests at the family level of
    the registered tasks; each result's `at` is its k. Values at or below `floor` (for an
    accuracy: one right answer among the test inputs) are censored there."""
    part = next(p for p in registered(claim_id).parts if p.test == "sequence")
    expected = tasks_of(part, profile)
    if set(data["task"]) != set(expected):
        raise ValueError(f"{claim_id} is registered for tasks {list(expected)}; the data has "
                         f"{sorted(set(data['task']))}")
    level = family_level(len(expected))
    results = []
    for task in expected:
        table = _Table(data[data["task"] == task], f"{claim_id} / {part.name}, task {task!r}",
                       registered_depth(task, profile))
        table.check_units()
        g = table.rows.pivot(index="unit", columns="position", values="value")
        for unit, k in g.isna().stack().loc[lambda x: x].index[:1]:
            raise table.refuse(f"unit {_said(unit)} lacks a value at {_said(k)} iterations; "
                               "measure every unit at every iteration count, or leave the "
                               "unit out of the table")
        most = g.columns.max()
        for k in sorted(g.columns, reverse=True)[1:]:
            logs, censored, tied = censored_logs(g[most], g[k], floor)
            est = paired_estimate(logs) if len(logs) >= MIN_UNITS else None
            name = (titles or {}).get(task, task)
            results.append(replace(_result(part, name, est, level, len(logs),
                                           int(censored.sum()), int(tied.sum()),
                                           (float(np.std(logs, ddof=1)),), units=(len(logs),)),
                                   at=float(k)))
    return results
