"""Chapter 2's experiments: how Sinkhorn converges, what it changes in the attention matrix,
and whether it changes collapse in random pure attention.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ...masks import log_normalize
from ...measures import row_entropy
from ...normalizations import marginal_errors, sinkhorn, softmax
from ...profiles import Profile
from ...claim_rows import Claim
from ...primary_tests import run_part
from ...registry import ENTROPY_MARGIN, PAPER_N, PAPER_SCALE, scale_label
from ...stats import compare_table, describe, mostly_at_floor, significant, unit_values
from ...verdicts import SHARE, TOLERANCE, marginal_check, results_sentence
from ...names import quoted


def convergence(logits: torch.Tensor, max_half_steps: int) -> pd.DataFrame:
    """Marginal errors after each number of half-steps 1..max_half_steps (row first), from
    one pass of the definition's log-domain loop (every half-step, no early stopping).

    Returns a table with columns half_steps, full_iterations (half_steps / 2), row_error and
    column_error (max over rows/columns, mean over the batch of matrices)."""
    rows, x = [], logits
    for h in range(1, max_half_steps + 1):
        x = log_normalize(x, -1 if h % 2 else -2)
        r, c = marginal_errors(x.exp())
        rows.append({"half_steps": h, "full_iterations": h / 2,
                     "row_error": r.mean().item(), "column_error": c.mean().item()})
    return pd.DataFrame(rows)


def convergence_curves(scales, draws: int, n: int, max_half_steps: int,
                       generator: torch.Generator) -> pd.DataFrame:
    """`convergence` of `draws` random `n x n` logit matrices with i.i.d. N(0, s^2) entries,
    for each logit scale s (column scale)."""
    return pd.concat([convergence(torch.randn(draws, n, n, generator=generator) * s,
                                  max_half_steps).assign(scale=s) for s in scales],
                     ignore_index=True)


QUANTILES = {"median": 0.5, "90%": 0.9, "99%": 0.99, "largest": 1.0}


def error_after(n_iter: int, sizes, scales, draws: int, generator: torch.Generator
                ) -> pd.DataFrame:
    """Quantiles over `draws` independent random logit matrices of the row error after
    exactly `n_iter` full iterations (float64, every iteration run, so that neither rounding
    nor early stopping hides the answer): one row per logit scale, columns (n, quantile)."""
    columns = {}
    for size in sizes:
        errors = [marginal_errors(sinkhorn(torch.randn(draws, size, size, generator=generator)
                                           .double() * s, n_iter, early_stop=False))[0]
                  for s in scales]
        for name, q in QUANTILES.items():
            columns[(f"n = {size}", name)] = [float(torch.quantile(e, q)) for e in errors]
    return pd.DataFrame(columns, index=pd.Index(scales, name="σ"))


def error_sentence(table: pd.DataFrame, n: int, scales) -> str:
    """What the prose quotes of `error_after`'s table: at the paper's length, the median, 99%
    quantile and largest row error at the first of `scales`, then the median and largest at
    each further scale; the largest at this run's length `n` where it differs."""
    def at(size, s, name):
        return quoted(table.loc[s, (f"n = {size}", name)])

    missing = [s for s in scales if s not in table.index]
    if missing:
        raise ValueError(f"the quoted logit scales {missing} are not rows of the error table "
                         f"(its scales: {list(table.index)}); quote scales it computed")
    first, *rest = scales
    text = (f"At the paper's length *n* = {PAPER_N} and logit scale {first:g} the median row "
            f"error is {at(PAPER_N, first, 'median')}, its 99% quantile "
            f"{at(PAPER_N, first, '99%')} and the largest over all draws "
            f"{at(PAPER_N, first, 'largest')}.")
    if not rest:
        return text
    medians = table.loc[list(scales), (f"n = {PAPER_N}", "median")]
    trend = ("The error grows with the logit scale" if medians.is_monotonic_increasing
             else "At larger logit scales")
    quotes = ", ".join(f"at σ = {s:g} the median is {at(PAPER_N, s, 'median')} and the largest "
                       f"{at(PAPER_N, s, 'largest')}" for s in rest)
    here = ("" if n == PAPER_N else f" (at this profile's *n* = {n}, largest: "
            + " and ".join(at(n, s, "largest") for s in rest) + ")")
    return f"{text} {trend}: {quotes}{here}."


def entropy_gain(entropies: pd.DataFrame, scale: float) -> float:
    """Mean row entropy of Sinkhorn minus softmax (nats) at logit `scale` (`entropy_table`)."""
    means = entropies[entropies["scale"] == scale].groupby("normalization")["entropy"].mean()
    return float(means["sinkhorn"] - means["softmax"])


def entropy_table(scales, draws: int, n: int, generator: torch.Generator) -> pd.DataFrame:
    """Mean row entropy (nats) of softmax and Sinkhorn attention of the same random logits,
    one row per (scale, normalization, draw): each draw is an independent matrix."""
    frames = []
    for s in scales:
        logits = torch.randn(draws, n, n, generator=generator) * s
        for name, fn in (("softmax", softmax), ("sinkhorn", sinkhorn)):
            frames.append(pd.DataFrame({"scale": s, "normalization": name,
                                        "draw": range(draws), "entropy": row_entropy(fn(logits))}))
    return pd.concat(frames, ignore_index=True)


def layers_to(summary: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """First layer at which the geometric-mean residual is below `threshold`, per logit
    scale (rows) and normalization (columns); a layer whose values are mostly at the
    rounding floor (no mean, see `log_summary`) counts as below. NaN where none is."""
    at_floor = summary["mean"].isna() & mostly_at_floor(summary["at_floor"],
                                                        summary["at_floor"] + summary["count"])
    below = summary[(summary["mean"] < np.log10(threshold)) | at_floor]
    first = below.groupby(["normalization", "logit_std"])["layer"].min()
    return first.unstack("normalization").reindex(sorted(summary["logit_std"].unique()))


def reach_gaps(reach: pd.DataFrame) -> dict[str, int]:
    """From `layers_to`: the largest difference in layers between the two normalizations,
    at how many logit scales each one reaches the threshold later, the latest layer at which
    any configuration reaches it, and how many never do (-1 for the latest if none does)."""
    gap = reach["sinkhorn"] - reach["softmax"]
    reached = reach.stack().dropna()
    return {"max_gap": int(gap.abs().max()), "sinkhorn_later": int((gap > 0).sum()),
            "softmax_later": int((gap < 0).sum()), "scales": len(reach),
            "latest": int(reached.max()) if len(reached) else -1,
            "never": int(reach.isna().to_numpy().sum())}


def counted(k: int, noun: str) -> str:
    """'no scales', '1 scale', '3 scales' (`noun` singular, plural by an s)."""
    return f"{'no' if k == 0 else k} {noun}{'' if k == 1 else 's'}"


def reach_sentence(reach: pd.DataFrame) -> str:
    """What `reach_gaps` says, in words with their plurals: how many layers apart the two
    normalizations reach the threshold at most, and at how many logit scales each is later."""
    g = reach_gaps(reach)
    if g["max_gap"] == 0:
        return f"The two normalizations reach it at the same layer at all {g['scales']} scales."
    later = [(name, k) for name, k in (("Sinkhorn", g["sinkhorn_later"]),
                                        ("softmax", g["softmax_later"])) if k]
    return (f"The two normalizations reach it at most {counted(g['max_gap'], 'layer')} apart; "
            + " and ".join(f"{name}{' reaches it later' if i == 0 else ''} at {k} of the "
                           f"{g['scales']} scales" for i, (name, k) in enumerate(later)) + ".")


def entropy_comparison(entropies: pd.DataFrame) -> pd.DataFrame:
    """Row entropy, Sinkhorn / softmax, per logit scale over the independent draws of
    `entropy_table` (`stats.compare_table`, unit "draw", parity margin
    `registry.ENTROPY_MARGIN`; intervals simultaneous over the scales)."""
    return compare_table(entropies, unit="draw", by=["scale"], value="entropy",
                         margin=ENTROPY_MARGIN)


ENTROPY_PARITY = f"(Parity for entropies: within a factor {1 + ENTROPY_MARGIN:g}.)"


def entropy_sentence(entropy: pd.DataFrame, x: str = "scale", noun: str = "logit scale",
                     margin_note: bool = True) -> str:
    """`stats.describe` of an entropy comparison over `x` (logit scales, layers), with the
    parity margin (`ENTROPY_PARITY`) unless `margin_note` is False."""
    return describe(entropy, x, noun) + (f" {ENTROPY_PARITY}" if margin_note else "")


def registered_entropy(entropies: pd.DataFrame) -> pd.DataFrame:
    """`entropy_table` as the data of C9's random-logit test (`primary_tests.run_part`): one row per
    (logit scale, draw) with the two normalizations' entropies."""
    wide = unit_values(entropies, "draw", ["scale"], "entropy")
    return wide.assign(task=wide["scale"].map(scale_label)).rename(columns={"draw": "unit"})


def claims(after: pd.DataFrame, entropies: pd.DataFrame, profile: Profile) -> list[Claim]:
    """C2a on random logits (the 99% quantile over random matrices of the row error after 50
    iterations, at n = `registry.PAPER_N` and every logit scale up to `registry.PAPER_SCALE`,
    below `verdicts.TOLERANCE`: the same check as on trained logits) and C9 on random logits
    (the registered test on `entropy_table`)."""
    share = (f"n = {PAPER_N}", f"{SHARE:.0%}")
    q99 = float(after.loc[after.index <= PAPER_SCALE, share].max())
    worst = float(after.loc[after.index <= PAPER_SCALE, (f"n = {PAPER_N}", "largest")].max())
    column = (f"n = {PAPER_N}", "largest")
    median = after[(f"n = {PAPER_N}", "median")]
    entropy = run_part("C9", "random logits", registered_entropy(entropies), profile)
    return [
        Claim.of("C2a", [marginal_check("random logits", "random logits", q99)],
                 f"Row error after 50 iterations at n = {PAPER_N} (each random matrix counted "
                 f"with its worst row), logit scales up to {PAPER_SCALE:g}: {SHARE:.0%} quantile "
                 f"over the random draws {quoted(q99)}, largest {quoted(worst)} "
                 f"(check: that quantile "
                 f"below {significant(TOLERANCE)}, thresholds of the book's choosing: the paper states "
                 f"none). It grows with the logit scale: at σ = {after.index[-1]:g} the "
                 f"median is {quoted(median.iloc[-1])} and the largest "
                 f"{quoted(after[column].iloc[-1])}.", figure="fig-convergence"),
        Claim.of("C9", entropy, "Row entropy, Sinkhorn against softmax over independent "
                 "random matrices, per logit scale: "
                 + results_sentence(entropy, "matrices")
                 + f" {ENTROPY_PARITY}", figure="fig-entropy"),
    ]
