"""The profiles: the chapters' sizes live here, and the ci profile keeps the sizes its time
budget was measured with."""

import numpy as np

from rankcollapse.profiles import PROFILES, LogGrid, PreciseStack


def test_ci_keeps_the_chapters_sizes():
    ci = PROFILES["ci"]
    assert ci.ch1.collapse_scales == (0.1, 0.5, 1.0, 2.0)
    assert ci.ch1.collapse_precise == PreciseStack(depth=8, n_tokens=8, digits=1200)
    assert (ci.ch1.layernorm_ranks, ci.ch1.layernorm_draws) == ((1, 2, 4, 8), 20)
    np.testing.assert_array_equal(ci.ch3.linearization_eps.values, np.logspace(-4, 0, 13))
    np.testing.assert_array_equal(ci.ch3.layer_scales.values, np.logspace(-3, 0.5, 15))
    np.testing.assert_array_equal(ci.ch3.regime_scales.values, np.logspace(-2, 0.7, 12))
    assert ci.ch3.stack_starts == (0.01, 0.03, 0.1) and ci.ch3.bound_starts == (0.1, 0.3)
    assert ci.ch3.bound_precise == PreciseStack(depth=5, n_tokens=8, digits=400)
    assert ci.ch3.regime_logit_stds == (0.09, 1.0, 9.0)
    assert ci.ch4.pool_batch == 8 and ci.ch4.control_sizes == (16, 32, 64)
    assert ci.ch4.control_scales == (0.5, 1.0, 2.0, 4.0) and ci.ch4.rhos == (0.0, 0.5, 0.9, 0.99)


def test_control_sizes_bracket_each_profiles_token_count():
    for profile in PROFILES.values():
        assert profile.ch4.control_sizes == (profile.n_tokens // 2, profile.n_tokens,
                                         2 * profile.n_tokens)


def test_a_log_grid_is_logspace():
    np.testing.assert_array_equal(LogGrid(-1, 1, 3).values, [0.1, 1.0, 10.0])
