"""The C loops of the Sinkhorn engine against the torch engine they replace on the CPU, and
against the log-domain definition: forward, both backward passes, masks, padding, empty
samples, kernels that would underflow, NaN, threads; and the cached library: built once under
a lock, verified before it is loaded, refused (and the torch engine run) when it is empty,
truncated, foreign or wrong, readable by all, and the switch that turns it off."""

import math
import os
import stat
import subprocess
import sys
import warnings
from contextlib import contextmanager

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rankcollapse import _sinkhorn_engine as engine
from rankcollapse import _sinkhorn_native as native
from rankcollapse import files
from rankcollapse.files import check_verified
from rankcollapse.normalizations import sinkhorn, sinkhorn_reference

from references import per_matrix, sinkhorn_loop

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler here")


def logits(batch, n, scale, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, n, generator=g) * scale


def random_mask(batch, n, seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(batch, n, generator=g) < 0.7
    mask[:, 0] = True  # at least one real token
    return mask


@contextmanager
def torch_engine():
    """Runs its block on the torch engine, as where no compiler is found."""
    saved = native._library()
    native._state["library"] = None
    try:
        yield
    finally:
        native._state["library"] = saved


def both_engines(fn):
    """fn() on the C loops, then on the torch engine."""
    ours = fn()
    with torch_engine():
        return ours, fn()


def sinkhorn_and_grad(x, w, n_iter, mask=None, early_stop=True):
    x = x.clone().requires_grad_(True)
    p = sinkhorn(x, n_iter, mask, check_finite=False, early_stop=early_stop)
    (p * w).sum().backward()
    return p.detach(), x.grad


def relative(a, b):
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


# ----------------------------------------------------------------------------- agreement


@given(st.integers(1, 40), st.sampled_from([0.3, 1.5, 3.0]), st.integers(1, 60),
       st.booleans(), st.integers(0, 2**16))
def test_forward_and_gradient_agree_with_the_torch_engine(n, scale, n_iter, masked, seed):
    """Any size (padding to eight lanes), logit scale (converged or not, implicit or unrolled
    backward), iteration count and mask: the same matrix within 1e-6 as the torch engine, and
    the same gradient up to the torch engine's implicit gradient for matrices within `NEAR`
    of the marginals (3e-4 relative at most, measured), where the C loops differentiate
    every iteration."""
    x, w = logits(6, n, scale, seed), logits(6, n, 1.0, seed + 1)
    mask = random_mask(6, n, seed) if masked else None
    (p, g), (p_ref, g_ref) = both_engines(lambda: sinkhorn_and_grad(x, w, n_iter, mask))
    assert float((p - p_ref).abs().max()) < 1e-6
    assert relative(g, g_ref) < 3e-4  # the torch engine's shortcut for nearly converged ones


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 17, 20, 33, 64])
@pytest.mark.parametrize("scale", [0.3, 1.5, 3.5])
@pytest.mark.parametrize("half_steps", [3, 4, 9, 100, 101])
def test_c_loops_give_the_matrix_of_the_torch_engine_and_the_gradient_of_the_definition(
        n, scale, half_steps):
    """Every row length (padding to eight lanes), converged or not, ending on a row or a
    column step: the matrix within 1e-6 of the torch engine's, the gradient within 1e-4
    (relative) of autograd through every half-step of the definition in float64."""
    x, w = logits(12, n, scale, n), logits(12, n, 1.0, n + 1)

    def run():
        y = x.clone().requires_grad_(True)
        p = sinkhorn(y, half_steps=half_steps, check_finite=False)
        (p * w).sum().backward()
        return p.detach(), y.grad

    (p, g), (p_ref, _) = both_engines(run)
    assert float((p - p_ref).abs().max()) < 1e-6
    ref = x.double().requires_grad_(True)
    (per_matrix(lambda m: sinkhorn_loop(m, half_steps), ref) * w.double()).sum().backward()
    assert relative(g.double(), ref.grad) < 1e-4


@pytest.mark.parametrize("early_stop", [True, False])
def test_masked_samples_agree_with_the_torch_engine_and_the_definition(early_stop):
    """Padding is an identity block: real blocks balanced, padded rows and columns zero,
    their gradient zero; a sample with no real token gives zero and a zero gradient."""
    x, w = logits(32, 12, 2.0, 5), logits(32, 12, 1.0, 6)
    mask = random_mask(32, 12, 7)
    mask[3] = False  # a sample with no real token

    def run():
        return sinkhorn_and_grad(x, w, 50, mask, early_stop)

    (p, g), (p_ref, g_ref) = both_engines(run)
    assert float((p - p_ref).abs().max()) < 1e-6
    assert relative(g, g_ref) < 1e-4
    pairs = mask[:, :, None] & mask[:, None, :]
    assert (p[~pairs] == 0).all() and (g[~pairs] == 0).all()
    assert (p[3] == 0).all() and (g[3] == 0).all()
    real = mask[0]
    expected = sinkhorn_reference(x[0][real][:, real].double(), 50)
    assert float((p[0][real][:, real].double() - expected).abs().max()) < 1e-6


def test_gradients_match_autograd_through_every_iteration_in_float64():
    """Matrices that converge (implicit backward) and matrices that do not (unrolled, by the
    C loops): within 1e-4 of autograd through 50 float64 iterations, per matrix."""
    x, w = logits(256, 17, 3.0, 11), logits(256, 17, 1.0, 12)
    converged = native.forward(x, None, 100, engine.tolerance(x.dtype, 17), math.exp(-40))[1]
    assert converged.any() and not converged.all()
    p, g = sinkhorn_and_grad(x, w, 50)
    ref = x.double().requires_grad_(True)
    (sinkhorn_reference(ref, 50) * w.double()).sum().backward()
    per_matrix = (g.double() - ref.grad).flatten(1).norm(dim=1) / ref.grad.flatten(1).norm(dim=1)
    assert float(per_matrix.max()) < 1e-4


# ----------------------------------------------------------------------------- the loops


def test_each_matrix_stops_on_its_own_and_within_the_tolerance():
    x = logits(64, 17, 1.5, 3)
    x[:8] *= 4  # these need every iteration
    tol = engine.tolerance(torch.float32, 17)
    p, converged, error, underflow = native.forward(x, None, 100, tol, math.exp(-40))
    assert converged[8:].all() and not underflow.any()
    assert (error[converged] == 0).all() and (error[~converged] > 0).all()
    rows = (p.sum(-1) - 1).abs().amax(-1)
    torch.testing.assert_close(error[~converged], rows[~converged])
    exact = native.forward(x, None, 100, -1.0, math.exp(-40))[0]
    assert float((p - exact).abs().max()) < 1e-6


def test_kernels_that_would_underflow_take_the_log_domain_alone():
    x = logits(8, 10, 1.0, 4)
    x[2, 0, 1] = -80.0  # a real entry of K below exp(-40)
    _, _, _, underflow = native.forward(x, None, 100, 1e-7, math.exp(-40))
    assert underflow.tolist() == [i == 2 for i in range(8)]
    p = sinkhorn(x, 50)
    expected = sinkhorn_reference(x.double(), 50)
    assert float((p.double() - expected).abs().max()) < 1e-6
    y = x.clone().requires_grad_(True)
    sinkhorn(y, 50, early_stop=False).sum().backward()  # unrolled: the log domain for #2
    assert torch.isfinite(y.grad).all()


def test_nan_logits_give_nan_not_a_crash():
    x = logits(4, 9, 1.0, 8)
    x[1, 2, 3] = float("nan")
    p = sinkhorn(x, 50, check_finite=False)
    assert torch.isnan(p[1]).all() and torch.isfinite(p[[0, 2, 3]]).all()


def test_results_do_not_depend_on_the_number_of_threads():
    x, w = logits(300, 17, 2.0, 9), logits(300, 17, 1.0, 10)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = sinkhorn_and_grad(x, w, 50)
        torch.set_num_threads(2)
        two = sinkhorn_and_grad(x, w, 50)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one[0], two[0]) and torch.equal(one[1], two[1])


def test_a_system_that_is_not_positive_definite_is_reported_not_solved():
    p = torch.full((2, 4, 4), 0.25)
    p[1] = torch.eye(4)  # P^T P = I: the system I + 11^T/n - P^T P is singular
    grad, solved = native.implicit_backward(p, torch.ones_like(p), None, 0.05)
    assert solved.tolist() == [True, False]


# ----------------------------------------------------------------------------- building


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """An empty cache of the test's own, the system's compiler, the switch unset, and the
    library loaded afresh (the session's library is restored afterwards)."""
    folder = tmp_path / "native"
    monkeypatch.setenv("RANKCOLLAPSE_NATIVE_DIR", str(folder))
    monkeypatch.delenv("RANKCOLLAPSE_NATIVE", raising=False)
    monkeypatch.delenv("CC", raising=False)
    saved = dict(native._state)
    native._state.clear()
    yield folder
    native._state.clear()
    native._state.update(saved)


def fake_compiler(folder, body):
    """A shell script standing in for $CC: `--version` answers as `cc` does (so the library
    keeps its name), anything else runs `body` with the compiler's arguments; `$out` is the
    file after `-o`."""
    script = folder / "fake-cc"
    script.write_text('#!/bin/sh\nif [ "$1" = --version ]; then exec cc --version; fi\n'
                      'for a; do [ "$prev" = -o ] && out=$a; prev=$a; done\n' + body + "\n")
    script.chmod(0o755)
    return str(script)


def c_file(folder, name, text):
    source = folder / f"{name}.c"
    source.write_text(text)
    return source


OTHER_LIBRARY = "int rc_other(void) { return 0; }\n"
FOREIGN_LIBRARY = """#include <stdint.h>
int rc_forward(const float *l, const uint8_t *m, int64_t count, int64_t n, int64_t h,
               float tol, float floor, float *p, float *e, uint8_t *c, uint8_t *u, int t) {
    for (int64_t i = 0; i < count * n * n; i++) p[i] = 1e28f;
    for (int64_t i = 0; i < count; i++) { e[i] = 0; c[i] = 1; u[i] = 0; }
    return 0;
}
int rc_unrolled_backward(void) { return 0; }
int rc_implicit_backward(void) { return 0; }
"""


def compiling(folder, c_source):
    """A $CC that builds `c_source` instead of the Sinkhorn loops, wherever it is asked to."""
    source = c_file(folder, "other", c_source)
    return fake_compiler(folder, f'exec cc -shared -fPIC {source} -o "$out"')


def sinkhorn_is_right():
    x = logits(4, 6, 1.0, 1)
    expected = sinkhorn_reference(x.double(), 50)
    return float((sinkhorn(x, 50).double() - expected).abs().max()) < 1e-6


def in_a_new_process(script, *args):
    """Run `script` in a fresh interpreter with this environment (its own cache included)."""
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_failed_build_warns_once_and_the_torch_engine_runs(cache, monkeypatch):
    monkeypatch.setenv("CC", "false")  # a compiler that always fails
    with pytest.warns(RuntimeWarning, match="could not be built.*RANKCOLLAPSE_NATIVE=0"):
        assert not native.available()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once
        assert not native.applies(torch.zeros(2, 2))
    assert sinkhorn_is_right()


def test_the_library_is_built_once_per_source_and_switched_off_by_the_environment(
        cache, monkeypatch):
    assert native.available()
    built = list(cache.glob("sinkhorn-*.so"))
    assert built == [native.library_path()]
    check_verified(built[0])  # its digest is written beside it
    assert not list(cache.glob(".*.tmp"))  # no temporary file left behind
    monkeypatch.setenv("RANKCOLLAPSE_NATIVE", "0")
    native._state.clear()
    assert not native.available()


def test_the_library_is_readable_by_others_on_a_shared_cache(cache):
    assert native.available()
    path = native.library_path()
    wanted = 0o666 & ~files._UMASK  # as every file the project caches
    assert stat.S_IMODE(path.stat().st_mode) == wanted


@pytest.mark.parametrize("damage", ["truncated", "without its digest"])
def test_a_damaged_library_is_set_aside_and_rebuilt_never_loaded(cache, damage):
    """A truncated library would kill the process that maps it (SIGBUS, no message): the
    digest is checked before loading; a library without one is not trusted either. In a
    new process, since this one already has the library mapped."""
    assert native.available()
    path = native.library_path()
    if damage == "truncated":
        cut = path.with_name("cut")
        cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        os.replace(cut, path)  # a new file: the one mapped here stays whole
    else:
        path.with_name(path.name + ".sha256").unlink()
    script = ("from rankcollapse import _sinkhorn_native as native\n"
              "print(native.available())\n")
    run = in_a_new_process(script)
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0 and out.split()[-1:] == ["True"], (run.returncode, out, err)
    assert path.with_name(path.name + ".corrupt").is_file()
    check_verified(path)


def test_a_compiler_that_writes_nothing_publishes_nothing(cache, monkeypatch, tmp_path):
    """`cc` exiting 0 without output would have left an empty library that every later
    process failed to load, for good; now nothing is published and the next build works."""
    monkeypatch.setenv("CC", fake_compiler(tmp_path, "exit 0"))
    with pytest.warns(RuntimeWarning, match="wrote nothing"):
        assert not native.available()
    assert not list(cache.glob("sinkhorn-*"))
    assert sinkhorn_is_right()
    monkeypatch.delenv("CC")
    native._state.clear()
    assert native.available()


def test_a_library_without_the_functions_is_refused_and_the_torch_engine_runs(
        cache, monkeypatch, tmp_path):
    monkeypatch.setenv("CC", compiling(tmp_path, OTHER_LIBRARY))
    with pytest.warns(RuntimeWarning, match=r"sinkhorn-\w+\.so.*rc_forward"):
        assert not native.available()
    assert not list(cache.glob("sinkhorn-*.so"))  # nothing published
    assert sinkhorn_is_right()


def test_a_foreign_library_with_the_right_functions_is_refused(cache, monkeypatch,
                                                                   tmp_path):
    """Right names, wrong results (rows summing to 1e28): refused by the check on a known
    matrix, whether just compiled or found in the cache with a digest that fits."""
    monkeypatch.setenv("CC", compiling(tmp_path, FOREIGN_LIBRARY))
    with pytest.warns(RuntimeWarning, match="known matrix"):
        assert not native.available()
    assert not list(cache.glob("sinkhorn-*.so"))
    assert sinkhorn_is_right()
    monkeypatch.delenv("CC")
    native._state.clear()
    path = native.library_path()
    source = c_file(tmp_path, "foreign", FOREIGN_LIBRARY)
    files.write_verified(path, lambda tmp: subprocess.run(
        ["cc", "-shared", "-fPIC", str(source), "-o", str(tmp)], check=True))
    assert native.available()  # the foreign one set aside, the real one built
    assert path.with_name(path.name + ".corrupt").is_file()
    assert native.applies(torch.zeros(2, 2)) and sinkhorn_is_right()


def test_two_processes_building_at_once_compile_once(cache, monkeypatch, tmp_path):
    count = tmp_path / "compilations"
    monkeypatch.setenv("CC", fake_compiler(tmp_path, f'echo x >> {count}; sleep 1; '
                                                     'exec cc "$@"'))
    script = ("import sys, time\n"
              "from pathlib import Path\n"
              "from rankcollapse import _sinkhorn_native as native\n"
              "here = Path(sys.argv[1])\n"
              "(here / f'ready-{sys.argv[2]}').touch()\n"
              "while len(list(here.glob('ready-*'))) < 2:\n"
              "    time.sleep(0.01)\n"
              "print(native.available())\n")
    runs = [in_a_new_process(script, tmp_path, i) for i in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [out.split()[-1:] for out, _ in outputs] == [["True"], ["True"]], outputs
    assert count.read_text().split() == ["x"]


@pytest.mark.parametrize("value", ["0", "false", "off", "no", "FALSE", " Off "])
def test_every_usual_word_for_off_switches_the_loops_off(cache, monkeypatch, value):
    monkeypatch.setenv("RANKCOLLAPSE_NATIVE", value)
    assert not native.available()
    assert not cache.exists()  # nothing built


@pytest.mark.parametrize("value", ["1", "true", "on", "yes", "YES", ""])
def test_every_usual_word_for_on_switches_the_loops_on(monkeypatch, value):
    monkeypatch.setenv("RANKCOLLAPSE_NATIVE", value)
    assert native.enabled()


def test_an_unknown_value_of_the_switch_is_an_error(cache, monkeypatch):
    monkeypatch.setenv("RANKCOLLAPSE_NATIVE", "maybe")
    with pytest.raises(ValueError, match="RANKCOLLAPSE_NATIVE.*maybe.*0, false, off"):
        native.available()
