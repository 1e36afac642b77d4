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
Where no compiler works, or with
RANKCOLLAPSE_NATIVE=0, `available()` is False and the torch engine runs instead (with one
warning saying why, when the build failed).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("_sinkhorn_native.c")
FLAGS = ("-O3", "-march=native", "-std=c11", "-fopenmp", "-fPIC", "-shared", "-Wall",
         "-Werror")
_I64, _INT, _F32, _PTR = ctypes.c_int64, ctypes.c_int, ctypes.c_float, ctypes.c_void_p
_SIGNATURES = {
    "rc_forward": (_PTR, _PTR, _I64, _I64, _I64, _F32, _F32, _PTR, _PTR, _PTR, _PTR, _INT),
    "rc_unrolled_backward": (_PTR, _PTR, _PTR, _I64, _I64, _I64, _F32, _PTR, _PTR, _INT),
    "rc_implicit_backward": (_PTR, _PTR, _PTR, _PTR, _I64, _I64, _F32, _PTR, _PTR, _INT),
}

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


def _build(path: Path) -> None:
    """Compile the source into `path` atomically: concurrent builders each write their own
    temporary file, and the last rename wins with an identical library."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        result = subprocess.run([_compiler(), *FLAGS, str(SOURCE), "-o", tmp, "-lm"],
                                capture_output=True, text=True, timeout=120)
        if result.returncode:
            raise OSError(f"{_compiler()} failed on {SOURCE.name}: {result.stderr.strip()[-500:]}")
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _load() -> ctypes.CDLL | None:
    if os.environ.get("RANKCOLLAPSE_NATIVE", "1") == "0":
        return None
    try:
        path = library_path()
        if not path.is_file():
            _build(path)
        library = ctypes.CDLL(str(path))
    except (OSError, subprocess.SubprocessError) as error:
        warnings.warn(f"the C Sinkhorn loops could not be built ({error}); the slower torch "
                      f"engine runs instead (set RANKCOLLAPSE_NATIVE=0 to silence this)",
                      RuntimeWarning, stacklevel=3)
        return None
    for name, argtypes in _SIGNATURES.items():
        function = getattr(library, name)
        function.argtypes, function.restype = argtypes, ctypes.c_int
    return library


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
