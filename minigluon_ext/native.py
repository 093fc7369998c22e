"""The C path: the shared argument checks, then the compiled kernels in `_kernels`.

Importing this module raises ImportError when the extension was not built.
"""
from . import _checks as check
from . import _kernels


def sum_into(out, arrays, accumulate=False, nthreads=None):
    """out = a0 + a1 + ... (out = out + a0 + ... with accumulate), in C."""
    arrays, threads = check.sum_into(out, arrays, nthreads)
    _kernels.sum_into(out, arrays, bool(accumulate), threads)
    return out


def scale_add(out, a, alpha, beta, nthreads=None):
    """out = alpha*out + beta*a, in C."""
    alpha, beta, threads = check.scale_add(out, a, alpha, beta, nthreads)
    _kernels.scale_add(out, a, alpha, beta, threads)
    return out


def quantize_2bit(grad, residual, threshold, out=None, nthreads=None):
    """2-bit codes of residual + grad, updating residual in place, in C."""
    t, out, threads = check.quantize_2bit(grad, residual, threshold, out, nthreads)
    _kernels.quantize_2bit(grad, residual, out, float(t), threads)
    return out


def dequantize_2bit(packed, threshold, out, nthreads=None):
    """out = the values the 2-bit codes stand for, in C."""
    lut, threads = check.dequantize_2bit("dequantize_2bit", packed, threshold, out, nthreads)
    _kernels.dequantize_2bit(packed, out, lut, False, threads)
    return out


def dequantize_2bit_add(packed, threshold, out, nthreads=None):
    """out += the values the 2-bit codes stand for, in C."""
    lut, threads = check.dequantize_2bit("dequantize_2bit_add", packed, threshold, out,
                                         nthreads)
    _kernels.dequantize_2bit(packed, out, lut, True, threads)
    return out


def f16_to_f32(src, out, nthreads=None):
    """out = src widened from float16 to float32 (exact), in C."""
    threads = check.convert("f16_to_f32", src, out, "float16", "float32", nthreads)
    _kernels.f16_to_f32(src, out, threads)
    return out


def f32_to_f16(src, out, nthreads=None):
    """out = src rounded from float32 to float16 (nearest even), in C."""
    threads = check.convert("f32_to_f16", src, out, "float32", "float16", nthreads)
    _kernels.f32_to_f16(src, out, threads)
    return out


def describe():
    """A few words on this path for the log: which SIMD paths the CPU enables."""
    feats = _kernels.tuning()
    simd = ", ".join(name for name in ("avx2", "f16c") if feats[name]) or "baseline only"
    return f"C kernels ({simd})"
