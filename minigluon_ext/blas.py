"""The cblas gemm of the BLAS that NumPy loaded, as C function addresses, for C kernels
that multiply inside loops of their own (src/lstm_sequence.c: a recurrence's per-step
products, without coming back to Python between steps).

Only OpenBLAS is looked at (NumPy's wheels bundle it; threadpoolctl finds the loaded
copy): its symbols say how wide its integers are. NumPy's own build names them
`scipy_cblas_sgemm64_` (64-bit integers); a plain OpenBLAS says `USE64BITINT` in its
configuration string when it was built with them. Elsewhere (MKL, BLIS, no BLAS found)
`gemm()` gives None and callers keep their NumPy path.
"""
import ctypes
import functools

import numpy as np

# (prefix, suffix, 64-bit integers or None: ask the configuration string)
_SPELLINGS = (("scipy_", "64_", True), ("", "64_", True), ("scipy_", "", None), ("", "", None))
_ROUTINES = {np.dtype(np.float32): "cblas_sgemm", np.dtype(np.float64): "cblas_dgemm"}


def gemm(dtype):
    """(address, ilp64) of the loaded OpenBLAS's cblas gemm for `dtype` (float32: sgemm,
    float64: dgemm), or None where there is none to call.

    >>> address, ilp64 = gemm(np.float32)     # then passed to a C kernel
    """
    routine = _ROUTINES.get(np.dtype(dtype))
    return None if routine is None else _find(routine)


@functools.lru_cache(maxsize=None)
def _find(routine):
    for path in _openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix, ilp64 in _SPELLINGS:
            fn = getattr(lib, f"{prefix}{routine}{suffix}", None)
            if fn is None:
                continue
            if ilp64 is None:
                ilp64 = _built_ilp64(lib, prefix, suffix)
            if ilp64 is not None:
                return ctypes.cast(fn, ctypes.c_void_p).value, ilp64
    return None


def _openblas_paths():
    from threadpoolctl import ThreadpoolController
    return [c.filepath for c in ThreadpoolController().lib_controllers
            if c.user_api == "blas" and c.internal_api == "openblas"]


def _built_ilp64(lib, prefix, suffix):
    """True/False from OpenBLAS's configuration string; None where it cannot be read."""
    get = getattr(lib, f"{prefix}openblas_get_config{suffix}", None)
    if get is None:
        return None
    get.restype = ctypes.c_char_p
    return b"USE64BITINT" in (get() or b"")
