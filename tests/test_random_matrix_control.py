"""Chapter 4's experiment module: random logits, identity layers, paired paths, pools as the
independent units, and the claims it decides."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.experiments import random_matrix_control as rm
from rankcollapse.experiments.random_matrix_control import (
    advantage, beyond_control, claims, control_label, control_sweep, hidden_state_comparisons,
    hidden_state_stacks, network_label, network_pool, paired_paths, pooled_paths,
    random_logits, random_pool, verdicts, with_identity_layers)
from rankcollapse.profiles import get_profile


def test_random_logits_have_the_requested_scale_and_correlation():
    a = random_logits(3, 64, 2, 16, scale=2.0, rho=0.8, generator=torch.Generator().manual_seed(0))
    assert a.shape == (3, 64, 2, 16, 16)
    assert a[2].std().item() == pytest.approx(2.0, rel=0.05)
    corr = np.corrcoef(a[0].flatten().numpy(), a[1].flatten().numpy())[0, 1]
    assert corr == pytest.approx(0.8, abs=0.02)
    with pytest.raises(ValueError, match="rho"):
        random_logits(2, 1, 1, 2, 1.0, 1.0, torch.Generator())


def test_random_logits_take_one_scale_per_layer():
    a = random_logits(3, 64, 2, 16, scale=[0.5, 1.0, 4.0], rho=0.0,
                      generator=torch.Generator().manual_seed(0))
    assert [round(a[l].std().item(), 1) for l in range(3)] == [0.5, 1.0, 4.0]
    with pytest.raises(ValueError, match="one per layer"):
        random_logits(3, 1, 1, 2, [1.0, 2.0], 0.0, torch.Generator())
    with pytest.raises(ValueError, match="positive"):
        random_logits(2, 1, 1, 2, [1.0, -2.0], 0.0, torch.Generator())


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
    assert adv.verdict.item() == "undecided" and adv.units.item() == 2


def test_network_pools_share_weights_and_inputs():
    make = network_pool(8, 2, 3, 2, 5, skip=True, logit_std=1e-6, n_iter=20)
    attn = make(torch.Generator().manual_seed(0))
    assert attn["softmax"].shape == (3, 2, 2, 5, 5)
    # vanishing logits: both normalizations uniform, so the same network gives the same maps
    torch.testing.assert_close(attn["softmax"], attn["sinkhorn"], rtol=0, atol=1e-6)


def pools(setting: str, ratio: float, n_pools: int = 12, depths=(1, 2, 3, 4),
          spread: float = 0.01) -> pd.DataFrame:
    """A `pooled_paths` table: per pool and depth one path, Sinkhorn = `ratio` x softmax
    times a small per-pool factor."""
    return pd.DataFrame([{"setting": setting, "pool": p, "depth": d, "path": 0,
                          "normalization": name,
                          "residual": 0.01 * (1 + p) * 0.5**d
                          * ((ratio * (1 + spread * (p % 3 - 1))) if name == "sinkhorn" else 1)}
                         for p in range(n_pools) for d in depths
                         for name in ("softmax", "sinkhorn")])


def test_claims_follow_the_registered_tests():
    """C6a and C6b are parity claims (the paper: essentially the same rank decay): a ratio
    within the margin reproduces them, a tight ratio of 0.5 or 0.8 (Sinkhorn lower) or 1.5
    (higher) contradicts them. Chapter 4 decides no part of C6d."""
    ci = replace(get_profile("three-task"), depth=4)  # the random pools below: 4 layers
    control = pd.concat([pools("independent", 1.0), pools("independent, half identity", 0.5)])
    sweep = pd.DataFrame({"n": [8, 16], "logit_std": 1.0, "depth": 2, "verdict": "parity"})
    c6a, c6b = claims(control, sweep, ci)
    assert c6a.verdict == "reproduced" and c6a.results[0].found == "parity"
    assert c6b.verdict == "contradicted" and c6b.results[0].found == "less"
    assert c6b.results[0].outcome == "opposite"
    assert c6a.results[0].task == "independent logits" and c6a.results[0].units == (12,)
    assert "parity in 2 of 2 cells" in c6a.finding and "(n = 32, logit scale 1" in c6a.finding
    assert "independent logits: Sinkhorn / softmax 1.00 (" in c6a.finding
    assert "independent, half identity" not in c6a.finding
    assert "half of the layers the identity: Sinkhorn / softmax 0.500 (" in c6b.finding
    assert c6b.finding.endswith("): lower.")
    ahead = pd.concat([pools("independent", 1.5), pools("independent, half identity", 1.0)])
    assert [c.verdict for c in claims(ahead, sweep, ci)] == ["contradicted", "reproduced"]
    assert verdicts(advantage(control))["independent, half identity"].startswith(
        "Sinkhorn lower at depths 1–4")


def test_c6a_parity_is_contradicted_by_a_tight_ratio_of_0_8():
    """Parity claimed: Sinkhorn / softmax 0.8 with a tight interval lies below 1/1.1, the
    opposite of the paper beyond the margin (no longer 'agrees' as under 'no more')."""
    ci = replace(get_profile("three-task"), depth=4)
    control = pd.concat([pools("independent", 0.8), pools("independent, half identity", 1.0)])
    sweep = pd.DataFrame({"n": [8], "logit_std": 1.0, "depth": 2, "verdict": "less"})
    c6a, c6b = claims(control, sweep, ci)
    r = c6a.results[0]
    assert r.number == pytest.approx(0.8, rel=0.01) and r.high < 1 / 1.1
    assert (r.found, r.outcome, c6a.verdict) == ("less", "opposite", "contradicted")
    assert c6b.verdict == "reproduced"
    assert "lower in 1 of 1 cell." in c6a.finding


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


@pytest.mark.parametrize("layernorm", [True, False])
def test_hidden_state_test_finds_parity_when_both_attentions_are_uniform(layernorm):
    # vanishing logits: softmax and Sinkhorn are both uniform, the networks are the same
    table = hidden_state_stacks(8, 2, 3, 4, 5, [1e-8], networks=4, seed=0, n_iter=20,
                                layernorm=layernorm)
    assert set(table.layernorm) == {layernorm}
    hidden = hidden_state_comparisons(table)
    assert list(hidden.layer) == [1, 2, 3] and (hidden.units == 4).all()
    np.testing.assert_allclose(hidden.ratio, 1.0, atol=1e-6)
    assert (hidden.verdict == "parity").all()


def test_sweep_depths_are_the_shortest_product_half_and_all_layers():
    assert rm.sweep_depths(12) == (2, 6, 12)
    assert rm.sweep_depths(3) == (2, 3)  # 3 // 2 = 1 is one matrix, not a product: 2 instead


def test_correlated_test_keeps_rho_as_data_and_its_sentence_follows_the_numbers():
    adv = rm.correlated_test(3, 2, 1, 4, (0.0, 0.9), n_pools=3, depths=[2, 3], n_paths=4,
                             seed=1, n_iter=20)
    assert set(adv.rho) == {0.0, 0.9} and set(adv.depth) == {2, 3}
    direct = advantage(pooled_paths({"x": random_pool(3, 2, 1, 4, 1.0, rho=0.9, n_iter=20)},
                                    3, [2, 3], 4, seed=1))
    np.testing.assert_allclose(adv[adv.rho == 0.9]["ratio"], direct["ratio"])
    made = pd.DataFrame({"setting": "s", "rho": [0.0, 0.0, 0.5, 0.5], "depth": [1, 4, 1, 4],
                         "ratio": [1.0, 1.25, 1.0, 2.5], "low": 0.9, "high": 3.0,
                         "verdict": ["parity", "more", "parity", "more"]})
    text = rm.correlated_sentence(made)
    assert text.startswith("At the deepest path (depth 4) the ratio is 1.25 (ρ = 0), 2.50 "
                           "(ρ = 0.5); Sinkhorn higher in 2 of the 4 (ρ, depth) cells. "
                           "At the strongest correlation, ρ = 0.5: ")
    none = rm.correlated_sentence(made.assign(verdict="parity"))
    assert "Sinkhorn higher in none of the 4 (ρ, depth) cells." in none


def test_chain_test_is_the_networks_against_the_control_at_their_scale():
    chain = rm.chain_test(8, 2, 3, 2, 4, n_pools=3, depths=[1, 2, 3], n_paths=4, seed=0,
                          n_iter=20, scales=(1.0,))
    assert chain.settings == [network_label(False, 1.0), network_label(True, 1.0),
                              control_label(1.0)]
    assert set(chain.advantage.setting) == set(chain.settings)
    direct = beyond_control(chain.networks, chain.controls,
                            {network_label(True, 1.0): control_label(1.0)})
    pd.testing.assert_frame_equal(chain.beyond, direct)
    assert list(chain.verdicts) == [network_label(False, 1.0), network_label(True, 1.0)]
    assert list(chain.beyond_verdicts) == [1.0]
    controls = pooled_paths({control_label(1.0): random_pool(3, 2, 2, 4, 1.0, n_iter=20)}, 3,
                            [1, 2, 3], 4, seed=0)
    pd.testing.assert_frame_equal(chain.controls, controls)


def test_hidden_state_panels_keep_the_architecture_as_a_column():
    stacks = {ln: hidden_state_stacks(8, 2, 2, 3, 5, [1e-8], networks=3, seed=0, n_iter=20,
                                      layernorm=ln) for ln in (True, False)}
    panels = rm.hidden_state_panels(stacks)
    assert set(zip(panels.layernorm, panels.task)) == {(True, "with LayerNorm"),
                                                       (False, "without LayerNorm")}
    assert set(panels.setting) == {"logit scale 1e-08"}


def test_path_depths_and_the_parity_band():
    assert list(rm.path_depths(3)) == [1, 2, 3]
    low, high = rm.PARITY_BAND
    assert low * high == pytest.approx(1) and high > 1  # symmetric on a log scale
