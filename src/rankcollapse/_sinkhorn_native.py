"""The Sinkhorn engine's loops in C, for float32 on the CPU (private: `_sinkhorn_engine` uses it).

Why. A trained model's attention needs tens of Sinkhorn iterations, and on the CPU each
half-step of the torch engine is a batched product of tiny matrices (17 x 17 for the `ci`
image models) whose cost is per call and whose batch runs until its slowest matrix has
converged. `_sinkhorn_native.c` runs each matrix's whole iteration in one loop that stops
when *that* matrix has converged, and does the implicit and unrolled backward passes the same
way; the torch engine computes the same quantities and is the reference the tests hold it to.

How. The C file is compiled on first use with the system's C compiler (`$CC`, else `cc`;
`-O3 -march=native -fopenmp`: gcc, no other dependency) into a shared library cached under
$RANKCOLLAPSE_NATIVE_DIR, else ~/.cache/rankcollapse, named by the digest of the source, the
flags, the compiler and the CPU, and loaded through ctypes; each call shares its batch among
`torch.get_num_threads()` OpenMP threads of PyTorch's own runtime (ctypes releases the GIL).

The cache is kept as every other cache of the project (`files`). One process builds, under a
lock the others wait on; the compiler's output is published only once it is not empty, loads,
has the `rc_*` functions and computes a known Sinkhorn matrix; it is written atomically,
readable by all, with its sha256 beside it. Before a cached library is loaded its digest is
checked (a truncated library would kill the process with SIGBUS as it is mapped, beyond any
`except`), and once loaded it passes the same checks; a library that fails is set aside as
`<name>.corrupt` and built again. Where no compiler works or the library fails anyway,
`available()` is False and the torch engine runs instead, after one warning naming the file
and what to do; with RANKCOLLAPSE_NATIVE=0 (or false, off, no) it runs without a word.

Why at run time, not as a setuptools extension built at install. `-march=native` tunes the
library to the CPU it is built on, and the cache key holds that CPU: a wheel built once (CI, a
cluster's login node) would carry another machine's instructions and die of SIGILL elsewhere,
while a portable build loses the vector width the loops are written for. The package stays
pure Python: it installs where there is no compiler and still computes (the torch engine),
where an extension would need an optional build and the same fallback anyway. The book runs
from an editable install, which builds extensions only when reinstalled: an edited `.c` would
leave a stale library computing the old loops, where here the source's digest names the file.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import platform
import subprocess
import threading
import warnings
from pathlib import Path

import torch

from .files import CorruptFile, check_verified, file_lock, set_aside, write_verified

SOURCE = Path(__file__).with_name("_sinkhorn_native.c")
FLAGS = ("-O3", "-march=native", "-std=c11", "-fopenmp", "-fPIC", "-shared", "-Wall",
         "-Werror")
_I64, _INT, _F32, _PTR = ctypes.c_int64, ctypes.c_int, ctypes.c_float, ctypes.c_void_p
_SIGNATURES = {
    "rc_forward": (_PTR, _PTR, _I64, _I64, _I64, _F32, _F32, _PTR, _PTR, _PTR, _PTR, _INT),
    "rc_unrolled_backward": (_PTR, _PTR, _PTR, _I64, _I64, _I64, _F32, _PTR, _PTR, _INT),
    "rc_implicit_backward": (_PTR, _PTR, _PTR, _PTR, _I64, _I64, _F32, _PTR, _PTR, _INT),
}

_ON, _OFF = ("", "1", "true", "on", "yes"), ("0", "false", "off", "no")

_lock = threading.Lock()
_state: dict[str, object] = {}  # "library": the loaded CDLL, or None where it cannot be


def _cache_dir() -> Path:
    root = os.environ.get("RANKCOLLAPSE_NATIVE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "rankcollapse"


def _compiler() -> str:
    return os.environ.get("CC") or "cc"


def _cpu() -> str:
    """What `-march=native` depends on: the CPU's model and flags (Linux), else the machine."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine()
    wanted = [line for line in lines if line.startswith(("model name", "flags", "Features"))]
    return "\n".join(sorted(set(wanted))) or platform.machine()


def library_path() -> Path:
    """Where the compiled library for this source, compiler, flags and CPU lives."""
    version = subprocess.run([_compiler(), "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    digest = hashlib.sha256("\0".join([SOURCE.read_text(), " ".join(FLAGS), version, _cpu()])
                            .encode()).hexdigest()[:16]
    return _cache_dir() / f"sinkhorn-{digest}.so"


def enabled() -> bool:
    """Whether $RANKCOLLAPSE_NATIVE asks for the C loops: unset, empty, 1, true, on or yes
    (any case) ask for them; 0, false, off or no do not; any other value is a ValueError (a
    misspelt switch silently ignored would run the engine the user meant to avoid)."""
    value = os.environ.get("RANKCOLLAPSE_NATIVE", "")
    word = value.strip().lower()
    if word in _OFF:
        return False
    if word in _ON:
        return True
    raise ValueError(f"RANKCOLLAPSE_NATIVE={value!r} is neither on ({', '.join(_ON[1:])}) nor "
                     f"off ({', '.join(_OFF)}); leave it unset to use the C loops")


def _self_check(library: ctypes.CDLL, path: Path) -> None:
    """Refuse a library that does not compute Sinkhorn (a foreign one with the right names, a
    miscompiled one): on a small known matrix it must give the fixed point, found here in
    float64, within 1e-5, so that its rows and columns sum to 1."""
    x = torch.tensor([[[0.0, 1.0, 2.0], [1.0, 0.0, -1.0], [2.0, -1.0, 0.5]]])
    p, error = torch.full_like(x, math.nan), torch.empty(1)
    converged, underflow = torch.empty(1, dtype=torch.uint8), torch.empty(1, dtype=torch.uint8)
    status = library.rc_forward(_ptr(x), None, 1, 3, 200, -1.0, math.exp(-40), _ptr(p),
                                _ptr(error), _ptr(converged), _ptr(underflow), 1)
    expected = x.double().exp()
    for _ in range(100):
        expected = expected / expected.sum(-1, keepdim=True)
        expected = expected / expected.sum(-2, keepdim=True)
    if status or not torch.allclose(p.double(), expected, rtol=0, atol=1e-5):
        raise CorruptFile(f"{path} does not compute the Sinkhorn matrix of a known matrix "
                          f"(status {status}, row sums {p.sum(-1).flatten().tolist()})")


def _checked(path: Path) -> ctypes.CDLL:
    """The library at `path` loaded, with the functions of `_SIGNATURES`, passing
    `_self_check`: CorruptFile otherwise. Only for a file known to be whole: mapping a
    truncated one kills the process with SIGBUS, which nothing here could catch."""
    try:
        library = ctypes.CDLL(str(path))
        for name, argtypes in _SIGNATURES.items():
            function = getattr(library, name)
            function.argtypes, function.restype = argtypes, ctypes.c_int
    except (OSError, AttributeError) as error:  # not a library; one without our functions
        raise CorruptFile(f"{path} cannot be loaded as the C loops: {error}") from error
    _self_check(library, path)
    return library


def _build(path: Path) -> ctypes.CDLL:
    """Compile the source into a temporary file, check that it is not empty and that it loads
    and computes (`_checked`), then publish it as `path` with its digest beside it
    (`files.write_verified`: atomic, and readable by all as any file the project caches).

    Returns the library loaded from the temporary name: a process keeps a library it has
    loaded under its name, so a rebuild must not be loaded under the name of a refused one."""
    built = []

    def compile_into(tmp: Path) -> None:
        result = subprocess.run([_compiler(), *FLAGS, str(SOURCE), "-o", str(tmp), "-lm"],
                                capture_output=True, text=True, timeout=120)
        if result.returncode:
            raise OSError(f"{_compiler()} failed on {SOURCE.name}: {result.stderr.strip()[-500:]}")
        if tmp.stat().st_size == 0:
            raise OSError(f"{_compiler()} exited 0 but wrote nothing")
        built.append(_checked(tmp))

    write_verified(path, compile_into)
    return built[0]


def _open_or_build(path: Path) -> ctypes.CDLL:
    """The library at `path` if its digest fits and it passes `_checked`. Else, under a lock
    that other processes building it wait on: the one another process has just built, or a
    new build, any bad file set aside first. A good library is used without a lock or a
    write (a shared cache may be read-only)."""
    try:
        return _checked(check_verified(path))
    except CorruptFile:
        pass
    with file_lock(path.with_name(f".{path.name}.lock")):
        try:
            return _checked(check_verified(path))  # built by another process while we waited
        except CorruptFile as error:
            if path.exists():  # truncated, without its digest, empty, foreign: never again
                set_aside(path, str(error))
        return _build(path)


def _load() -> ctypes.CDLL | None:
    """The checked library (built if needed), or None with one warning saying why and what
    to do, whatever the failure: the torch engine computes the same."""
    if not enabled():
        return None
    where = _cache_dir()
    try:
        where = library_path()
        return _open_or_build(where)
    except Exception as error:  # a compiler, a linker, a file system, a foreign library
        warnings.warn(
            f"the C Sinkhorn loops {where} could not be built or loaded ({error}); the slower "
            f"torch engine runs instead. Each new process tries again with $CC, else cc (gcc "
            f"with OpenMP), and sets a bad library aside itself; RANKCOLLAPSE_NATIVE=0 chooses "
            f"the torch engine without this warning",
            RuntimeWarning, stacklevel=3)
        return None


def _library() -> ctypes.CDLL | None:
    with _lock:
        if "library" not in _state:
            _state["library"] = _load()
        return _state["library"]


def available() -> bool:
    """Whether the C loops are built and loaded (building them on the first call)."""
    return _library() is not None


def applies(t: torch.Tensor) -> bool:
    """Whether `t` is computed by the C loops: float32 on the CPU, with the library loaded."""
    return t.device.type == "cpu" and t.dtype == torch.float32 and available()


def _check(status: int) -> None:
    if status:
        raise MemoryError("the C Sinkhorn loops could not allocate their work space")


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _flags(flags: torch.Tensor | None) -> torch.Tensor | None:
    """Boolean flags as the bytes the C loops read (None stays None)."""
    return None if flags is None else flags.to(torch.uint8).contiguous()


def forward(logits: torch.Tensor, mask: torch.Tensor | None, half_steps: int, tol: float,
            floor: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sinkhorn of each matrix of `logits` `(B, n, n)` (float32, CPU; `mask` `(B, n)`), as
    `_sinkhorn_engine` computes it: half-step 1, the rows' softmax with the padding as an
    identity block; half-step 2, the column division; the scaling-domain half-steps with
    each matrix stopping once its row error is at most `tol` (checked before every row step;
    `tol` < 0: never); the last half-step as an explicit normalization. Where the torch engine
    checks on a schedule and lets converged matrices run on with the others, here each stops
    at its first check below `tol`.

    Returns P `(B, n, n)`, which matrices converged, the marginal error the last half-step
    left in those that did not (0 in those that did), and which hold a real kernel entry below
    `floor` (they would underflow in the scaling domain; P is not written for them)."""
    logits = logits.contiguous()
    count, n = logits.shape[0], logits.shape[-1]
    flags = _flags(mask)
    p, error = torch.empty_like(logits), torch.empty(count)
    converged = torch.empty(count, dtype=torch.uint8)
    underflow = torch.empty(count, dtype=torch.uint8)
    _check(_library().rc_forward(
        _ptr(logits), _ptr(flags), count, n, half_steps, tol, floor, _ptr(p), _ptr(error),
        _ptr(converged), _ptr(underflow), torch.get_num_threads()))
    return p, converged.bool(), error, underflow.bool()


def unrolled_backward(logits: torch.Tensor, grad_p: torch.Tensor, mask: torch.Tensor | None,
                      half_steps: int, floor: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact gradient with respect to each matrix of `logits` `(B, n, n)` of
    `half_steps` half-steps of Sinkhorn (as `forward` computes them, every one recomputed),
    given the gradient with respect to P (taken as zero on pairs with a padded token; the
    gradient there is zero): `_scaling_backward` of `_iterate`, then the column division and
    the softmax. Returns it and which matrices hold a real kernel entry below `floor`
    (nothing is written for those)."""
    logits, grad_p = logits.contiguous(), grad_p.contiguous()
    count, n = logits.shape[0], logits.shape[-1]
    flags = _flags(mask)
    out, underflow = torch.empty_like(logits), torch.empty(count, dtype=torch.uint8)
    _check(_library().rc_unrolled_backward(
        _ptr(logits), _ptr(grad_p), _ptr(flags), count, n, half_steps, floor, _ptr(out),
        _ptr(underflow), torch.get_num_threads()))
    return out, underflow.bool()


def implicit_backward(p: torch.Tensor, grad_p: torch.Tensor, mask: torch.Tensor | None,
                      gap: float, chosen: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """The implicit gradient at each fixed point P `(B, n, n)` (`implicit_backward` of the
    engine, by Cholesky per matrix; `grad_p` is taken as zero on pairs with a padded token),
    and per matrix whether it was solved: its system positive definite in float32 with a
    smallest eigenvalue (estimated as the engine does) of at least `gap`. Matrices not
    `chosen` `(B,)` (all when None) count as solved; they, and those not solved, are left
    unwritten."""
    p, grad_p = p.contiguous(), grad_p.contiguous()
    count, n = p.shape[0], p.shape[-1]
    flags, picked = _flags(mask), _flags(chosen)
    out, ok = torch.empty_like(p), torch.empty(count, dtype=torch.uint8)
    _check(_library().rc_implicit_backward(
        _ptr(p), _ptr(grad_p), _ptr(flags), _ptr(picked), count, n, gap, _ptr(out), _ptr(ok),
        torch.get_num_threads()))
    return out, ok.bool()
