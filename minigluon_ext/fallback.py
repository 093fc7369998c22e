"""The NumPy path: the same kernels in plain NumPy, giving the same bits as the C code.

It runs the same argument checks as the C path (`_checks`) and follows the C code's order
of operations exactly: sums left to right in the array's dtype (float16 in float32, rounded
once), products rounded before they are added (no fused multiply-add), the 2-bit rule and
bit layout described in `minigluon_ext`.  It ignores `nthreads`: the C code's results do
not depend on how the work is split.
"""
import numpy as np

from . import _checks as check

F32 = np.float32


def sum_into(out, arrays, accumulate=False, nthreads=None):
    """out = a0 + a1 + ... (out = out + a0 + ... with accumulate), in NumPy."""
    arrays, _ = check.sum_into(out, arrays, nthreads)
    terms = ([out] if accumulate else []) + list(arrays)
    with np.errstate(all="ignore"):
        if out.dtype == np.float16:
            acc = terms[0].astype(F32)
            _add_all(acc, terms[1:])
            np.copyto(out, acc, casting="same_kind")
        else:
            _sum_same_dtype(out, terms)
    return out


def _add_all(acc, terms):
    for t in terms:
        np.add(acc, t, out=acc)


def _sum_same_dtype(out, terms):
    if any(check.same_memory(out, t) for t in terms[1:]):
        acc = terms[0].copy()  # out is also a later input: sum aside, then copy
        _add_all(acc, terms[1:])
        np.copyto(out, acc)
    else:
        if terms[0] is not out:
            np.copyto(out, terms[0])
        _add_all(out, terms[1:])


def scale_add(out, a, alpha, beta, nthreads=None):
    """out = alpha*out + beta*a, in NumPy."""
    alpha, beta, _ = check.scale_add(out, a, alpha, beta, nthreads)
    with np.errstate(all="ignore"):
        if out.dtype == np.float16:
            acc = out.astype(F32)
            _scale_add(acc, a.astype(F32), F32(alpha), F32(beta))
            np.copyto(out, acc, casting="same_kind")
        else:
            kind = out.dtype.type
            _scale_add(out, a, kind(alpha), kind(beta))
    return out


def _scale_add(out, a, alpha, beta):
    scaled = np.multiply(a, beta)  # first: a may be out itself
    np.multiply(out, alpha, out=out)
    np.add(out, scaled, out=out)


def quantize_2bit(grad, residual, threshold, out=None, nthreads=None):
    """2-bit codes of residual + grad, updating residual in place, in NumPy."""
    t, out, _ = check.quantize_2bit(grad, residual, threshold, out, nthreads)
    r = residual.reshape(-1)
    with np.errstate(all="ignore"):
        np.add(r, grad.reshape(-1), out=r)
        pos = r >= t
        neg = r <= -t
        np.subtract(r, t, out=r, where=pos)
        np.add(r, t, out=r, where=neg)
    codes = (pos.view(np.uint8) * np.uint8(3)) | (neg.view(np.uint8) * np.uint8(2))
    pack_codes(codes, out)
    return out


def dequantize_2bit(packed, threshold, out, nthreads=None):
    """out = the values the 2-bit codes stand for, in NumPy."""
    lut, _ = check.dequantize_2bit("dequantize_2bit", packed, threshold, out, nthreads)
    np.copyto(out.reshape(-1), lut[unpack_codes(packed, out.size)])
    return out


def dequantize_2bit_add(packed, threshold, out, nthreads=None):
    """out += the values the 2-bit codes stand for, in NumPy."""
    lut, _ = check.dequantize_2bit("dequantize_2bit_add", packed, threshold, out, nthreads)
    values = lut[unpack_codes(packed, out.size)]
    flat = out.reshape(-1)
    with np.errstate(all="ignore"):
        if out.dtype == np.float16:
            np.copyto(flat, flat.astype(F32) + values.astype(F32), casting="same_kind")
        else:
            np.add(flat, values, out=flat)
    return out


def f16_to_f32(src, out, nthreads=None):
    """out = src widened from float16 to float32 (exact), in NumPy."""
    check.convert("f16_to_f32", src, out, "float16", "float32", nthreads)
    np.copyto(out, src, casting="safe")
    return out


def f32_to_f16(src, out, nthreads=None):
    """out = src rounded from float32 to float16 (nearest even), in NumPy."""
    check.convert("f32_to_f16", src, out, "float32", "float16", nthreads)
    with np.errstate(all="ignore"):
        np.copyto(out, src, casting="same_kind")
    return out


def pack_codes(codes, out):
    """Pack 2-bit codes into uint32 words: value k of a word in byte k//4, shift 6 - 2*(k%4)."""
    padded = np.zeros(out.size * check.VALUES_PER_WORD, np.uint8)
    padded[:codes.size] = codes
    q = padded.reshape(-1, 4)
    out.view(np.uint8)[:] = (q[:, 0] << 6) | (q[:, 1] << 4) | (q[:, 2] << 2) | q[:, 3]


def unpack_codes(packed, n):
    """The first n 2-bit codes held in packed, as uint8 values 0..3."""
    b = packed.view(np.uint8)
    q = np.empty((b.size, 4), np.uint8)
    q[:, 0] = b >> 6
    q[:, 1] = (b >> 4) & 3
    q[:, 2] = (b >> 2) & 3
    q[:, 3] = b & 3
    return q.reshape(-1)[:n]


def describe():
    """A few words on this path for the log."""
    return "NumPy fallback"
