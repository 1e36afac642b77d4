"""The depth sweep (B5): its registered trend against an independent least-squares fit, its
errors, and its every path under the `smoke` and `full-smoke` profiles without Jupyter."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from rankcollapse import profiles
from rankcollapse.experiments import depth_sweep
from rankcollapse.experiments.depth_sweep.experiment import finding_data, late_table
from rankcollapse.primary_tests import run_part
from rankcollapse.registry import registered

DEPTHS = (3, 6, 12, 24)


def hidden_table(log_ratio, seeds=5, inputs=3):
    """Synthetic hidden-state residuals: softmax 0.1 everywhere, Sinkhorn 0.1 * exp of
    `log_ratio(depth, seed, layer)` in every input, for both swept variants."""
    rows = []
    for depth in DEPTHS:
        for seed in range(seeds):
            for variant in depth_sweep.SWEPT_VARIANTS:
                for layer in range(depth + 1):
                    for i in range(inputs):
                        r = log_ratio(depth, seed, layer) if variant == "full model" else 0.0
                        rows += [dict(depth=depth, seed=seed, variant=variant, layer=layer,
                                      sample=i, normalization="softmax", residual=0.1),
                                 dict(depth=depth, seed=seed, variant=variant, layer=layer,
                                      sample=i, normalization="sinkhorn",
                                      residual=0.1 * np.exp(r))]
    return pd.DataFrame(rows)


def test_the_trend_is_the_mean_least_squares_slope_per_doubling():
    """Per seed, np.polyfit of the late layers' mean log ratio against log2 depth; the
    estimate is exp of the seeds' mean slope, the factor per doubling of depth."""
    gen = np.random.default_rng(3)
    noise = {(d, s, l): gen.normal(0, 0.05) for d in DEPTHS for s in range(5)
             for l in range(d + 1)}
    slope = {s: 0.2 + 0.05 * s for s in range(5)}

    def log_ratio(depth, seed, layer):
        return slope[seed] * np.log2(depth) + noise[depth, seed, layer]

    data = finding_data(hidden_table(log_ratio), "mnist")
    settings = replace(profiles.PROFILES["ci"],
                       depth_sweep=profiles.DepthSweep("mnist", DEPTHS, tuple(range(5))))
    with_skips, without = (run_part("B5", p.name, data, settings, {"mnist": "MNIST"})
                           for p in registered("B5").parts)
    fitted = []
    for s in range(5):
        late = [np.mean([log_ratio(d, s, l) for l in range(d // 2 + 1, d + 1)]) for d in DEPTHS]
        fitted.append(np.polyfit(np.log2(DEPTHS), late, 1)[0])
    assert with_skips[0].number == pytest.approx(np.exp(np.mean(fitted)), rel=1e-9)
    assert with_skips[0].found == "more"  # about 1.4 per doubling: far outside 1.1
    assert without[0].number == pytest.approx(1.0) and without[0].found == "parity"
    late = late_table(data, "MNIST")
    assert list(late["depth"][late["variant"] == "full model"]) == list(DEPTHS)
    assert list(late["layers"][:2]) == ["2–3", "4–6"]


def test_a_seed_missing_at_one_depth_is_refused():
    data = finding_data(hidden_table(lambda d, s, l: 0.0), "mnist")
    data = data[~((data["depth"] == 12) & (data["unit"] == 4))]
    settings = replace(profiles.PROFILES["ci"],
                       depth_sweep=profiles.DepthSweep("mnist", DEPTHS, tuple(range(5))))
    with pytest.raises(ValueError, match=r"units \[4\] are not measured at every depth "
                                         r"\(3, 6, 12, 24\)"):
        run_part("B5", registered("B5").parts[0].name, data, settings, {"mnist": "MNIST"})


def test_a_sweep_needs_two_depths_and_a_task_of_the_profile():
    with pytest.raises(ValueError, match="at least two depths"):
        profiles.DepthSweep("mnist", (24,), (0, 1))
    with pytest.raises(ValueError, match="the depth sweep's task 'text' is not one of its"):
        replace(profiles.PROFILES["ci"], depth_sweep=profiles.DepthSweep("text", DEPTHS, (0,)))
    with pytest.raises(ValueError, match="has no depth sweep"):
        depth_sweep.run(replace(profiles.PROFILES["ci"], depth_sweep=None), "cpu")


@pytest.mark.parametrize("name", ["smoke", "full-smoke"])
def test_every_path_runs_under_the_walk_profiles(name, tmp_path):
    """Trains the walk profile's sweep (tiny data, one epoch) into a fresh cache and returns
    every table, the figure's data, the glue and the claim: numbers that mean nothing, a path
    that runs."""
    settings = profiles.PROFILES[name]
    sweep = depth_sweep.run(settings, "cpu", cache_dir=tmp_path)
    depths = settings.depth_sweep.depths
    assert sorted(sweep.training["depth"].unique()) == sorted(depths)
    assert set(sweep.ratios["depth"]) == set(depths)
    assert sweep.ratios["relative"].between(0, 1).all()
    assert len(sweep.results) == 2 and sweep.claim.id == "B5"
    assert set(sweep.late["depth"]) == set(depths)
    fig = depth_sweep.ratio_by_depth(sweep.ratios)
    assert len(fig.axes) >= 2
    assert sweep.glue["ds_seeds"] == len(settings.depth_sweep.seeds)


def test_late_layers_tied_at_the_floor_say_so():
    """Both normalizations at the rounding floor in the late layers: no parity is read."""
    from rankcollapse.experiments.depth_sweep.experiment import TIED
    from rankcollapse.measures import FLOOR

    table = hidden_table(lambda d, s, l: 0.0)
    deep = (table["variant"] == "without skip") & (table["layer"] > 0)
    table.loc[deep, "residual"] = FLOOR / 10
    late = late_table(finding_data(table, "mnist"), "MNIST")
    assert set(late["found"][late["variant"] == "without skip"]) == {TIED}
    assert late[late["variant"] == "without skip"][["ratio", "low", "high"]].isna().all().all()
    assert set(late["found"][late["variant"] == "full model"]) == {"parity"}


def null_sweep(rng: np.random.Generator, seeds: int = 5, correlation: float = 0.9,
               tails: float | None = None) -> pd.DataFrame:
    """B5's registered data with no trend at all: each seed's log ratio has a level of its own
    (the same at every depth, sign flipped at random), each (seed, depth) model an offset of
    its own (separate trainings), and its layers noise correlated from one layer to the next
    (AR(1) with `correlation`); Student t draws with `tails` degrees of freedom where given
    (heavy tails), normal ones otherwise."""
    draw = (lambda size: rng.standard_t(tails, size)) if tails else rng.standard_normal
    level = 0.4 * rng.choice([-1.0, 1.0], seeds) * np.abs(draw(seeds))
    frames = []
    for depth in DEPTHS:
        offset = 0.15 * draw(seeds)
        for variant in depth_sweep.SWEPT_VARIANTS:
            layers = np.empty((seeds, depth))
            layers[:, 0] = draw(seeds)
            for layer in range(1, depth):
                layers[:, layer] = (correlation * layers[:, layer - 1]
                                    + np.sqrt(1 - correlation**2) * draw(seeds))
            logs = level[:, None] + offset[:, None] + 0.1 * layers
            unit, position = np.meshgrid(np.arange(seeds), np.arange(1, depth + 1),
                                         indexing="ij")
            frames.append(pd.DataFrame({
                "task": "mnist", "depth": depth, "variant": variant, "unit": unit.ravel(),
                "position": position.ravel(), "softmax": 0.1,
                "sinkhorn": 0.1 * np.exp(logs.ravel())}))
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("seeds, correlation, tails", [(5, 0.9, None), (5, 0.0, None),
                                                       (3, 0.9, 3.0), (8, 0.5, 3.0)])
def test_the_trend_rule_finds_no_trend_in_at_most_five_percent_of_null_sweeps(
        seeds, correlation, tails):
    """The false-positive rate of B5's rule, through the real registered test (`run` of both
    parts, the family of two): sweeps in which the advantage does not change with depth at
    all, whatever each seed's level. A run counts as a false finding when either part finds
    the late-layer ratio growing or shrinking with depth beyond the margin."""
    rng = np.random.default_rng(seeds * 10 + int(correlation * 10))
    settings = replace(profiles.PROFILES["ci"],
                       depth_sweep=profiles.DepthSweep("mnist", DEPTHS, tuple(range(seeds))))
    runs, hits = 200, 0
    for _ in range(runs):
        data = null_sweep(rng, seeds, correlation, tails)
        found = [r.found for p in registered("B5").parts
                 for r in run_part("B5", p.name, data[data["variant"] == p.variants[0]], settings)]
        hits += any(f in ("more", "less") for f in found)
    print(f"B5's rule on null sweeps ({seeds} seeds, correlation {correlation}, tails "
          f"{tails}): {hits / runs:.1%} false findings")
    assert hits / runs <= 0.05


def test_a_bound_just_below_1_is_not_shown_as_1():
    from rankcollapse.experiments.depth_sweep.experiment import shown_ratio

    assert [shown_ratio(x) for x in (0.99962, 1.00041, 1.0, 2.19, 4.7912, 0.2161, float("nan"))] \
        == ["0.9996", "1.0004", "1.00", "2.19", "4.79", "0.216", "–"]
