"""Chapter 4's experiment module: random logits, identity layers, paired paths, pools as the
independent units, and the claims it decides."""

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.experiments.random_matrix_control import (advantage, beyond_control, claims,
                                                             control_sweep,
                                                            hidden_state_test, network_pool,
                                                            paired_paths, pooled_paths,
                                                            random_logits, random_pool,
                                                            verdicts, with_identity_layers)


def test_random_logits_have_the_requested_scale_and_correlation():
    a = random_logits(3, 64, 2, 16, scale=2.0, rho=0.8, generator=torch.Generator().manual_seed(0))
    assert a.shape == (3, 64, 2, 16, 16)
    assert a[2].std().item() == pytest.approx(2.0, rel=0.05)
    corr = np.corrcoef(a[0].flatten().numpy(), a[1].flatten().numpy())[0, 1]
    assert corr == pytest.approx(0.8, abs=0.02)
    with pytest.raises(ValueError, match="rho"):
        random_logits(2, 1, 1, 2, 1.0, 1.0, torch.Generator())


def test_half_of_the_layers_become_identity():
    attn = torch.softmax(torch.randn(6, 2, 1, 4, 4), -1)
    out = with_identity_layers(attn, torch.Generator().manual_seed(0))
    eye = torch.eye(4)
    identity_layers = [l for l in range(6) if torch.equal(out[l], eye.expand_as(out[l]))]
    assert len(identity_layers) == 3
    kept = [l for l in range(6) if l not in identity_layers]
    assert torch.equal(out[kept], attn[kept])


def test_identical_attention_on_shared_paths_gives_ratio_one_and_parity():
    attn = torch.softmax(torch.randn(4, 3, 2, 5, 5, dtype=torch.float64), -1)
    table = paired_paths({"softmax": attn, "sinkhorn": attn}, [1, 2, 3], 20, 0)
    soft, sink = (table[table.normalization == k] for k in ("softmax", "sinkhorn"))
    np.testing.assert_array_equal(soft.residual.to_numpy(), sink.residual.to_numpy())
    assert set(table["sample"]) <= {0, 1, 2}


def test_pools_are_the_units_and_the_identity_variant_is_shared():
    make = random_pool(4, 2, 2, 6, 1.0, identity=True, n_iter=10)
    attn = make(torch.Generator().manual_seed(3))
    eye = torch.eye(6, dtype=torch.float64)
    same = [l for l in range(4) if torch.equal(attn["softmax"][l], eye.expand_as(attn["softmax"][l]))]
    assert len(same) == 2 and all(torch.equal(attn["sinkhorn"][l], attn["softmax"][l]) for l in same)
    table = pooled_paths({"x": make}, 5, [1, 2], 10, seed=0)
    assert set(table.pool) == set(range(5)) and len(table) == 5 * 2 * 2 * 10
    adv = advantage(table)
    assert list(adv.columns[:2]) == ["setting", "depth"] and (adv.units == 5).all()


def test_advantage_compares_pools_not_paths():
    """Two pools whose paths disagree in direction: 1000 paths would make any difference
    'significant'; two pools cannot (fewer than three units: inconclusive)."""
    rows = [{"setting": "s", "depth": 1, "pool": pool, "path": p, "normalization": name,
             "residual": (2.0 if (name == "sinkhorn") == (pool == 0) else 1.0)}
            for pool in (0, 1) for p in range(500) for name in ("softmax", "sinkhorn")]
    adv = advantage(pd.DataFrame(rows))
    assert adv.verdict.item() == "inconclusive" and adv.units.item() == 2


def test_network_pools_share_weights_and_inputs():
    make = network_pool(8, 2, 3, 2, 5, skip=True, logit_std=1e-6, n_iter=20)
    attn = make(torch.Generator().manual_seed(0))
    assert attn["softmax"].shape == (3, 2, 2, 5, 5)
    # vanishing logits: both normalizations uniform, so the same network gives the same maps
    torch.testing.assert_close(attn["softmax"], attn["sinkhorn"], rtol=0, atol=1e-6)


def test_claims_follow_the_verdicts():
    def adv(setting, verdicts_, first=1):
        return pd.DataFrame({"setting": setting, "depth": range(first, len(verdicts_) + first),
                             "ratio": 1.0, "low": 0.9, "high": 1.1, "units": 8,
                             "excluded": 0, "verdict": verdicts_})
    table = pd.concat([adv("ind", ["parity"] * 3), adv("idt", ["parity", "more", "more"])])
    beyond = adv("net", ["more", "inconclusive"], first=2)
    sweep = adv("x", ["parity", "parity"]).drop(columns="setting").assign(n=[8, 16],
                                                                          logit_std=1.0)
    hidden = adv("h", ["more", "more"]).drop(columns="setting").rename(
        columns={"depth": "layer"}).assign(logit_std=1.0)
    c6a, c6b, c6d = claims(table, "ind", "idt", beyond, sweep, hidden, n=8)
    assert (c6a.verdict, c6b.verdict, c6d.verdict) == ("reproduced", "contradicted",
                                                        "partly reproduced")
    assert "parity in 2 of 2 cells" in c6a.finding and "(n = 8, logit scale 1)" in c6a.finding
    assert "No depth shows Sinkhorn ahead" in c6a.finding  # the claim's own wording holds
    assert "the networks' ratio is larger at depth 2" in c6d.finding
    # "no advantage": Sinkhorn keeping less agrees with it; keeping more is the opposite
    table_less = pd.concat([table[table.setting != "idt"], adv("idt", ["parity", "less", "less"])])
    assert claims(table_less, "ind", "idt", beyond, sweep, hidden, 8)[1].verdict == "reproduced"
    # no larger advantage than the control's: the path part does not reproduce
    level = claims(table, "ind", "idt", beyond.assign(verdict="parity"), sweep,
                   hidden.assign(verdict="parity"), 8)
    assert level[2].verdict == "not reproduced"
    # the sweep decides C6a too: an advantage anywhere in it counts against the claim
    sweep_more = claims(table, "ind", "idt", beyond, sweep.assign(verdict="more"), hidden, 8)
    assert sweep_more[0].verdict == "partly reproduced"
    # both parts of the hypothesis agree everywhere: reproduced
    assert claims(table, "ind", "idt", beyond.assign(verdict="more"), sweep, hidden,
                  8)[2].verdict == "reproduced"
    assert verdicts(table_less)["idt"] == "Sinkhorn keeps less at depths 2–3; parity at depth 1."


def test_networks_are_compared_with_the_control_at_their_scale():
    def pools(setting, ratio, n_pools=12):
        return pd.DataFrame([{"setting": setting, "pool": p, "depth": d, "path": 0,
                              "normalization": name,
                              "residual": 0.01 * (1 + p) * (ratio if name == "sinkhorn" else 1)}
                             for p in range(n_pools) for d in (1, 2, 3)
                             for name in ("softmax", "sinkhorn")])
    larger = beyond_control(pools("net", 2.0), pools("ctl", 1.0), {"net": "ctl"})
    assert list(larger.depth) == [2, 3]  # depth 1 is one matrix, not a chain
    assert (larger.verdict == "more").all() and np.allclose(larger.ratio, 2.0)
    same = beyond_control(pools("net", 1.5), pools("ctl", 1.5), {"net": "ctl"})
    assert (same.verdict == "parity").all()


def test_control_sweep_is_the_control_at_every_size_and_scale():
    sweep = control_sweep(3, 2, 1, [4, 6], [0.5, 2.0], [2, 3], n_pools=3, n_paths=4, seed=1,
                          n_iter=20)
    assert len(sweep) == 2 * 2 * 2 and set(sweep.n) == {4, 6}
    assert set(sweep.logit_std) == {0.5, 2.0} and "setting" not in sweep
    direct = advantage(pooled_paths({"x": random_pool(3, 2, 1, 6, 2.0, n_iter=20)}, 3, [2, 3],
                                    4, seed=1))
    cell = sweep.query("n == 6 and logit_std == 2.0").set_index("depth")["ratio"]
    np.testing.assert_allclose(cell.to_numpy(), direct.set_index("depth")["ratio"].to_numpy())


def test_hidden_state_test_finds_parity_when_both_attentions_are_uniform():
    # vanishing logits: softmax and Sinkhorn are both uniform, the networks are the same
    hidden = hidden_state_test(8, 2, 3, 4, 5, [1e-8], networks=4, seed=0, n_iter=20)
    assert list(hidden.layer) == [1, 2, 3] and (hidden.units == 4).all()
    np.testing.assert_allclose(hidden.ratio, 1.0, atol=1e-6)
    assert (hidden.verdict == "parity").all()
