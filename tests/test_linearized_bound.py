"""Chapter 3's experiment module: the tables agree with the theory, and every number the
chapter states (slopes, the regime's edge, the first-order gap, the claims) is computed as
its docstring says, checked on small constructed cases."""

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.experiments import linearized_bound as lb
from rankcollapse.experiments.linearized_bound import (bound_check, claims, depth_table,
                                                       first_order_gap,
                                                       gap_slope, linearization_errors,
                                                       measured_constants, one_layer_table,
                                                       regime_edge,
                                                       regime_sweep, slopes)
from rankcollapse.stats import loglog_slope
from rankcollapse.theory import random_head

N_ITER = 50  # the paper's iteration count


def small_case(seed=2, n=10, d=8):
    gen = torch.Generator().manual_seed(seed)
    head = random_head(d, 4, 1.0, gen)
    x0 = torch.randn(1, d, generator=gen, dtype=torch.float64).expand(n, d)
    z = torch.randn(n, d, generator=gen, dtype=torch.float64)
    return gen, head, x0, z - z.mean(0)


def test_experiment_tables_agree_with_the_theory_in_the_small_logit_regime():
    gen, head, x0, z = small_case()
    d = 8
    t = one_layer_table(x0, z, [1e-3, 1e-2], head, n_iter=N_ITER)
    assert ((t.output_residual / t.predicted - 1).abs() < 1e-2).all()
    assert (t.output_residual <= t.bound).all()
    stack = depth_table(x0 + 0.05 * z, [random_head(d, 4, 1.0, gen) for _ in range(2)],
                        n_iter=N_ITER)
    above_rounding = stack[stack.log10_residual > -12]
    assert (above_rounding.log10_residual <= above_rounding.log10_bound).all()
    errs = linearization_errors(torch.randn(6, 6, dtype=torch.float64), [1e-3, 1e-2], N_ITER)
    for _, g in errs.groupby("normalization"):
        assert loglog_slope(g.eps, g.error) == pytest.approx(2.0, abs=0.05)


def test_cubic_slopes_constants_and_gap_on_a_real_layer():
    _, head, x0, z = small_case()
    layer = one_layer_table(x0, z, np.logspace(-3, -2, 5), head, n_iter=N_ITER)
    cubic = slopes(layer, "input_residual", "output_residual")
    assert cubic["softmax"] == pytest.approx(3, abs=0.05)
    assert cubic["sinkhorn"] == pytest.approx(3, abs=0.05)
    constants = measured_constants(layer)
    assert 0 < constants["sinkhorn"] <= head.constant(10)  # the norm bound is an upper bound
    gap = first_order_gap(layer)
    assert (gap < 0.1).all() and gap_slope(gap) > 0.5  # the gap vanishes as s -> 0


def test_regime_edge_is_the_first_norm_off_by_more_than_the_tolerance():
    sweep = pd.DataFrame({"normalization": ["softmax"] * 4 + ["sinkhorn"] * 4,
                          "logit_norm": [0.1, 0.5, 1.0, 2.0] * 2,
                          "ratio": [1.0, 1.05, 0.8, 0.5, 1.0, 1.0, 1.02, 0.95]})
    edges = regime_edge(sweep, tolerance=0.1)
    assert edges["softmax"] == (0.5, 1.0)  # within up to 0.5, off from 1.0 on
    assert edges["sinkhorn"][0] == 2.0 and np.isnan(edges["sinkhorn"][1])


def test_regime_sweep_uses_the_one_logit_scale():
    gen, _, x0, z = small_case()
    sweep = regime_sweep(x0, z, [0.09, 9.0], [0.1], 8, 4, gen, N_ITER)
    small, large = sweep.groupby("logit_std")["logit_norm"].mean()
    assert large > 50 * small  # logit norms scale like the logit standard deviation
    np.testing.assert_allclose(sweep.ratio, sweep.output_residual / sweep.predicted)


def test_bound_check_and_claims_follow_the_numbers():
    stacks = pd.DataFrame({"layer": [0, 1, 2, 3], "log10_residual": [0, -3, -9, -20],
                           "log10_bound": [0, -2, -8, -30]})
    holds, points, deepest, slack = bound_check(stacks)  # layer 3 is below the rounding floor
    assert (holds, points, deepest) == (True, 2, 2) and slack == pytest.approx(10.0)
    assert bound_check(stacks.assign(log10_bound=[0, -4, -8, -30]))[0] is False
    sweep = pd.DataFrame({"logit_norm": [0.01, 0.05, 3.0], "looseness": [2.0, 1.5, 0.5]})
    good = claims({"softmax": 3.01, "sinkhorn": 2.98}, (True, 8, 4, 10.0), sweep)
    assert [c.verdict for c in good] == ["reproduced"] * 3
    assert [r.number for r in good[0].results] == [3.01, 2.98]  # one check per normalization
    assert good[1].results[0].number == 10.0  # the smallest bound / measured decided C3b
    assert good[2].results[0].number == 1.5  # the smallest looseness in the regime
    shallow = claims({"softmax": 3.01, "sinkhorn": 2.98}, (True, 4, 2, 10.0), sweep)
    assert shallow[1].verdict == "not testable here" and "layers 1–2;" in shallow[1].finding
    deep = claims({"softmax": 3.0, "sinkhorn": 3.0}, (True, 10, 5, 2.0), sweep, growth=3.02,
                  digits=400)
    assert deep[1].verdict == "reproduced" and "400 significant digits" in deep[1].finding
    assert "multiplies the digits lost by 3.02" in deep[1].finding
    bad = claims({"softmax": 2.5, "sinkhorn": 3.0}, (False, 8, 5, 0.5),
                 sweep.assign(looseness=0.5))
    assert [c.verdict for c in bad] == ["partly reproduced", "not reproduced", "not reproduced"]
    assert claims({"softmax": 3.09, "sinkhorn": 3.0}, (True, 8, 4, 2.0), sweep)[0].verdict == \
        "reproduced"  # a slope within 0.1 of 3
    assert claims({"softmax": 3.11, "sinkhorn": 3.0}, (True, 8, 4, 2.0), sweep)[0].verdict == \
        "partly reproduced"


def test_fit_windows_select_the_documented_sizes():
    """The linearization slope is fitted over eps <= LINEARIZATION_WINDOW and the cubic slope
    over s <= CUBIC_WINDOW: on tables that follow the law only inside the window, the
    slopes are the law's, and they equal a fit over the rows a plain loop selects."""
    eps = np.logspace(-4, 0, 13)
    lin = pd.DataFrame([{"eps": e, "normalization": k,
                         "error": e**2 if e <= lb.LINEARIZATION_WINDOW else 10 * e}
                        for e in eps for k in ("softmax", "sinkhorn")])
    assert lb.linearization_slopes(lin) == pytest.approx({"softmax": 2.0, "sinkhorn": 2.0})
    s = np.logspace(-3, 0.5, 15)
    layer = pd.DataFrame([{"scale": v, "normalization": k, "input_residual": 2 * v,
                           "output_residual": (2 * v) ** 3 if v <= lb.CUBIC_WINDOW else v}
                          for v in s for k in ("softmax", "sinkhorn")])
    rows = [r for _, r in layer.iterrows() if r["scale"] <= lb.CUBIC_WINDOW]
    loop = loglog_slope([r["input_residual"] for r in rows],
                        [r["output_residual"] for r in rows])
    assert lb.cubic_slopes(layer)["softmax"] == pytest.approx(loop) == pytest.approx(3.0)
    whole = slopes(layer, "input_residual", "output_residual")["softmax"]
    assert whole != pytest.approx(3.0, abs=0.1)  # the window matters


def test_gap_and_bound_sentences_follow_the_numbers():
    s = np.array([1e-3, 3e-3, 1e-2, 1e-1])
    falling = pd.Series(0.5 * s, index=s)
    assert lb.gap_sentence(falling).startswith("The relative gap falls as *s* decreases: it "
                                               "goes like *s* to the power 1.00 for *s* ≤ 0.01")
    assert lb.gap_sentence(falling).endswith("agree at first order.")
    assert "does not fall" in lb.gap_sentence(pd.Series(0.5 / s, index=s))
    stacks = pd.DataFrame({"layer": [0, 1, 2, 1, 2], "start": 0.1,
                           "normalization": ["a", "a", "a", "b", "b"],
                           "log10_residual": [-1.0, -3.0, -9.0, -3.0, -9.0],
                           "log10_bound": [-1.0, -2.0, -6.0, -4.0, -6.0]})
    assert lb.bound_sentence(stacks) == ("No: the measured residual is above the bound at 1 of "
                                         "4 (layer, start, normalization) points, layers 1 to 2.")
    assert lb.bound_sentence(stacks[stacks["normalization"] == "a"]).startswith("Yes, at all 2")
    assert lb.bound_sentence(stacks, floor_log10=0.0).startswith("No layer")


def test_named_answers_of_the_regime_edge_and_the_bound_check():
    sweep = pd.DataFrame({"normalization": ["softmax"] * 3, "logit_norm": [0.1, 0.5, 1.0],
                          "ratio": [1.0, 1.05, 0.8]})
    edge = regime_edge(sweep, tolerance=0.1)["softmax"]
    assert (edge.within, edge.off) == (0.5, 1.0)
    stacks = pd.DataFrame({"layer": [0, 1, 2], "log10_residual": [0, -3, -9],
                           "log10_bound": [0, -2, -8]})
    assert bound_check(stacks).deepest == 2 and bound_check(stacks).points == 2


def test_order_guide_has_the_slope_asked_through_the_smallest_value():
    table = pd.DataFrame({"eps": [0.1, 0.01, 1.0, 0.01], "error": [3e-3, 2e-5, 0.4, 5e-5]})
    guide = lb.order_guide(table, "eps", "error", 2)
    np.testing.assert_allclose(guide["x"], [0.01, 0.1, 1.0])
    np.testing.assert_allclose(guide["y"], [2e-5, 2e-3, 2e-1])
    assert set(guide["label"]) == {"slope 2"}
    assert loglog_slope(guide["x"], guide["y"]) == pytest.approx(2)


def test_shared_token_input_and_the_precise_stack():
    x0, z = lb.shared_token_input(5, 3, torch.Generator().manual_seed(0))
    assert x0.shape == z.shape == (5, 3) and x0.dtype == z.dtype == torch.float64
    assert torch.equal(x0, x0[:1].expand(5, 3))  # one token repeated
    assert float(z.mean(0).abs().max()) < 1e-15  # a centred direction
    from rankcollapse.profiles import PreciseStack
    stack = PreciseStack(depth=2, n_tokens=4, digits=60)
    table = lb.precise_stack(stack, [0.1, 0.3], 1.0, torch.Generator().manual_seed(0), n_iter=5)
    assert set(table["start"]) == {0.1, 0.3} and table["layer"].max() == 2
    again = lb.precise_stack(stack, [0.1, 0.3], 1.0, torch.Generator().manual_seed(0), n_iter=5)
    pd.testing.assert_frame_equal(table, again)  # the generator decides every draw
