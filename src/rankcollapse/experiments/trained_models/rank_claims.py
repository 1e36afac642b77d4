"""Chapter 5's claims on the trained models: C4a-C4e on the hidden states, the attention
output and attention path products (the registered tests), C2a and C9 on the trained
attention itself, and the descriptive tables and words they quote."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...claim_rows import Claim
from ...measures import FLOOR
from ...names import display
from ...primary_tests import collapse_layers, run_part
from ...profiles import Profile
from ...recording import per_unit
from ...registry import (COLLAPSE_LEVEL, ENTROPY_MARGIN, NO_SKIPS, SKIPS, registered,
                         registered_depth)
from ...stats import FOUND, WORDS, compare_table, describe, mostly_at_floor, ranges
from ...verdicts import SHARE, TOLERANCE, Result, marginal_check, results_sentence
from .experiment import Analysis


def _layer_scales(attention: pd.DataFrame) -> pd.Series:
    """Median over inputs and seeds of each layer's logit standard deviation, indexed by
    (task, normalization, layer)."""
    return attention.groupby(["task", "normalization", "layer"], sort=False)["logit_std"].median()


def logit_scales(attention: pd.DataFrame, titles: dict[str, str]) -> pd.DataFrame:
    """The trained logit scale (`_layer_scales`, from `attention_statistics`): one row per
    layer, one column per task and normalization (a deep stack reads down the page)."""
    wide = _layer_scales(attention).unstack("layer")
    wide.index = [f"{titles[t]}, {display(n)}" for t, n in wide.index]
    wide.columns = [f"layer {c}" for c in wide.columns]
    return wide.T


def scale_words(attention: pd.DataFrame, titles: dict[str, str]) -> str:
    """'text: softmax 0.41–0.93, Sinkhorn 0.38–0.88; ...': per task, the range over layers of
    each normalization's trained logit scale (`_layer_scales`)."""
    return "; ".join(
        f"{titles[task]}: " + ", ".join(
            f"{display(name)} {g.min():.2g}–{g.max():.2g}"
            for name, g in per_task.groupby(level="normalization", sort=False))
        for task, per_task in _layer_scales(attention).groupby(level="task", sort=False))



# The figures of the hidden-state residuals (the chapter's names): the ratio Sinkhorn /
# softmax per layer, which the tests read, and the residuals themselves.
RESIDUAL_FIGURES = "fig-trained-ratio, fig-trained-ratio-no-skip, fig-trained-residual"

# Inference variants in columns of the residual figure: with skip connections the residual
# stays within a decade, without it falls by many.
RESIDUAL_GROUPS = {"with skip connections": {"full model": "-", "without FFN": "--"},
                   "without skip connections": {"without skip": "-",
                                                "pure attention (no FFN, no skip)": "--"}}


def where_table(comparisons: pd.DataFrame, x: str, by: list[str]) -> pd.DataFrame:
    """Where each result of a `stats.compare_table` holds, as ranges of `x` ('1–3, 7'): one
    row per group of `by`, one column per result found somewhere (description)."""
    rows = []
    for key, g in comparisons.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)),
                     **{WORDS[f]: ranges(g.loc[g["verdict"] == f, x])
                        for f in FOUND if (g["verdict"] == f).any()}})
    table = pd.DataFrame(rows)
    return table[by + [WORDS[f] for f in FOUND if WORDS[f] in table]].fillna("–")


def claims_table(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Per task and variant, from `layer_comparisons`: at how many layers each result holds
    (more, less, parity, neither), how many layers have more than half their seeds tied at
    the rounding floor, and the mean log10 ratio over the layers and the layer where it is
    largest."""
    rows = []
    for (task, variant), g in comparisons.groupby(["task", "variant"], sort=False):
        log_ratio = np.log10(g["ratio"])
        counts = g["verdict"].value_counts()
        rows.append({"task": task, "variant": variant,
                     **{f"layers_{v}": int(counts.get(v, 0)) for v in ("more", "less", "parity")},
                     "layers_neither": int(len(g) - sum(counts.get(v, 0)
                                                        for v in ("more", "less", "parity"))),
                     "layers_at_floor": int(mostly_at_floor(g["tied"], g["units"]).sum()),
                     "layers": len(g), "mean_log10_ratio": float(log_ratio.mean()),
                     "largest_ratio_layer": int(g.loc[log_ratio.idxmax(), "layer"]),
                     "largest_log10_ratio": float(log_ratio.max())})
    return pd.DataFrame(rows)



def layer_sentences(comparisons: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (task, variant), `stats.describe` of the layer comparisons."""
    return {key: describe(g, "layer", "layer")
            for key, g in comparisons.groupby(["task", "variant"], sort=False)}


def path_comparisons(paths: pd.DataFrame, unit: str = "seed") -> pd.DataFrame:
    """Sinkhorn / softmax rank-1 residual of attention path products per setting and depth,
    compared over the training seeds (description): each seed's value is the median over
    its paths (the same paths are sampled in both models); intervals simultaneous over the
    depths of each setting."""
    return compare_table(paths, unit=unit, by=["setting", "depth"], within=["setting"],
                         floor=FLOOR)



def estimate(claim_id: str, part: str) -> str:
    """What the number of a registered part's test is, in words (`Part.estimate`)."""
    return registered(claim_id).part(part).estimate()


def collapse_words(collapse: dict[tuple[str, str], int], titles: dict[str, str],
                   profile: Profile, variants: tuple[str, ...]) -> str:
    """'Text: k = 3 of 6 (full model), ...': the last layer before the softmax models'
    collapse to half, per task and variant, in words."""
    said = []
    for task in dict.fromkeys(t for t, _ in collapse):
        depth = registered_depth(task, profile)
        ks = ", ".join(f"k = {collapse[(task, v)]} ({v})" for v in variants
                       if (task, v) in collapse)
        said.append(f"{titles.get(task, task)}: {ks} of {depth} layers")
    return "; ".join(said)


def claims(analysis: Analysis, titles: dict[str, str], profile: Profile) -> list[Claim]:
    """C4a-C4e on this run: the registered tests (`registry`) on the hidden states (C4a;
    early against late layers and before against after the softmax models' collapse to
    half, C4b; with skips against without, each before its own collapse, C4c), the
    attention sub-layer's output (C4d) and attention path products (C4e) of the trained
    models. The collapse layers come from the softmax models' relative residual
    (`primary_tests.collapse_layers`)."""
    hidden = per_unit(analysis.hidden)
    paths = per_unit(analysis.paths, position="depth")
    collapse = collapse_layers(per_unit(analysis.hidden, "relative"), profile)
    c4b = (run_part("C4b", "trained models, by relative depth", hidden, profile, titles)
           + run_part("C4b", "trained models, by collapse", hidden, profile, titles, collapse))
    tested = {"C4a": run_part("C4a", "trained models", hidden, profile, titles),
              "C4b": c4b,
              "C4c": run_part("C4c", "trained models, at matched residual level", hidden, profile,
                         titles, collapse),
              "C4d": run_part("C4d", "trained models", per_unit(analysis.attention_output),
                         profile, titles),
              "C4e": run_part("C4e", "trained models", paths, profile, titles)}

    def with_requirement(results: list[Result], where: str) -> str:
        several = len({r.part for r in results}) > 1  # C4b: say which split each is of
        return (f"Whether Sinkhorn is ahead {where} at all (the condition), Sinkhorn / "
                "softmax there: " + "; ".join(
                    (f"{r.part.removeprefix('trained models, ')}, " if several else "")
                    + f"{r.task}: {WORDS[r.requirement]}" for r in results if r.requirement)
                + ".") if any(r.requirement for r in results) else ""

    def part_sentence(part: str) -> str:
        return results_sentence([r for r in c4b if r.part == part], "seeds",
                                estimate("C4b", part))

    depth = max(t.depth for t in profile.tasks.values())
    level = f"{COLLAPSE_LEVEL:g}"
    windows = (f"the last layer k before the softmax models' relative residual (to the "
               f"input's, geometric mean over seeds) first falls below {level}, per task: ")
    return [
        Claim.of("C4a", tested["C4a"], f"Complete models, layers 1–{depth}, Sinkhorn / "
                 "softmax: " + results_sentence(tested["C4a"]) + " The trained logit scale "
                 "(median standard deviation of the logits, lowest–highest layer): "
                 + scale_words(analysis.attention, titles) + ".", figure=RESIDUAL_FIGURES),
        Claim.of("C4b", c4b, "Complete models. By relative depth, layers 1–L/2 against "
                 "L/2+1–L: " + part_sentence("trained models, by relative depth")
                 + " By collapse, layers 1–k against k+1–L, with " + windows
                 + collapse_words(collapse, titles, profile, ("full model",)) + ": "
                 + part_sentence("trained models, by collapse") + " "
                 + with_requirement(c4b, "in the first selection"), figure=RESIDUAL_FIGURES),
        Claim.of("C4c", tested["C4c"], "Each variant over its own layers 1–k before the "
                 "softmax models' collapse to half, not at matched layer indices ("
                 + windows + collapse_words(collapse, titles, profile, SKIPS + NO_SKIPS)
                 + "), tested on the log-ratio scale: "
                 + results_sentence(tested["C4c"], "seeds",
                                    estimate("C4c", "trained models, at matched residual "
                                                    "level")) + " "
                 + with_requirement(tested["C4c"], "with skips"), figure=RESIDUAL_FIGURES),
        Claim.of("C4d", tested["C4d"], "The attention sub-layer's own output (before the skip "
                 "connection adds the block's input), complete models: "
                 + results_sentence(tested["C4d"]), figure="fig-trained-attention-output"),
        Claim.of("C4e", tested["C4e"], f"Path products of depths 2–{depth} (depth 1 is one "
                 "matrix, not a product), complete models: " + results_sentence(tested["C4e"]),
                 figure="fig-trained-paths"),
    ]


def trained_attention_claims(attention: pd.DataFrame, titles: dict[str, str],
                             profile: Profile) -> list[Claim]:
    """C2a on trained logits (per task, the 99% quantile over the Sinkhorn models' (layer,
    input) attention matrices, each counted with its worst head, of the row error after
    exactly 50 iterations is below `verdicts.TOLERANCE`), with the logit scale of each
    task's layers; and C9 on trained models (the registered entropy test)."""
    sink = attention[attention["normalization"] == "sinkhorn"]
    checks, parts = [], []
    for task, g in sink.groupby("task", sort=False):
        q99 = float(g["marginal_error"].quantile(SHARE))
        checks.append(marginal_check("trained models", titles[task], q99))
        scale = g.groupby("layer")["logit_std"].median()
        parts.append(f"{titles[task]}: {SHARE:.0%} quantile {q99:.1e}, largest "
                     f"{g['marginal_error'].max():.1e}; logit scale {scale.min():.2g}–"
                     f"{scale.max():.2g} over layers")
    entropy = run_part("C9", "trained models", per_unit(attention, "entropy"), profile, titles)
    return [
        Claim.of("C2a", checks, "Row error after exactly 50 iterations of the trained "
                 "Sinkhorn models' own logits, one value per layer and test input (its worst "
                 f"head and row), all seeds (check: the {SHARE:.0%} quantile below "
                 f"{TOLERANCE:g}, thresholds of the book's choosing: the paper states none): "
                 + "; ".join(parts) + ".", figure="fig-trained-attention"),
        Claim.of("C9", entropy, "Row entropy of the complete models' attention, Sinkhorn / "
                 "softmax over seeds, layers 1–L: "
                 + results_sentence(entropy)
                 + f" (Parity for entropies: within a factor {1 + ENTROPY_MARGIN:g}.)",
                 figure="fig-trained-attention"),
    ]
