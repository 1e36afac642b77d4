"""Chapter 2's experiment module: convergence tables, the error after 50 iterations, the
entropy comparison over independent draws, and the layers-to-collapse numbers."""

import numpy as np
import pytest
import pandas as pd
import torch

from rankcollapse.profiles import get_profile
from rankcollapse.profiles import SinkhornSettings

ENTROPY_SCALES = SinkhornSettings().entropy_scales  # C9's logit scales
from rankcollapse.experiments.sinkhorn_vs_softmax import (claims, convergence,
                                                          convergence_curves,
                                                          entropy_comparison, entropy_table,
                                                          error_after, layers_to, reach_gaps)


def test_convergence_alternates_which_marginal_is_exact():
    table = convergence(torch.randn(4, 8, 8, generator=torch.Generator().manual_seed(0)), 6)
    assert list(table.half_steps) == [1, 2, 3, 4, 5, 6]
    odd, even = table[table.half_steps % 2 == 1], table[table.half_steps % 2 == 0]
    assert (odd.row_error < 1e-6).all() and (even.column_error < 1e-6).all()
    assert even.row_error.is_monotonic_decreasing
    curves = convergence_curves([0.5, 2.0], 3, 6, 4, torch.Generator().manual_seed(1))
    assert set(curves.scale) == {0.5, 2.0} and len(curves) == 8


def test_error_after_gives_quantiles_that_grow_with_the_logit_scale():
    after = error_after(50, [8], [0.5, 5.0], 64, torch.Generator().manual_seed(0))
    assert list(after.columns) == [("n = 8", q) for q in ("median", "90%", "99%", "largest")]
    assert list(after.index) == [0.5, 5.0]
    assert after.loc[0.5, ("n = 8", "largest")] < 1e-12 < after.loc[5.0, ("n = 8", "largest")]
    row = after.loc[5.0, "n = 8"]
    assert row["median"] <= row["90%"] <= row["99%"] <= row["largest"]


def test_entropy_table_pairs_both_normalizations_on_the_same_draws():
    table = entropy_table([0.1, 4.0], 6, 8, torch.Generator().manual_seed(0))
    assert len(table) == 2 * 2 * 6 and set(table.draw) == set(range(6))
    small = table[table.scale == 0.1].pivot(index="draw", columns="normalization",
                                            values="entropy")
    np.testing.assert_allclose(small.softmax, small.sinkhorn, rtol=1e-3)  # both near log n
    assert small.softmax.max() <= np.log(8) + 1e-6


def test_layers_to_and_reach_gaps():
    summary = pd.DataFrame({
        "normalization": ["softmax"] * 3 + ["sinkhorn"] * 3 + ["softmax"] * 3 + ["sinkhorn"] * 3,
        "logit_std": [1.0] * 6 + [4.0] * 6, "layer": [0, 1, 2] * 4,
        "mean": [0, -9, -20, 0, -5, -12, 0, -3, -9, 0, -9, -20],
        "count": 10, "at_floor": 0})
    reach = layers_to(summary, 1e-8)
    assert reach.loc[1.0, "softmax"] == 1 and reach.loc[1.0, "sinkhorn"] == 2
    assert reach.loc[4.0, "softmax"] == 2 and reach.loc[4.0, "sinkhorn"] == 1
    assert reach_gaps(reach) == {"max_gap": 1, "sinkhorn_later": 1, "softmax_later": 1,
                                 "scales": 2, "latest": 2, "never": 0}
    # a layer mostly at the rounding floor has no mean but has collapsed: it counts as reached
    floored = summary.copy()
    floored.loc[4, ["mean", "count", "at_floor"]] = [np.nan, 2, 8]  # sinkhorn, scale 1, layer 1
    assert layers_to(floored, 1e-8).loc[1.0, "sinkhorn"] == 1


def test_claims_c2a_and_c9_follow_the_numbers():
    after = pd.DataFrame({("n = 128", "median"): [1e-13, 1e-10, 1e-5],
                          ("n = 128", "99%"): [1e-12, 1e-9, 1e-4],
                          ("n = 128", "largest"): [1e-12, 1e-7, 1e-3]},
                         index=pd.Index([1.0, 2.0, 5.0]))
    rng = np.random.default_rng(0)
    entropies = pd.concat([pd.DataFrame({"scale": s, "normalization": name, "draw": range(20),
                                         "entropy": base * (gain if name == "sinkhorn" else 1)})
                           for s, gain in zip(ENTROPY_SCALES, [1.0, 1.5, 1.5, 1.5, 1.5])
                           for base in [1 + rng.random(20)]
                           for name in ("softmax", "sinkhorn")])
    c2a, c9 = claims(after, entropies, get_profile("three-task"))
    # the 99% quantile decides (1e-9), not the single worst draw (1e-7), as on trained logits
    assert c2a.verdict == "reproduced" and "99% quantile over the random draws 10⁻⁹" in c2a.finding
    assert "largest 10⁻⁷" in c2a.finding and c2a.results[0].number == 1e-9
    assert [r.found for r in c9.results] == ["parity"] + ["more"] * 4
    assert c9.verdict == "partly reproduced"  # parity at the first scale decides against
    described = entropy_comparison(entropies)  # the chapter's description: the same findings
    assert list(described.verdict) == ["parity"] + ["more"] * 4
    assert described.level.tolist() == pytest.approx([1 - 0.05 / 5] * 5)
    assert c9.results[1].level == pytest.approx(1 - 0.05 / 8)  # C9's family: 5 scales, 3 tasks
    worse = after.copy()
    worse[("n = 128", "99%")] = [1e-12, 2e-6, 1e-4]
    assert claims(worse, entropies, get_profile("three-task"))[0].verdict == "not reproduced"


def test_the_reach_sentence_names_only_the_normalization_that_is_later():
    from rankcollapse.experiments.sinkhorn_vs_softmax import reach_sentence

    reach = pd.DataFrame({"softmax": [3, 4, 5, 5], "sinkhorn": [3, 3, 4, 5]})
    assert reach_sentence(reach) == ("The two normalizations reach it at most 1 layer apart; "
                                     "softmax reaches it later at 2 of the 4 scales.")
    both = pd.DataFrame({"softmax": [3, 4], "sinkhorn": [4, 3]})
    assert reach_sentence(both).endswith("Sinkhorn reaches it later at 1 of the 2 scales and "
                                         "softmax at 1 of the 2 scales.")


def test_error_sentence_quotes_the_table_at_the_scales_asked():
    """The prose's quotes come from the table's cells: at the paper's n the first scale's
    median, 99% and largest, then each further scale; this run's n where it differs."""
    from rankcollapse.experiments.sinkhorn_vs_softmax import error_sentence
    from rankcollapse.registry import PAPER_N
    scales = [2.0, 3.0]
    columns = [(f"n = {size}", q) for size in (8, PAPER_N)
               for q in ("median", "90%", "99%", "largest")]
    table = pd.DataFrame([[1e-3 * (i + 1) * s for i in range(8)] for s in scales],
                         index=pd.Index(scales, name="σ"), columns=pd.MultiIndex.from_tuples(columns))
    text = error_sentence(table, 8, scales)
    assert text.startswith(f"At the paper's length *n* = {PAPER_N} and logit scale 2 the median "
                           "row error is 0.010, its 99% quantile 0.014 and the largest over all "
                           "draws 0.016.")
    assert "grows with the logit scale: at σ = 3 the median is 0.015 and the largest 0.024" in text
    assert text.endswith("(at this profile's *n* = 8, largest: 0.012).")
    with pytest.raises(ValueError, match=r"quoted logit scales \[5.0\]"):
        error_sentence(table, 8, [2.0, 5.0])


def test_entropy_gain_is_the_difference_of_the_means_at_one_scale():
    from rankcollapse.experiments.sinkhorn_vs_softmax import entropy_gain
    table = pd.DataFrame({"scale": [1.0] * 4 + [3.0] * 4,
                          "normalization": ["softmax", "softmax", "sinkhorn", "sinkhorn"] * 2,
                          "entropy": [1.0, 2.0, 2.0, 3.0, 0.5, 0.7, 1.0, 1.4]})
    assert entropy_gain(table, 1.0) == pytest.approx(1.0)
    assert entropy_gain(table, 3.0) == pytest.approx(0.6)
