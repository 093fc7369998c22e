"""Argument checks and the thread plan, shared by the C path and the NumPy fallback.

Both paths run these checks before touching memory, so they refuse the same inputs with
the same exceptions and messages: TypeError (`DTypeError`) for a wrong type or dtype,
ValueError (`ShapeError`) for a wrong shape or length, ValueError for a non-contiguous,
misaligned, read-only or overlapping array and for a bad threshold or thread count.
"""
import math
import numbers

import numpy as np

from minigluon.base import DTypeError, ShapeError
from minigluon.config import kvstore_bigarray_bound, kvstore_reduction_nthreads

FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
WORD = np.dtype(np.uint32)
VALUES_PER_WORD = 16


def threads_for(n, nthreads=None):
    """Threads a kernel uses on `n` elements: 1 up to the big-array bound, else `nthreads`.

    `nthreads=None` means MXNET_KVSTORE_REDUCTION_NTHREADS capped at the usable cores; a
    number given here is used as is (tests use it to split small arrays 1..4 ways).
    """
    if n <= kvstore_bigarray_bound():
        return 1
    return kvstore_reduction_nthreads() if nthreads is None else nthreads


def words_for(n):
    """Number of uint32 words that hold the 2-bit codes of `n` values."""
    return (n + VALUES_PER_WORD - 1) // VALUES_PER_WORD


def same_memory(x, y):
    """True when x and y are the very same bytes (same start, same size)."""
    return x.__array_interface__["data"][0] == y.__array_interface__["data"][0] and \
        x.nbytes == y.nbytes


def _describe(x):
    return f"shape {x.shape}, dtype {x.dtype}"


def array(fn, name, x, writable=False, dtypes=FLOATS):
    """Check that x is a C-contiguous, aligned ndarray of one of `dtypes` (writable if asked)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{fn}: {name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype not in dtypes:
        allowed = ", ".join(str(d) for d in dtypes)
        raise DTypeError(f"{fn}: {name} has dtype {x.dtype} (shape {x.shape}); "
                         f"supported: {allowed}")
    if not x.flags.c_contiguous:
        fix = ("write into a contiguous array, then copy it into the view" if writable
               else f"pass np.ascontiguousarray({name})")
        raise ValueError(f"{fn}: {name} ({_describe(x)}, strides {x.strides}) is not "
                         f"C-contiguous; help: {fix}")
    if not x.flags.aligned:
        raise ValueError(f"{fn}: {name} ({_describe(x)}) is not aligned to its "
                         f"{x.dtype.itemsize}-byte items; help: pass a copy (x.copy())")
    if writable and not x.flags.writeable:
        raise ValueError(f"{fn}: {name} ({_describe(x)}) is read-only; "
                         f"help: pass a writable array")
    return x


def like(fn, name, x, ref_name, ref, dtype=None):
    """Check that x has ref's shape and `dtype` (default: ref's dtype)."""
    dtype = ref.dtype if dtype is None else np.dtype(dtype)
    if x.dtype != dtype:
        raise DTypeError(f"{fn}: {name} has dtype {x.dtype} but {ref_name} needs {dtype}; "
                         f"help: cast with .astype(np.{dtype})")
    if x.shape != ref.shape:
        raise ShapeError(f"{fn}: {name} has shape {x.shape} but {ref_name} has shape "
                         f"{ref.shape}")


def apart(fn, name, x, other_name, other, allow_same=False):
    """Check that x and other share no memory (or are the very same array, if allowed)."""
    if not np.may_share_memory(x, other):
        return
    if allow_same and same_memory(x, other):
        return
    what = "partially overlaps" if allow_same else "shares memory with"
    raise ValueError(f"{fn}: {name} ({_describe(x)}) {what} {other_name} "
                     f"({_describe(other)}); help: pass separate arrays")


def real(fn, name, value):
    """Check that value is a real number and return it as a Python float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a real number, got {type(value).__name__}")
    return float(value)


def threshold(fn, value, dtype):
    """Return the threshold rounded to `dtype`; refuse <= 0, NaN, inf and what rounds to them."""
    v = real(fn, "threshold", value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{fn}: threshold must be a finite number > 0, got {value!r}")
    with np.errstate(over="ignore", under="ignore"):
        t = np.dtype(dtype).type(v)
    if not (np.isfinite(t) and t > 0):
        raise ValueError(f"{fn}: threshold {value!r} becomes {t} in {np.dtype(dtype)}; "
                         f"help: pick a threshold that {np.dtype(dtype)} can hold")
    return t


def threads(fn, n, nthreads):
    """Validate a per-call thread count and plan the threads for n elements."""
    if nthreads is not None and (isinstance(nthreads, bool) or
                                 not isinstance(nthreads, numbers.Integral) or nthreads < 1):
        raise ValueError(f"{fn}: nthreads must be an integer >= 1 or None, got {nthreads!r}")
    return threads_for(n, None if nthreads is None else int(nthreads))


def sum_into(out, arrays, nthreads):
    """Check sum_into's arguments; return (arrays as a tuple, threads)."""
    fn = "sum_into"
    array(fn, "out", out, writable=True)
    if not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{fn}: arrays must be a list or tuple of numpy arrays, "
                        f"got {type(arrays).__name__}")
    if not arrays:
        raise ValueError(f"{fn}: arrays is empty; help: pass at least one array")
    for j, a in enumerate(arrays):
        name = f"arrays[{j}]"
        array(fn, name, a)
        like(fn, name, a, "out", out)
        apart(fn, "out", out, name, a, allow_same=True)
    return tuple(arrays), threads(fn, out.size, nthreads)


def scale_add(out, a, alpha, beta, nthreads):
    """Check scale_add's arguments; return (alpha, beta, threads)."""
    fn = "scale_add"
    array(fn, "out", out, writable=True)
    array(fn, "a", a)
    like(fn, "a", a, "out", out)
    apart(fn, "out", out, "a", a, allow_same=True)
    return real(fn, "alpha", alpha), real(fn, "beta", beta), threads(fn, out.size, nthreads)


def compute_dtype(grad_dtype):
    """The dtype the 2-bit rule and the residual use for a grad dtype (float16 -> float32)."""
    return np.dtype(np.float32) if grad_dtype == np.float16 else np.dtype(grad_dtype)


def quantize_2bit(grad, residual, value, out, nthreads):
    """Check quantize_2bit's arguments; return (threshold, out, threads), allocating out."""
    fn = "quantize_2bit"
    array(fn, "grad", grad)
    array(fn, "residual", residual, writable=True)
    like(fn, "residual", residual, f"grad ({grad.dtype})", grad,
         dtype=compute_dtype(grad.dtype))
    apart(fn, "residual", residual, "grad", grad)
    t = threshold(fn, value, compute_dtype(grad.dtype))
    words = words_for(grad.size)
    if out is None:
        out = np.empty(words, WORD)
    else:
        array(fn, "out", out, writable=True, dtypes=(WORD,))
        if out.shape != (words,):
            raise ShapeError(f"{fn}: out has shape {out.shape} but grad's {grad.size} values "
                             f"need shape ({words},) ({VALUES_PER_WORD} values per uint32 word)")
        apart(fn, "out", out, "grad", grad)
        apart(fn, "out", out, "residual", residual)
    return t, out, threads(fn, grad.size, nthreads)


def dequantize_2bit(fn, packed, value, out, nthreads):
    """Check (de)quantize arguments; return (lut, threads): lut[code] is the code's value."""
    array(fn, "packed", packed, dtypes=(WORD,))
    array(fn, "out", out, writable=True)
    words = words_for(out.size)
    if packed.shape != (words,):
        raise ShapeError(f"{fn}: packed has shape {packed.shape} but out's {out.size} values "
                         f"(shape {out.shape}) need shape ({words},) "
                         f"({VALUES_PER_WORD} values per uint32 word)")
    apart(fn, "out", out, "packed", packed)
    t = threshold(fn, value, out.dtype)
    lut = np.array([0, 0, -t, t], dtype=out.dtype)
    return lut, threads(fn, out.size, nthreads)


def convert(fn, src, out, src_dtype, out_dtype, nthreads):
    """Check a dtype conversion's arguments; return threads."""
    array(fn, "src", src, dtypes=(np.dtype(src_dtype),))
    array(fn, "out", out, writable=True, dtypes=(np.dtype(out_dtype),))
    if out.shape != src.shape:
        raise ShapeError(f"{fn}: out has shape {out.shape} but src has shape {src.shape}")
    apart(fn, "out", out, "src", src)
    return threads(fn, src.size, nthreads)
