"""Independent, deliberately plain references for the tests: Python loops, log domain, float64."""

import torch


def sinkhorn_loop(a: torch.Tensor, half_steps: int) -> torch.Tensor:
    """Log-domain Sinkhorn of one matrix `(n, n)`, row first, in float64, no vectorisation."""
    x = a.double().clone()
    for step in range(half_steps):
        dim = 1 if step % 2 == 0 else 0
        x = x - torch.logsumexp(x, dim=dim, keepdim=True)
    return x.exp()


def sinkhorn_batched_reference(a: torch.Tensor, n_iter: int) -> torch.Tensor:
    """The plain log-domain loop over full iterations, batched (also the benchmark's reference)."""
    x = a.clone()
    for _ in range(n_iter):
        x = x - torch.logsumexp(x, dim=-1, keepdim=True)
        x = x - torch.logsumexp(x, dim=-2, keepdim=True)
    return x.exp()


def per_matrix(fn, a: torch.Tensor) -> torch.Tensor:
    """Apply `fn` to every `(n, n)` matrix of `a (..., n, n)` in a Python loop."""
    flat = a.reshape(-1, *a.shape[-2:])
    return torch.stack([fn(m) for m in flat]).reshape(a.shape)


# ----------------------------------------------------------------------------- statistics
# Plain-loop references for the verdict layer (rankcollapse.stats, .verdicts, .registry):
# written from the module docstrings, in Python floats, no numpy vectorisation. What an
# interval finds (`stats.found_of`) and a claim's verdict from its outcomes
# (`verdicts.claim_verdict`) are the library's own here: a copy of a rule catches drift, never
# a wrong rule, so those two are tested against written-out cases and independent
# formulations instead (tests/test_stats.py, tests/test_verdicts.py).

import math  # noqa: E402

from rankcollapse.stats import found_of  # noqa: E402
from rankcollapse.verdicts import claim_verdict  # noqa: E402


def t_closed(p: float, df: int) -> float:
    """Student's t quantile (p > 0.5) in closed form for df 1, 2 and 4."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p)))
    if df == 4:
        a = 4 * p * (1 - p)
        q = math.cos(math.acos(math.sqrt(a)) / 3) / math.sqrt(a)
        return 2 * math.sqrt(q - 1)
    raise ValueError(f"no closed form for df={df}")


def plain_mean(xs) -> float:
    xs = [float(x) for x in xs]
    return sum(xs) / len(xs)


def plain_sd(xs) -> float:
    """The sample standard deviation (n - 1)."""
    xs = [float(x) for x in xs]
    m = plain_mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def plain_censor(softmax, sinkhorn, floor):
    """Per pair: log(max(b, floor) / max(a, floor)), censored (either side at or below the
    floor), tied (both)."""
    logs, censored, tied = [], [], []
    for a, b in zip(softmax, sinkhorn):
        a, b = float(a), float(b)
        low_a, low_b = a <= floor, b <= floor
        logs.append(math.log(max(b, floor)) - math.log(max(a, floor)))
        censored.append(low_a or low_b)
        tied.append(low_a and low_b)
    return logs, censored, tied


PLAIN_OUTCOMES = {  # direction -> found -> outcome, written out
    "more": {"more": "agrees", "less": "opposite", "parity": "against", "not more": "against",
             "not less": "undecided", "undecided": "undecided"},
    "less": {"more": "opposite", "less": "agrees", "parity": "against", "not more": "undecided",
             "not less": "against", "undecided": "undecided"},
    "parity": {"more": "opposite", "less": "opposite", "parity": "agrees",
               "not more": "undecided", "not less": "undecided", "undecided": "undecided"},
    "no more": {"more": "opposite", "less": "agrees", "parity": "agrees", "not more": "agrees",
                "not less": "undecided", "undecided": "undecided"},
    "no less": {"more": "agrees", "less": "opposite", "parity": "agrees",
                "not more": "undecided", "not less": "agrees", "undecided": "undecided"},
}


def plain_welch(reference, other):
    """(mean difference other - reference, se, df rounded down; the smaller group's df when
    both are constant)."""
    na, nb = len(reference), len(other)
    va, vb = plain_sd(reference) ** 2 / na, plain_sd(other) ** 2 / nb
    se = math.sqrt(va + vb)
    df = min(na, nb) - 1
    if se > 0:
        df = max(1, math.floor((va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))))
    return plain_mean(other) - plain_mean(reference), se, df


def plain_interval(log_ratio, se, df, level, quantile):
    """(ratio, low, high) of a two-sided `level` t interval; `quantile(p, df)` the t
    quantile."""
    half = quantile(0.5 + level / 2, df) * se
    return math.exp(log_ratio), math.exp(log_ratio - half), math.exp(log_ratio + half)


def plain_detectable(se, df, level, direction, margin, quantile, power=0.8):
    t_level = quantile(0.5 + level / 2, df) * se
    t_power = quantile(power, df) * se
    if direction in ("parity", "no more", "no less"):
        return math.exp(t_level + t_power)
    return math.exp(max(t_level, math.log(1 + margin)) + t_power)


def plain_quantile(p: float, df: int) -> float:
    """The closed forms where there is one, else the tested bisection of `stats`."""
    if df in (1, 2, 4):
        return t_closed(p, df)
    from rankcollapse.stats import t_quantile
    return t_quantile(p, df)


def plain_simulate(sds, units, direction, log_ratios, margins, family, runs, rng):
    """Claim verdicts of simulated designs, drawing in the order of the docstring of
    `verdicts.simulate_outcomes`: per test the paired scores (or the reference group, then
    the other), each with its own true log ratio and margin."""
    level = 1 - 0.05 / family
    verdicts = []
    for _ in range(runs):
        outcomes = []
        for sd, n, log_ratio, margin in zip(sds, units, log_ratios, margins):
            if min(n) < 3:  # no interval in the real run either: undecided, nothing drawn
                outcomes.append("undecided")
                continue
            if len(n) == 1:
                x = [float(v) for v in rng.normal(log_ratio, sd[0], n[0])]
                mean, se, df = plain_mean(x), plain_sd(x) / math.sqrt(n[0]), n[0] - 1
            else:
                a = [float(v) for v in rng.normal(0.0, sd[0], n[0])]
                b = [float(v) for v in rng.normal(log_ratio, sd[1], n[1])]
                mean, se, df = plain_welch(a, b)
            ratio, low, high = plain_interval(mean, se, df, level, plain_quantile)
            outcomes.append(PLAIN_OUTCOMES[direction][found_of(ratio, low, high, margin)])
        verdicts.append(claim_verdict(outcomes))
    return verdicts


def _sd_or_nan(xs) -> float:
    return plain_sd(xs) if len(xs) > 1 else math.nan


def plain_select(rows, variants, positions_of, depth=None):
    """The rows of `variants` (every row when none are named) at the positions
    `positions_of(depth)`, `depth` the task's registered depth (every position when
    `positions_of` is None)."""
    if variants:
        rows = [r for r in rows if r["variant"] in variants]
    if positions_of is not None:
        keep = set(positions_of(depth))
        rows = [r for r in rows if r["position"] in keep]
    return rows


def plain_scores(rows, floor):
    """Per unit the mean censored log ratio (log `value` for one value per row): a dict unit
    -> score, and the counts of rows, censored values and ties."""
    per, censored, tied = {}, 0, 0
    for r in rows:
        one = "value" in r
        a, b = (1.0, r["value"]) if one else (r["softmax"], r["sinkhorn"])
        (log,), (c,), (t,) = plain_censor([a], [b], floor)
        per.setdefault(r["unit"], []).append(log)
        censored += c
        tied += 0 if one else t
    return {u: plain_mean(v) for u, v in per.items()}, len(rows), censored, tied


def plain_result(part, task, groups, level, values, censored, tied, sd, direction, margin,
                 requirement=None):
    """Every field of a registered test's result (`verdicts.Result`) as a dict, from the
    per-unit scores of one group (paired) or two (reference, other)."""
    units = tuple(len(g) for g in groups)
    estimate = None
    if len(groups) == 1 and units[0] >= 3:
        x = groups[0]
        estimate = plain_mean(x), plain_sd(x) / math.sqrt(len(x)), len(x) - 1
    elif len(groups) == 2 and min(units) >= 3:
        estimate = plain_welch(groups[0], groups[1])
    base = dict(part=part, task=task, level=level, units=units, censored=censored, tied=tied,
                values=values, sd=sd, requirement=requirement, bound="", at=None, margin=margin)
    if estimate is None or tied > values / 2:
        return dict(base, number=None if estimate is None else math.exp(estimate[0]),
                    found="undecided", outcome="undecided", low=None, high=None,
                    detectable=None)
    mean, se, df = estimate
    ratio, low, high = plain_interval(mean, se, df, level, plain_quantile)
    found = found_of(ratio, low, high, margin)
    if direction == "either":
        outcome = "agrees" if found in ("more", "less", "parity") else "undecided"
    else:
        outcome = PLAIN_OUTCOMES[direction][found]
        if requirement is not None and outcome == "agrees":
            outcome = {"more": "agrees", "parity": "against", "not more": "against",
                       "less": "against"}.get(requirement, "undecided")
    return dict(base, number=ratio, found=found, outcome=outcome, low=low, high=high,
                detectable=plain_detectable(se, df, level,
                                            "more" if direction == "either" else direction,
                                            margin, plain_quantile))


def plain_run(rows, tasks, part, kind, direction, level, floor, first, second=None,
              requires=False, margin=0.1, titles=None, depths=None):
    """A registered test, task by task, on `rows` (a list of dicts): `first` and `second`
    are (variants, positions_of) selections, positions at `depths[task]`; kind paired,
    contrast or groups."""
    out = []
    for task in tasks:
        mine = [r for r in rows if r["task"] == task]
        first_at, second_at = ((*s, (depths or {}).get(task)) if s else s
                               for s in (first, second))
        name = (titles or {}).get(task, task)
        if kind == "groups":
            sides = [plain_scores(plain_select([r for r in mine if r["group"] == side],
                                               *first_at),
                                  floor) for side in ("reference", "other")]
            groups = [list(s[0].values()) for s in sides]
            one_value = any("value" in r for r in mine)
            both_low = all(s[2] > s[1] / 2 for s in sides)  # each group mostly at the floor
            tied = ((sides[0][2] + sides[1][2]) * both_low if one_value
                    else sides[0][3] + sides[1][3])
            out.append(plain_result(part, name, groups, level, sides[0][1] + sides[1][1],
                                    sides[0][2] + sides[1][2], tied,
                                    tuple(_sd_or_nan(g) for g in groups), direction, margin))
            continue
        s1, v1, c1, t1 = plain_scores(plain_select(mine, *first_at), floor)
        if kind == "paired":
            x = list(s1.values())
            out.append(plain_result(part, name, [x], level, v1, c1, t1, (_sd_or_nan(x),),
                                    direction, margin))
            continue
        s2, v2, c2, t2 = plain_scores(plain_select(mine, *second_at), floor)
        diff = [s1[u] - s2[u] for u in s1 if u in s2]
        requirement = None
        if requires:
            x = list(s1.values())
            if len(x) >= 3:
                requirement = found_of(*plain_interval(
                    plain_mean(x), plain_sd(x) / math.sqrt(len(x)), len(x) - 1, level,
                    plain_quantile), margin)
            else:
                requirement = "undecided"
        out.append(plain_result(part, name, [diff], level, v1 + v2, c1 + c2, t1 + t2,
                                (_sd_or_nan(diff),), direction, margin, requirement))
    return out


def plain_sequence(rows, tasks, part, level, margin, titles=None):
    """B4: per task and count k below the most (descending), accuracy at k against the
    most, paired over units."""
    out = []
    for task in tasks:
        mine = [r for r in rows if r["task"] == task]
        counts = sorted({r["position"] for r in mine}, reverse=True)
        at = {(r["unit"], r["position"]): r["value"] for r in mine}
        units = sorted({r["unit"] for r in mine})
        for k in counts[1:]:
            logs = [math.log(at[u, k]) - math.log(at[u, counts[0]]) for u in units]
            result = plain_result(part, (titles or {}).get(task, task), [logs], level,
                                  len(logs), 0, 0, (_sd_or_nan(logs),), "parity", margin)
            out.append(dict(result, at=float(k)))
    return out


def plain_calibration(tests, direction, family, runs, seed, effect, full=False):
    """(false rate, power, power on every task) of `verdicts.calibration`, by the plain
    simulation: the boundary and the alternative written out per direction; with `full`,
    also the rate of a 'contradicted' or 'mixed' verdict where every true ratio is 1 and the
    best verdict reached with probability at least 0.8."""
    import numpy as np

    sds = [r.sd or (1.0,) * len(r.units) for r in tests]
    units = [r.units for r in tests]
    rng = np.random.default_rng(seed)
    margins = [r.margin for r in tests]
    null_at = [{"more": 0.0, "less": 0.0, "parity": math.log(1 + m), "no more": math.log(1 + m),
                "no less": -math.log(1 + m)}[direction] for m in margins]
    alt_at = [{"more": math.log(effect), "less": -math.log(effect)}.get(direction, 0.0)
              for _ in tests]
    null = plain_simulate(sds, units, direction, null_at, margins, family, runs, rng)
    alt = plain_simulate(sds, units, direction, alt_at, margins, family, runs, rng)
    found = ("reproduced", "partly reproduced")
    rates = (sum(v in found for v in null) / runs, sum(v in found for v in alt) / runs,
             sum(v == "reproduced" for v in alt) / runs)
    if not full:
        return rates
    opposite = plain_simulate(sds, units, direction, [0.0 for _ in tests], margins, family,
                              runs, rng)
    best = ("reproduced" if rates[2] >= 0.8 else "partly reproduced" if rates[1] >= 0.8
            else "none")
    return rates + (sum(v in ("contradicted", "mixed") for v in opposite) / runs, best)
