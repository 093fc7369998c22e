"""minigluon_ext: C kernels for the kvstore's hot loops, with a NumPy fallback.

Kernels (contiguous float16, float32 and float64 NumPy arrays; each returns its output):

- `sum_into(out, arrays, accumulate=False)`: out = a0 + a1 + ...; out += ... with accumulate
- `scale_add(out, a, alpha, beta)`: out = alpha*out + beta*a
- `quantize_2bit(grad, residual, threshold, out=None)` -> packed uint32 codes
- `dequantize_2bit(packed, threshold, out)` / `dequantize_2bit_add(packed, threshold, out)`
- `f16_to_f32(src, out)` / `f32_to_f16(src, out)`

Every kernel takes `nthreads=None`.  Arrays with more than MXNET_KVSTORE_BIGARRAY_BOUND
elements (default 1,000,000) are split over MXNET_KVSTORE_REDUCTION_NTHREADS threads
(default 4, capped at the usable cores); `nthreads=k` overrides that count, uncapped.
Smaller arrays always use one thread.  See `threads_for`.

Results (both paths give the same bits; NaN payloads aside when two NaNs meet):

- sums add left to right, each step rounded to the dtype:
  out = ((a0 + a1) + a2) + ...  or, with accumulate, ((out + a0) + a1) + ...;
  float16 sums (and scale_add) run in float32 and round to float16 once, at the end.
- scale_add rounds both products, then adds them (no fused multiply-add).
- f32_to_f16 rounds to nearest even and overflows to inf, like NumPy's astype; f16_to_f32
  is exact.  NaN bits are kept as NumPy keeps them.

2-bit compression (MXNet's rule, with error feedback in `residual`), per value:

    r += g
    if r >= t:    code 0b11 (stands for +t),  r -= t
    elif r <= -t: code 0b10 (stands for -t),  r += t
    else:         code 0b00 (stands for 0)

Bit layout: 16 codes per uint32 word; value i is in word i // 16, byte (i % 16) // 4 of
that word in memory order, at bit shift 6 - 2 * (i % 4) within the byte (the first of
each 4 values in the two most significant bits, as in MXNet's kernel).  Bits past the
last value are 0; code 0b01 is never written and decodes to 0.  Example: grad
[t, -t, 0, t] with a zero residual packs into first byte 0b11_10_00_11 = 0xE3.

The rule runs in the grad's dtype, except for float16 grads, which run in float32 and
need a float32 residual (multi_precision style).  The threshold is rounded to that dtype
(and, for dequantize, to out's dtype); it must be finite and > 0 after rounding.

Path: the C extension `_kernels` when it is built, else (or with MINIGLUON_EXT_FALLBACK=1)
the NumPy code in `minigluon_ext.fallback`.  `ACTIVE` / `backend()` say which ('c' or
'numpy'); the choice is logged once at debug level on logger 'minigluon'.  `native` is the
C path (None when not built) and `fallback` the NumPy path, for tests and comparisons.

>>> import numpy as np, minigluon_ext as ext
>>> a, b = np.ones(4, np.float32), np.full(4, 2, np.float32)
>>> ext.sum_into(np.empty(4, np.float32), [a, b])
array([3., 3., 3., 3.], dtype=float32)
"""
import logging

from minigluon.config import ext_force_fallback

from . import fallback
from ._checks import threads_for, words_for

try:
    from . import native
    _missing = None
except ImportError as err:  # extension not built: the NumPy path still works
    native = None
    _missing = err

if ext_force_fallback():
    _impl, _why = fallback, "MINIGLUON_EXT_FALLBACK=1"
elif native is None:
    _impl, _why = fallback, f"C extension not built: {_missing}"
else:
    _impl, _why = native, "built"

ACTIVE = "c" if _impl is native else "numpy"

logging.getLogger("minigluon").debug("minigluon_ext: %s active (%s)", _impl.describe(), _why)

__all__ = ["ACTIVE", "backend", "sum_into", "scale_add", "quantize_2bit", "dequantize_2bit",
           "dequantize_2bit_add", "f16_to_f32", "f32_to_f16", "threads_for", "words_for",
           "native", "fallback"]


def backend():
    """'c' when the C kernels are in use, 'numpy' when the fallback is."""
    return ACTIVE


def sum_into(out, arrays, accumulate=False, nthreads=None):
    """Sum arrays into out, left to right: out = a0 + a1 + ... (accumulate: out += ...).

    Parameters
    ----------
    out : ndarray (float16/32/64, C-contiguous, writable); may be one of `arrays`
    arrays : list or tuple of ndarrays with out's shape and dtype
    accumulate : bool, add to out's current values instead of overwriting them
    nthreads : int, threads for a big array (None: MXNET_KVSTORE_REDUCTION_NTHREADS)

    >>> sum_into(out, [g0, g1, g2])             # out = g0 + g1 + g2
    """
    return _impl.sum_into(out, arrays, accumulate, nthreads)


def scale_add(out, a, alpha, beta, nthreads=None):
    """out = alpha*out + beta*a, in place (optimizer updates).

    >>> scale_add(weight, grad, 1.0, -lr)       # weight -= lr * grad
    """
    return _impl.scale_add(out, a, alpha, beta, nthreads)


def quantize_2bit(grad, residual, threshold, out=None, nthreads=None):
    """Compress grad to 2 bits per value with error feedback; return the packed uint32 codes.

    residual (grad's shape; float32 for float16 grads, else grad's dtype) is updated in
    place.  `out`, if given, must be a uint32 array of shape (words_for(grad.size),).

    >>> packed = quantize_2bit(grad, residual, 0.5)   # residual starts at zeros
    """
    return _impl.quantize_2bit(grad, residual, threshold, out, nthreads)


def dequantize_2bit(packed, threshold, out, nthreads=None):
    """Write into out the values (+threshold, -threshold or 0) the 2-bit codes stand for.

    >>> dequantize_2bit(packed, 0.5, np.empty_like(grad))
    """
    return _impl.dequantize_2bit(packed, threshold, out, nthreads)


def dequantize_2bit_add(packed, threshold, out, nthreads=None):
    """Add to out the values the 2-bit codes stand for (a server summing pushes).

    >>> dequantize_2bit_add(packed, 0.5, summed)
    """
    return _impl.dequantize_2bit_add(packed, threshold, out, nthreads)


def f16_to_f32(src, out, nthreads=None):
    """Widen float16 src into float32 out (exact).

    >>> f16_to_f32(weight16, master32)
    """
    return _impl.f16_to_f32(src, out, nthreads)


def f32_to_f16(src, out, nthreads=None):
    """Round float32 src into float16 out (nearest even, overflow to inf).

    >>> f32_to_f16(master32, weight16)
    """
    return _impl.f32_to_f16(src, out, nthreads)
