"""minigluon_ext: C kernels against the NumPy fallback and independent references.

The big-array bound is set to 64 elements here, so sizes around it and the thread counts
1..4 exercise the threaded split on small, fast arrays.
"""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import minigluon_ext as ext
from minigluon.base import DTypeError, ShapeError
from minigluon.config import ConfigError, usable_cores
from minigluon_ext import fallback

REPO = pathlib.Path(__file__).resolve().parents[2]
BOUND = 64
SIZES = [0, 1, 15, 16, 17, 33, BOUND - 1, BOUND, BOUND + 1, 1000, 4099]
DTYPES = [np.float16, np.float32, np.float64]
THREADS = [1, 2, 3, 4]
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
# C path settings: SIMD with streaming stores forced on, the defaults, and the portable code
C_MODES = {"simd+stream": {"stream_bytes": 0}, "simd": {},
           "portable": {"avx2": False, "f16c": False, "stream_bytes": 0}}


@pytest.fixture(autouse=True)
def small_bound(monkeypatch):
    monkeypatch.setenv("MXNET_KVSTORE_BIGARRAY_BOUND", str(BOUND))
    monkeypatch.delenv("MXNET_KVSTORE_REDUCTION_NTHREADS", raising=False)


@pytest.fixture(params=list(C_MODES))
def c(request):
    """The C path, in one of C_MODES."""
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    kernels = ext.native._kernels
    before = kernels.set_tuning(**C_MODES[request.param])
    yield ext.native
    kernels.set_tuning(**before)


def same_bits(x, y):
    assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, x.shape, y.dtype, y.shape)
    bad = np.flatnonzero(x.view(UINT[x.dtype.itemsize]) != y.view(UINT[y.dtype.itemsize]))
    assert bad.size == 0, f"{bad.size} values differ, first at {bad[0]}: " \
                          f"{x.flat[bad[0]]!r} != {y.flat[bad[0]]!r}"


def unaligned(x):
    """A contiguous copy of x that starts at element 1 of a larger array."""
    base = np.empty(x.size + 1, x.dtype)
    view = base[1:].reshape(x.shape)
    view[...] = x
    return view


def randn(rng, n, dtype, scale=1.0):
    return (rng.standard_normal(n) * scale).astype(dtype)


# ---------------------------------------------------------------- sum_into, scale_add

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", THREADS)
def test_sum_into_matches_fallback(c, dtype, nthreads):
    rng = np.random.default_rng(1)
    for n in SIZES:
        arrays = [randn(rng, n, dtype) for _ in range(10)]
        for k in (1, 2, 3, 5, 8, 9, 10):
            for accumulate in (False, True):
                start = randn(rng, n, dtype)
                got, want = start.copy(), start.copy()
                c.sum_into(got, arrays[:k], accumulate, nthreads=nthreads)
                fallback.sum_into(want, arrays[:k], accumulate)
                same_bits(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_into_adds_left_to_right(path, dtype):
    rng = np.random.default_rng(2)
    arrays = [randn(rng, 3000, dtype, scale=10.0 ** j) for j in range(-4, 6)]
    for k in (1, 4, 9, 10):
        want = arrays[0].copy()
        for a in arrays[1:k]:
            want += a
        same_bits(path.sum_into(np.empty_like(want), arrays[:k], nthreads=3), want)
        acc = arrays[-1].copy()
        for a in arrays[:k]:
            acc += a
        same_bits(path.sum_into(arrays[-1].copy(), arrays[:k], accumulate=True), acc)


def test_sum_into_float16_adds_in_float32(path):
    rng = np.random.default_rng(3)
    arrays = [randn(rng, 999, np.float16, scale=300.0) for _ in range(6)]
    want = arrays[0].astype(np.float32)
    for a in arrays[1:]:
        want += a.astype(np.float32)
    with np.errstate(over="ignore"):
        same_bits(path.sum_into(np.empty(999, np.float16), arrays), want.astype(np.float16))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_into_out_may_be_an_input(c, dtype):
    rng = np.random.default_rng(4)
    for k in (3, 9):
        arrays = [randn(rng, 1000, dtype) for _ in range(k)]
        for j in (0, 1, k - 1):
            for accumulate in (False, True):
                got = [a.copy() for a in arrays]
                want = [a.copy() for a in arrays]
                c.sum_into(got[j], got, accumulate, nthreads=2)
                fallback.sum_into(want[j], want, accumulate)
                ref = [a.copy() for a in arrays]
                expect = fallback.sum_into(ref[j].copy(), ref, accumulate)
                same_bits(got[j], want[j])
                same_bits(got[j], expect)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unaligned_views(c, dtype):
    rng = np.random.default_rng(5)
    for n in (17, BOUND + 1, 1000):
        arrays = [unaligned(randn(rng, n, dtype)) for _ in range(9)]
        for k in (2, 5, 9):
            got = unaligned(np.zeros(n, dtype))
            c.sum_into(got, arrays[:k], nthreads=3)
            same_bits(got, fallback.sum_into(np.zeros(n, dtype), arrays[:k]))
        got = unaligned(arrays[0])
        c.scale_add(got, arrays[1], 0.9, -0.1, nthreads=3)
        same_bits(got, fallback.scale_add(arrays[0].copy(), arrays[1], 0.9, -0.1))
        grad = unaligned(randn(rng, n, dtype))
        rdt = np.float32 if dtype == np.float16 else dtype
        r1, r2 = unaligned(np.zeros(n, rdt)), np.zeros(n, rdt)
        same_bits(c.quantize_2bit(grad, r1, 0.5, nthreads=3), fallback.quantize_2bit(grad, r2, 0.5))
        same_bits(r1, r2)


def test_multidimensional_arrays(path):
    rng = np.random.default_rng(6)
    arrays = [randn(rng, 105, np.float32).reshape(3, 5, 7) for _ in range(3)]
    out = path.sum_into(np.empty((3, 5, 7), np.float32), arrays, nthreads=2)
    same_bits(out, arrays[0] + arrays[1] + arrays[2])
    residual = np.zeros((3, 5, 7), np.float32)
    packed = path.quantize_2bit(arrays[0], residual, 0.3)
    assert packed.shape == (ext.words_for(105),)
    decoded = path.dequantize_2bit(packed, 0.3, np.empty((3, 5, 7), np.float32))
    np.testing.assert_allclose(decoded + residual, arrays[0], rtol=1e-6, atol=1e-6)


def test_special_values(c):
    specials = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1e-45, -1e-40, 3e38, 65504.0,
                         65520.0, 6e-8, -6e-5, 1.0, -2.5], np.float64)
    rng = np.random.default_rng(7)
    for dtype in DTYPES:
        with np.errstate(over="ignore", under="ignore"):
            base = np.resize(specials, 200).astype(dtype)
        arrays = [base, rng.permutation(base), randn(rng, 200, dtype)]
        for k in (1, 2, 3):
            got = c.sum_into(np.empty(200, dtype), arrays[:k], nthreads=2)
            want = fallback.sum_into(np.empty(200, dtype), arrays[:k])
            assert np.array_equal(got, want, equal_nan=True)
            finite = ~np.isnan(want)
            same_bits(got[finite], want[finite])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", THREADS)
def test_scale_add_matches_fallback(c, dtype, nthreads):
    rng = np.random.default_rng(8)
    for n in SIZES:
        a = randn(rng, n, dtype)
        for alpha, beta in ((1.0, -0.01), (0.9, 0.1), (0.0, 1.0), (-3.5, 1e-3)):
            start = randn(rng, n, dtype)
            got, want = start.copy(), start.copy()
            c.scale_add(got, a, alpha, beta, nthreads=nthreads)
            fallback.scale_add(want, a, alpha, beta)
            same_bits(got, want)
        got, want = a.copy(), a.copy()
        c.scale_add(got, got, 0.5, 0.25, nthreads=nthreads)  # out is a
        same_bits(got, fallback.scale_add(want, want, 0.5, 0.25))


def test_scale_add_rounds_each_product(path):
    rng = np.random.default_rng(9)
    out, a = randn(rng, 5000, np.float32), randn(rng, 5000, np.float32)
    want = np.float32(0.9) * out + np.float32(-0.1) * a
    same_bits(path.scale_add(out, a, 0.9, -0.1, nthreads=4), want)


# ---------------------------------------------------------------- 2-bit compression

def reference_quantize(grad, residual, threshold):
    """MXNet's 2-bit rule, written out independently: returns (packed words, new residual)."""
    dt = np.dtype(np.float32 if grad.dtype == np.float16 else grad.dtype)
    t = dt.type(threshold)
    r = residual.reshape(-1) + grad.reshape(-1).astype(dt)
    up, down = r >= t, r <= -t
    r = np.where(up, r - t, np.where(down, r + t, r))
    codes = np.zeros(16 * ((r.size + 15) // 16), np.uint8)
    codes[:r.size] = np.where(up, 3, np.where(down, 2, 0))
    per_word = codes.reshape(-1, 16)
    raw = np.zeros((per_word.shape[0], 4), np.uint8)
    for k in range(16):  # value k of a word: byte k // 4, bits 6 - 2 * (k % 4)
        raw[:, k // 4] |= per_word[:, k] << (6 - 2 * (k % 4))
    return raw.reshape(-1).view(np.uint32), r.reshape(residual.shape)


def reference_dequantize(packed, threshold, n, dtype):
    t = np.dtype(dtype).type(threshold)
    raw = packed.view(np.uint8).reshape(-1, 4)
    codes = np.zeros((raw.shape[0], 16), np.uint8)
    for k in range(16):
        codes[:, k] = (raw[:, k // 4] >> (6 - 2 * (k % 4))) & 3
    codes = codes.reshape(-1)[:n]
    return np.select([codes == 3, codes == 2], [t, -t], 0).astype(dtype)


def test_2bit_layout_known_answer(path):
    t = 0.5
    grad = np.array([t, -t, 0, t, 0.7, -2.0, 0.49, -0.49], np.float32)
    residual = np.zeros(8, np.float32)
    packed = path.quantize_2bit(grad, residual, t)
    assert packed.dtype == np.uint32 and packed.shape == (1,)
    assert list(packed.view(np.uint8)) == [0b11_10_00_11, 0b11_10_00_00, 0, 0]
    f = np.float32
    same_bits(residual, np.array([0, 0, 0, 0, f(0.7) - f(t), f(-2.0) + f(t), 0.49, -0.49], f))
    out = path.dequantize_2bit(packed, t, np.empty(8, np.float32))
    same_bits(out, np.array([t, -t, 0, t, t, -t, 0, 0], np.float32))


def test_2bit_code_01_decodes_to_zero(path):
    packed = np.frombuffer(bytes([0b01_11_10_01, 0, 0, 0]), np.uint32).copy()
    out = path.dequantize_2bit(packed, 2.0, np.full(4, 9.0, np.float64))
    same_bits(out, np.array([0.0, 2.0, -2.0, 0.0]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", THREADS)
def test_2bit_rounds_match_reference(c, dtype, nthreads):
    rng = np.random.default_rng(10)
    rdt = np.float32 if dtype == np.float16 else dtype
    threshold = 0.5
    for n in SIZES:
        r_c, r_np = np.zeros(n, rdt), np.zeros(n, rdt)
        r_ref = np.zeros(n, rdt)
        sent = np.zeros(n, np.float64)
        total = np.zeros(n, np.float64)
        for _ in range(4):
            grad = randn(rng, n, dtype, scale=0.4)
            total += grad
            p_c = c.quantize_2bit(grad, r_c, threshold, nthreads=nthreads)
            p_np = fallback.quantize_2bit(grad, r_np, threshold)
            p_ref, r_ref = reference_quantize(grad, r_ref, threshold)
            same_bits(p_c, p_ref)
            same_bits(p_np, p_ref)
            same_bits(r_c, r_ref)
            same_bits(r_np, r_ref)
            for out_dtype in DTYPES:
                want = reference_dequantize(p_ref, threshold, n, out_dtype)
                got = c.dequantize_2bit(p_c, threshold, np.empty(n, out_dtype), nthreads=nthreads)
                same_bits(got, want)
                same_bits(fallback.dequantize_2bit(p_np, threshold, np.empty(n, out_dtype)), want)
            sent += reference_dequantize(p_ref, threshold, n, np.float64)
        # error feedback: what was sent plus what is held back is what came in
        np.testing.assert_allclose(sent + r_ref, total, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", THREADS)
def test_dequantize_add_matches_fallback(c, dtype, nthreads):
    rng = np.random.default_rng(11)
    for n in SIZES:
        grad = randn(rng, n, np.float32)
        packed = fallback.quantize_2bit(grad, np.zeros(n, np.float32), 0.25)
        start = randn(rng, n, dtype)
        start[:3] = -0.0  # -0.0 + 0 is +0.0: both paths must add the zeros too
        got, want = start.copy(), start.copy()
        c.dequantize_2bit_add(packed, 0.25, got, nthreads=nthreads)
        fallback.dequantize_2bit_add(packed, 0.25, want)
        same_bits(got, want)
        with np.errstate(over="ignore"):
            expect = (start.astype(np.float32) +
                      reference_dequantize(packed, 0.25, n, dtype).astype(np.float32))
        if dtype == np.float64:
            expect = start + reference_dequantize(packed, 0.25, n, np.float64)
        same_bits(got, expect.astype(dtype))


def test_quantize_into_given_out(path):
    grad = np.linspace(-2, 2, 40, dtype=np.float32)
    out = np.full(3, 0xFFFFFFFF, np.uint32)
    assert path.quantize_2bit(grad, np.zeros(40, np.float32), 1.0, out=out) is out
    same_bits(out, reference_quantize(grad, np.zeros(40, np.float32), 1.0)[0])
    assert out[2] >> 16 == 0  # values past the end are zero codes


# ---------------------------------------------------------------- float16 <-> float32

def test_f16_to_f32_all_values(c):
    halves = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    for p in (c, fallback):
        for nthreads in (1, 3):
            out = p.f16_to_f32(halves, np.empty(2 ** 16, np.float32), nthreads=nthreads)
            same_bits(out, halves.astype(np.float32))


def test_f32_to_f16_matches_numpy(c):
    rng = np.random.default_rng(12)
    edges = np.array([65504, 65519.996, 65520, 2 ** -24, 2 ** -25, 2 ** -25 * 1.0000001,
                      3 * 2 ** -26, 2 ** -14, 2 ** -14 - 2 ** -25, 1 + 2 ** -11,
                      1 + 3 * 2 ** -11, 1e-30, 1e30], np.float32)
    nans = np.array([0x7F800001, 0x7FC00000, 0xFFC00001, 0x7FA00000, 0x7F802000, 0xFFFFFFFF],
                    np.uint32).view(np.float32)
    bits = rng.integers(0, 2 ** 32, 200_001, dtype=np.uint64).astype(np.uint32)
    src = np.concatenate([edges, -edges, nans, bits.view(np.float32)])
    with np.errstate(all="ignore"):
        want = src.astype(np.float16)
    for p in (c, fallback):
        for nthreads in (1, 4):
            same_bits(p.f32_to_f16(src, np.empty(src.size, np.float16), nthreads=nthreads), want)
            out = unaligned(np.zeros(src.size, np.float16))
            same_bits(p.f32_to_f16(unaligned(src), out, nthreads=nthreads), want)


# ---------------------------------------------------------------- argument checks

def f32(*shape):
    return np.zeros(shape, np.float32)


def read_only(x):
    x.flags.writeable = False
    return x


def misaligned(n):
    return np.frombuffer(bytearray(4 * n + 1), np.float32, count=n, offset=1)


def overlapping():
    base = f32(8)
    return base[:4], base[2:6]


BAD_CALLS = [
    ("sum_into", lambda p: p.sum_into(f32(4), [f32(4), f32(5)]), ShapeError,
     r"sum_into: arrays\[1\] has shape \(5,\) but out has shape \(4,\)"),
    ("sum_into", lambda p: p.sum_into(f32(4), [np.zeros(4)]), DTypeError,
     r"sum_into: arrays\[0\] has dtype float64 but out needs float32"),
    ("sum_into", lambda p: p.sum_into(np.zeros(4, np.int32), [f32(4)]), DTypeError,
     r"sum_into: out has dtype int32 \(shape \(4,\)\); supported: float16, float32, float64"),
    ("sum_into", lambda p: p.sum_into(f32(4), [f32(8)[::2]]), ValueError,
     r"sum_into: arrays\[0\] \(shape \(4,\), dtype float32, strides \(8,\)\) is not C-contiguous"),
    ("sum_into", lambda p: p.sum_into(f32(4, 3).T, [f32(3, 4)]), ValueError,
     r"sum_into: out \(shape \(3, 4\), dtype float32.*not C-contiguous"),
    ("sum_into", lambda p: p.sum_into(read_only(f32(4)), [f32(4)]), ValueError,
     r"sum_into: out \(shape \(4,\), dtype float32\) is read-only"),
    ("sum_into", lambda p: p.sum_into(misaligned(4), [f32(4)]), ValueError,
     r"sum_into: out .* is not aligned"),
    ("sum_into", lambda p: p.sum_into(f32(4), []), ValueError, r"sum_into: arrays is empty"),
    ("sum_into", lambda p: p.sum_into(f32(4), f32(2, 4)), TypeError,
     r"sum_into: arrays must be a list or tuple"),
    ("sum_into", lambda p: p.sum_into(f32(4), [[0.0] * 4]), TypeError,
     r"sum_into: arrays\[0\] must be a numpy.ndarray, got list"),
    ("sum_into", lambda p: (lambda o, a: p.sum_into(o, [a]))(*overlapping()), ValueError,
     r"sum_into: out \(shape \(4,\), dtype float32\) partially overlaps arrays\[0\]"),
    ("sum_into", lambda p: p.sum_into(f32(100), [f32(100)], nthreads=0), ValueError,
     r"sum_into: nthreads must be an integer >= 1"),
    ("scale_add", lambda p: p.scale_add(f32(4), f32(2, 2), 1.0, 1.0), ShapeError,
     r"scale_add: a has shape \(2, 2\) but out has shape \(4,\)"),
    ("scale_add", lambda p: p.scale_add(f32(4), np.zeros(4, np.float16), 1.0, 1.0), DTypeError,
     r"scale_add: a has dtype float16 but out needs float32"),
    ("scale_add", lambda p: p.scale_add(read_only(f32(4)), f32(4), 1.0, 1.0), ValueError,
     r"scale_add: out .* is read-only"),
    ("scale_add", lambda p: p.scale_add(f32(4), f32(4), "1", 1.0), TypeError,
     r"scale_add: alpha must be a real number, got str"),
    ("quantize_2bit", lambda p: p.quantize_2bit(f32(4), f32(4), 0.0), ValueError,
     r"quantize_2bit: threshold must be a finite number > 0, got 0.0"),
    ("quantize_2bit", lambda p: p.quantize_2bit(f32(4), f32(4), -1), ValueError,
     r"quantize_2bit: threshold must be a finite number > 0, got -1"),
    ("quantize_2bit", lambda p: p.quantize_2bit(f32(4), f32(4), float("nan")), ValueError,
     r"quantize_2bit: threshold must be a finite number > 0, got nan"),
    ("quantize_2bit", lambda p: p.quantize_2bit(f32(4), f32(4), float("inf")), ValueError,
     r"threshold must be a finite number > 0, got inf"),
    ("quantize_2bit", lambda p: p.quantize_2bit(f32(4), f32(4), 1e-50), ValueError,
     r"quantize_2bit: threshold 1e-50 becomes 0.0 in float32"),
    ("quantize_2bit", lambda p: p.quantize_2bit(np.zeros(4, np.float16), np.zeros(4, np.float16),
                                                0.5), DTypeError,
     r"quantize_2bit: residual has dtype float16 but grad \(float16\) needs float32"),
    ("quantize_2bit", lambda p: p.quantize_2bit(f32(4), f32(5), 0.5), ShapeError,
     r"quantize_2bit: residual has shape \(5,\) but grad \(float32\) has shape \(4,\)"),
    ("quantize_2bit", lambda p: p.quantize_2bit(np.zeros(4, np.int64), f32(4), 0.5), DTypeError,
     r"quantize_2bit: grad has dtype int64"),
    ("quantize_2bit", lambda p: p.quantize_2bit(f32(4), read_only(f32(4)), 0.5), ValueError,
     r"quantize_2bit: residual .* is read-only"),
    ("quantize_2bit", lambda p: p.quantize_2bit(f32(8)[::2], f32(4), 0.5), ValueError,
     r"quantize_2bit: grad .* is not C-contiguous"),
    ("quantize_2bit", lambda p: (lambda x: p.quantize_2bit(x, x, 0.5))(f32(4)), ValueError,
     r"quantize_2bit: residual .* shares memory with grad"),
    ("quantize_2bit", lambda p: p.quantize_2bit(f32(17), f32(17), 0.5,
                                                out=np.zeros(1, np.uint32)), ShapeError,
     r"quantize_2bit: out has shape \(1,\) but grad's 17 values need shape \(2,\)"),
    ("quantize_2bit", lambda p: p.quantize_2bit(f32(4), f32(4), 0.5, out=np.zeros(1, np.int64)),
     DTypeError, r"quantize_2bit: out has dtype int64 \(shape \(1,\)\); supported: uint32"),
    ("dequantize_2bit", lambda p: p.dequantize_2bit(np.zeros(2, np.uint32), 0.5, f32(16)),
     ShapeError, r"dequantize_2bit: packed has shape \(2,\) but out's 16 values \(shape \(16,\)\) "
                 r"need shape \(1,\)"),
    ("dequantize_2bit", lambda p: p.dequantize_2bit(np.zeros(1, np.int32), 0.5, f32(16)),
     DTypeError, r"dequantize_2bit: packed has dtype int32"),
    ("dequantize_2bit", lambda p: p.dequantize_2bit(np.zeros(1, np.uint32), 0, f32(16)),
     ValueError, r"dequantize_2bit: threshold must be a finite number > 0, got 0"),
    ("dequantize_2bit", lambda p: p.dequantize_2bit(np.zeros(1, np.uint32), 0.5,
                                                    read_only(f32(16))),
     ValueError, r"dequantize_2bit: out .* is read-only"),
    ("dequantize_2bit", lambda p: p.dequantize_2bit(np.zeros(1, np.uint32), 0.5, f32(32)[::2]),
     ValueError, r"dequantize_2bit: out .* is not C-contiguous"),
    ("dequantize_2bit_add", lambda p: p.dequantize_2bit_add(np.zeros(1, np.uint32), 1e6,
                                                            np.zeros(3, np.float16)),
     ValueError, r"dequantize_2bit_add: threshold 1000000.0 becomes inf in float16"),
    ("dequantize_2bit_add", lambda p: p.dequantize_2bit_add(np.zeros(2, np.uint32), 1.0, f32(3)),
     ShapeError, r"dequantize_2bit_add: packed has shape \(2,\) but out's 3 values"),
    ("f16_to_f32", lambda p: p.f16_to_f32(f32(4), f32(4)), DTypeError,
     r"f16_to_f32: src has dtype float32 \(shape \(4,\)\); supported: float16"),
    ("f16_to_f32", lambda p: p.f16_to_f32(np.zeros(4, np.float16), f32(5)), ShapeError,
     r"f16_to_f32: out has shape \(5,\) but src has shape \(4,\)"),
    ("f32_to_f16", lambda p: p.f32_to_f16(f32(4), f32(4)), DTypeError,
     r"f32_to_f16: out has dtype float32 \(shape \(4,\)\); supported: float16"),
    ("f32_to_f16", lambda p: p.f32_to_f16(f32(4), read_only(np.zeros(4, np.float16))),
     ValueError, r"f32_to_f16: out .* is read-only"),
]


@pytest.mark.parametrize("fn, call, error, message", BAD_CALLS,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(BAD_CALLS)])
def test_bad_arguments_raise_alike(path, fn, call, error, message):
    with pytest.raises(error, match=message):
        call(path)


def test_public_functions_check_too():
    with pytest.raises(ShapeError, match=r"sum_into: arrays\[0\] has shape"):
        ext.sum_into(f32(4), [f32(3)])
    with pytest.raises(ValueError, match="quantize_2bit: threshold"):
        ext.quantize_2bit(f32(4), f32(4), -0.5)


def test_raw_c_layer_refuses_bad_buffers():
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    k = ext.native._kernels
    lut = np.zeros(4, np.float32)
    calls = [
        lambda: k.sum_into(f32(4), [f32(5)], False, 1),
        lambda: k.sum_into(f32(4), [], False, 1),
        lambda: k.sum_into(f32(8)[::2], [f32(4)], False, 1),
        lambda: k.sum_into(read_only(f32(4)), [f32(4)], False, 1),
        lambda: k.sum_into(b"abcdefgh", [f32(2)], False, 1),
        lambda: k.sum_into(misaligned(4), [f32(4)], False, 1),
        lambda: k.scale_add(f32(4), np.zeros(4), 1.0, 1.0, 1),
        lambda: k.quantize_2bit(f32(17), f32(17), np.zeros(1, np.uint32), 0.5, 1),
        lambda: k.quantize_2bit(f32(4), f32(4), np.zeros(1, np.uint32), -1.0, 1),
        lambda: k.quantize_2bit(f32(4), np.zeros(4), np.zeros(1, np.uint32), 0.5, 1),
        lambda: k.dequantize_2bit(np.zeros(1, np.uint32), f32(17), lut, False, 1),
        lambda: k.dequantize_2bit(np.zeros(1, np.uint32), f32(4), lut[:3], False, 1),
        lambda: k.dequantize_2bit(np.zeros(1, np.uint8), f32(4), lut, False, 1),
        lambda: k.f16_to_f32(f32(4), f32(4), 1),
        lambda: k.f32_to_f16(f32(4), np.zeros(5, np.float16), 1),
    ]
    for call in calls:
        with pytest.raises((ValueError, TypeError)):
            call()
    with pytest.raises(TypeError):
        k.sum_into(np.zeros(4, np.int32), [np.zeros(4, np.int32)], False, 1)


# ---------------------------------------------------------------- threads and backend choice

def test_threads_follow_the_bound(monkeypatch):
    assert ext.threads_for(BOUND) == 1
    assert ext.threads_for(BOUND, nthreads=3) == 1
    assert ext.threads_for(BOUND + 1, nthreads=3) == 3
    assert ext.threads_for(BOUND + 1) == min(4, usable_cores())
    monkeypatch.setenv("MXNET_KVSTORE_REDUCTION_NTHREADS", "1")
    assert ext.threads_for(BOUND + 1) == 1
    monkeypatch.setenv("MXNET_KVSTORE_REDUCTION_NTHREADS", "1000")
    assert ext.threads_for(BOUND + 1) == usable_cores()
    monkeypatch.setenv("MXNET_KVSTORE_REDUCTION_NTHREADS", "two")
    with pytest.raises(ConfigError, match="MXNET_KVSTORE_REDUCTION_NTHREADS must be an integer"):
        ext.threads_for(BOUND + 1)
    monkeypatch.delenv("MXNET_KVSTORE_BIGARRAY_BOUND")
    assert ext.threads_for(1_000_000, nthreads=4) == 1
    assert ext.threads_for(1_000_001, nthreads=4) == 4


def python_with_env(code, **env):
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=full, capture_output=True,
                          text=True, timeout=60)


SHOW_BACKEND = ("import logging; logging.basicConfig(level=logging.DEBUG, format='%(name)s: "
                "%(message)s'); import minigluon_ext as e; print(e.backend(), e.ACTIVE)")


def test_fallback_can_be_forced_and_the_choice_is_logged_once():
    forced = python_with_env(SHOW_BACKEND, MINIGLUON_EXT_FALLBACK="1")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.split() == ["numpy", "numpy"]
    assert forced.stderr.count("minigluon: minigluon_ext: NumPy fallback active "
                               "(MINIGLUON_EXT_FALLBACK=1)") == 1
    default = python_with_env(SHOW_BACKEND, MINIGLUON_EXT_FALLBACK="0")
    assert default.returncode == 0, default.stderr
    assert default.stdout.split() == ["c", "c"]
    assert default.stderr.count("minigluon_ext: C kernels") == 1
    bad = python_with_env(SHOW_BACKEND, MINIGLUON_EXT_FALLBACK="maybe")
    assert bad.returncode != 0 and "MINIGLUON_EXT_FALLBACK must be 0 or 1" in bad.stderr
