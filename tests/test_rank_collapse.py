import math

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.experiments import rank_collapse as rc
from rankcollapse.experiments.rank_collapse import (claims, digits_lost, entropy_summary,
                                                    final_residuals, growth_factors,
                                                    layernorm_rank_check, layernorm_summary,
                                                    log_summary, low_affine_rank_tokens,
                                                    precise_collapse, precise_digits_lost, sweep)
from rankcollapse.measures import affine_rank, residual, row_entropy
from rankcollapse.theory import attention_layer, random_head


def test_row_entropy_extremes():
    n = 6
    assert row_entropy(torch.full((n, n), 1 / n)).item() == pytest.approx(math.log(n))
    assert row_entropy(torch.eye(n)).item() == pytest.approx(0.0, abs=1e-12)


def test_affine_rank_of_constructed_tokens():
    gen = torch.Generator().manual_seed(0)
    for k in (1, 3, 5):
        assert affine_rank(low_affine_rank_tokens(12, 20, k, gen)).item() == k
    assert affine_rank(torch.ones(4, 3)).item() == 0


def test_layernorm_changes_affine_rank_but_not_the_centred_linear_rank():
    """The finding of chapter 1: affine rank k -> k + 1, linear rank of centred tokens kept."""
    table = layernorm_rank_check(n_tokens=10, d_model=16, ranks=[1, 3], draws=5, seed=0)
    assert (table.affine_before == table.rank_in).all()
    assert (table.affine_after == table.rank_in + 1).all()
    assert (table.linear_after == table.linear_before).all()


def test_sweep_shows_pure_attention_collapse_and_skip_preventing_it():
    configs = [dict(normalization="softmax", logit_std=1.0, label="pure"),
               dict(normalization="softmax", logit_std=1.0, skip=True, label="skip")]
    df = sweep(configs, n_samples=4, n_tokens=8, d_model=8, n_heads=2, depth=6, n_iter=10,
               seed=0, device=torch.device("cpu"), dtype=torch.float64)
    assert set(df.columns) >= {"layer", "sample", "residual", "entropy", "label"}
    assert df.layer.max() == 6 and len(df) == 2 * 7 * 4
    last = df[df.layer == 6].groupby("label")["residual"].median()
    assert last["pure"] < 1e-8 < 1e-2 < last["skip"]
    summary = log_summary(df, ["label", "layer"], floor=2.2e-15)
    assert {"mean", "std", "count"} <= set(summary.columns)


def test_sweep_gives_both_normalizations_the_same_weights():
    configs = [dict(normalization=n, logit_std=1e-6) for n in ("softmax", "sinkhorn")]
    df = sweep(configs, n_samples=3, n_tokens=6, d_model=8, n_heads=2, depth=2, n_iter=30,
               seed=0, device=torch.device("cpu"), dtype=torch.float64, weight_draws=2)
    assert set(df.draw) == {0, 1} and len(df) == 2 * 2 * 3 * 3
    # With vanishing logits both normalizations are uniform: identical networks give
    # identical residuals; different weight draws do not.
    soft, sink = (df[df.normalization == n].residual.to_numpy() for n in ("softmax", "sinkhorn"))
    np.testing.assert_allclose(soft, sink, rtol=1e-6, atol=1e-12)
    by_draw = df[(df.normalization == "softmax") & (df.layer == 1)].groupby("draw").residual.mean()
    assert by_draw[0] != by_draw[1]


def test_log_summary_censors_values_at_the_floor_and_counts_them():
    df = pd.DataFrame({"g": [0] * 4 + [1] * 4, "residual": [1e-2, 1e-4, 0.0, 1e-20,
                                                             1e-20, 0.0, 1e-18, 1e-3]})
    s = log_summary(df, ["g"], floor=1e-15).set_index("g")
    # the two values at the floor enter at 1e-15: (-2 - 4 - 15 - 15) / 4
    assert s.loc[0, "mean"] == pytest.approx(-9.0) and s.loc[0, "count"] == 2
    assert s.loc[0, "at_floor"] == 2  # exactly half: still a mean
    assert np.isnan(s.loc[1, "mean"]) and s.loc[1, "at_floor"] == 3  # mostly floor: no mean
    with pytest.raises(ValueError, match="positive rounding floor"):
        log_summary(df, ["g"])


def test_precise_collapse_agrees_with_float64_and_skips_layers_at_the_floor():
    table = precise_collapse([1.0], n_tokens=6, d_model=6, depth=3, draws=2, seed=1, digits=60)
    assert set(table.draw) == {0, 1} and set(table.layer) == {0, 1, 2, 3}
    gen = torch.Generator().manual_seed(1 + 104729)  # the first draw's tokens and weights
    x = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    head = random_head(6, 6, 1.0, gen)
    y = attention_layer(x, head, "softmax", n_iter=50)
    plain = np.log10(float(torch.linalg.matrix_norm(residual(y), 2) / torch.linalg.matrix_norm(y, 2)))
    first = table.query("draw == 0 and layer == 1")["log10_relative"].item()
    assert first == pytest.approx(plain, abs=1e-9)
    lost = precise_digits_lost(table, floor_log10=-40)
    assert (lost["layer"] > 0).all() and (lost["draws"] == 2).all()
    deepest = table.groupby("layer")["log10_relative"].min()  # every draw above the floor
    assert set(lost["layer"]) == set(deepest[(deepest.index > 0) & (deepest > -40)].index)
    assert set(precise_digits_lost(table, floor_log10=-3)["layer"]) == {1, 2}  # cut at 3 digits
    assert (lost["low"] <= lost["lost"]).all() and (lost["lost"] <= lost["high"]).all()


def test_growth_factor_of_a_cubic_law_is_three():
    """r_{l+1} = r_l^3 triples the digits lost per layer; a linear law keeps them constant."""
    layers = np.arange(5)
    cubic = pd.DataFrame({"logit_std": 1.0, "layer": layers, "mean": -0.5 * 3.0 ** layers})
    linear = pd.DataFrame({"logit_std": 2.0, "layer": layers, "mean": -0.5 * (layers + 1)})
    digits = digits_lost(pd.concat([cubic, linear]), floor=1e-300)
    assert set(digits.layer) == {1, 2, 3, 4}
    growth = growth_factors(digits)
    assert growth[1.0] == pytest.approx(3.0)
    assert 1.0 < growth[2.0] < (5 / 2) ** (1 / 3)  # 1 -> 2.5 digits: slowing, not constant
    floor_cut = digits_lost(cubic, floor=1e-10)  # -1.5, -4.5, -13.5: the last is cut
    assert list(floor_cut.layer) == [1, 2]


def test_final_residuals_entropy_and_layernorm_summaries():
    summary = pd.DataFrame({"label": ["a", "a", "b", "b"], "layer": [0, 3, 0, 3],
                            "mean": [0.0, -8.0, 0.0, -0.5]})
    final = final_residuals(summary, 3)
    assert final["a"] == pytest.approx(1e-8) and final["b"] == pytest.approx(10**-0.5)
    ent = entropy_summary(pd.DataFrame({"label": "a", "layer": [0, 1, 1], "entropy":
                                        [np.nan, 1.0, 3.0]}), ["label", "layer"])
    assert len(ent) == 1 and ent["mean"].item() == 2.0
    check = layernorm_rank_check(n_tokens=10, d_model=16, ranks=[2], draws=3, seed=0)
    table, counts = layernorm_summary(check)
    assert counts == {"affine_changed": 3, "linear_changed": 0, "total": 3}
    assert rc.layernorm_sentence(counts) == (
        "**The statement, as we read it, does not hold**: in 3 of 3 draws the affine rank "
        "changed. The linear rank of the centred tokens was kept in every draw.")
    assert rc.layernorm_sentence({"affine_changed": 0, "linear_changed": 1, "total": 4}) == (
        "**The statement holds in all 4 draws**: the affine rank never changed. The linear "
        "rank of the centred tokens was kept in 3 of 4 draws (1 changed).")
    assert table.loc[2, "affine rank after"] == "3–3"


def test_claim_c1_follows_the_final_residuals():
    growth = pd.Series([3.5, 4.0])
    assert claims(pd.Series([1e-12, 1e-10]), 0.5, growth)[0].verdict == "reproduced"
    assert claims(pd.Series([1e-12, 1e-3]), 0.5, growth)[0].verdict == "not reproduced"


def test_growth_window_keeps_the_layers_past_one_digit_lost_as_a_plain_loop():
    """The fit window is every layer with at least GROWTH_MIN_LOST digits lost; fitted on it,
    a cubic law with a slow start gives 3, while the whole curve does not."""
    lost = pd.DataFrame({"logit_std": [1.0] * 6 + [2.0] * 4, "layer": [*range(1, 7), *range(1, 5)],
                         "lost": [0.2, 0.7, 1.5, 4.5, 13.5, 40.5, 0.9, 1.0, 3.0, 9.0]})
    window = rc.growth_window(lost)
    expected = [i for i, row in lost.iterrows() if row["lost"] >= rc.GROWTH_MIN_LOST]
    assert list(window.index) == expected
    assert rc.growth_factors(window).to_numpy() == pytest.approx([3.0, 3.0])
    assert rc.growth_factors(lost)[1.0] != pytest.approx(3.0, abs=0.1)
    assert rc.fit_points(window).to_dict() == {1.0: 4, 2.0: 3}


def test_layers_above_floor_and_deepest_drawn_count_as_a_loop():
    floor = 1e-15
    summary = pd.DataFrame({"logit_std": [1.0] * 4 + [2.0] * 4, "layer": [0, 1, 2, 3] * 2,
                            "mean": [0.0, -3.0, -9.0, np.nan, 0.0, -5.0, -16.0, np.nan]})
    counts = {}
    for _, row in summary.iterrows():
        if row["layer"] > 0 and row["mean"] > np.log10(floor):
            counts[row["logit_std"]] = counts.get(row["logit_std"], 0) + 1
    assert rc.layers_above_floor(summary, floor=floor) == max(counts.values()) == 2
    assert rc.deepest_drawn(summary) == 2  # layer 2 has a mean (at scale 2 below the floor)
    assert rc.deepest_drawn(summary.assign(mean=np.nan)) == 0


def test_contrast_sentence_says_what_the_numbers_say():
    entropy = pd.Series({"uniform": 3.4, "peaked": 0.7})
    residual = pd.Series({"peaked": 0.5, "uniform": np.nan})
    text = rc.contrast_sentence(entropy, residual, log_n=3.5)
    assert "*uniform*: 3.40 nats (97% of log *n*)" in text and "*peaked*: 0.70 nats (20%" in text
    assert "above 0.01 after the last layer: *peaked* (0.5); collapsing below it: *uniform* " \
        "(at the rounding floor)" in text
    assert "collapsing below it: none" in rc.contrast_sentence(entropy, residual.fillna(0.2), 3.5)


def test_example_table_and_contrast_configs():
    x = rc.example_tokens()
    table = rc.example_table(x)
    assert list(table["token"]) == [0, 1, 2, 3]
    mean = np.mean(rc.EXAMPLE_TOKENS, axis=0)
    assert np.allclose(table["res(X)"][1], np.round(np.array(rc.EXAMPLE_TOKENS[1]) - mean, 3))
    low, high = rc.contrast_configs(0.1, 4.0)
    assert low == dict(normalization="softmax", logit_std=0.1, label="pure, logit scale 0.1")
    assert high["skip"] and high["logit_std"] == 4.0 and high["label"] == "with skip, logit scale 4"
    assert rc.GROWTH_MIN_RESIDUAL == pytest.approx(10 ** -rc.GROWTH_MIN_LOST)
