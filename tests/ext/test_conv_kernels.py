"""minigluon_ext layer kernels: C against the NumPy fallback, references and bad input.

The kernels behind host Convolution, Pooling, BatchNorm and relu: im2col/col2im, swap01,
the Winograd F(2x2, 3x3) transforms, max pooling, the batch-norm statistics and maps, and
relu.  Except for the two batch-norm reductions (float64 sums in another order), C and
fallback must agree bit for bit, for every thread count.
"""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import minigluon as mx
import minigluon_ext as ext
from minigluon import autograd, nd
from minigluon.base import DTypeError, ShapeError
from minigluon.ndarray import conv_host as ops_conv   # the knobs of the host kernels
from minigluon.ndarray import ops_elemwise, ops_nn
from minigluon_ext import fallback

DTYPES = [np.float32, np.float64]
THREADS = [1, 2, 3, 4]
UINT = {4: np.uint32, 8: np.uint64}

# image shape, kernel, stride, pad, dilate
GEOMETRIES = [
    ((2, 3, 7, 9), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((3, 2, 8, 7), (3, 2), (2, 1), (1, 0), (1, 1)),
    ((2, 4, 9, 9), (3, 3), (2, 2), (2, 1), (2, 1)),
    ((1, 6, 5, 6), (1, 1), (1, 1), (0, 0), (1, 1)),
    ((2, 1, 1, 5), (1, 3), (1, 2), (0, 1), (1, 1)),
    ((2, 3, 20, 21), (5, 5), (1, 1), (0, 0), (1, 1)),
    ((1, 2, 4, 4), (3, 3), (3, 3), (4, 4), (1, 1)),
    ((4, 5, 6, 3), (2, 3), (1, 3), (3, 2), (3, 1)),
    ((1, 1, 3, 3), (3, 3), (1, 1), (0, 0), (1, 1)),
]


@pytest.fixture
def c():
    """The C path."""
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    return ext.native


def same_bits(x, y):
    assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, x.shape, y.dtype, y.shape)
    if x.dtype.kind != "f":
        assert np.array_equal(x, y)
        return
    bad = np.flatnonzero(x.view(UINT[x.dtype.itemsize]) != y.view(UINT[y.dtype.itemsize]))
    assert bad.size == 0, f"{bad.size} values differ, first at {bad[0]}: " \
                          f"{x.flat[bad[0]]!r} != {y.flat[bad[0]]!r}"


def randn(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def out_size(shape, kernel, stride, pad, dilate):
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, s, p, d in zip(shape[2:], kernel, stride, pad, dilate))


def ref_im2col(x, kernel, stride, pad, dilate):
    """Loops over the definition in minigluon_ext's docstring."""
    n, c, h, w = x.shape
    oh, ow = out_size(x.shape, kernel, stride, pad, dilate)
    cols = np.zeros((c, kernel[0], kernel[1], n, oh, ow), x.dtype)
    for ci, i, j, ni, y, xo in np.ndindex(cols.shape):
        r = y * stride[0] - pad[0] + i * dilate[0]
        q = xo * stride[1] - pad[1] + j * dilate[1]
        if 0 <= r < h and 0 <= q < w:
            cols[ci, i, j, ni, y, xo] = x[ni, ci, r, q]
    return cols.reshape(c * kernel[0] * kernel[1], -1)


# ---------------------------------------------------------------- im2col / col2im / swap01

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", THREADS)
def test_im2col_and_col2im_match_fallback(c, dtype, nthreads):
    rng = np.random.default_rng(1)
    for shape, *geometry in GEOMETRIES:
        x = randn(rng, shape, dtype)
        cols = c.im2col(x, *geometry, nthreads=nthreads)
        same_bits(cols, fallback.im2col(x, *geometry))
        g = randn(rng, cols.shape, dtype)
        same_bits(c.col2im(g, shape, *geometry, nthreads=nthreads),
                  fallback.col2im(g, shape, *geometry))


@pytest.mark.parametrize("case", GEOMETRIES[:5] + GEOMETRIES[6:8])
def test_im2col_matches_definition_and_col2im_is_its_adjoint(path, case):
    shape, *geometry = case
    rng = np.random.default_rng(2)
    x = randn(rng, shape, np.float64)
    cols = path.im2col(x, *geometry)
    np.testing.assert_array_equal(cols, ref_im2col(x, *geometry))
    g = randn(rng, cols.shape, np.float64)
    np.testing.assert_allclose(np.vdot(cols, g), np.vdot(x, path.col2im(g, shape, *geometry)),
                               rtol=1e-12)


def test_col2im_adds_taps_in_order(path):
    # one image element fed by all 9 taps of a 3x3 window (stride 1, pad 1)
    shape, geometry = (1, 1, 3, 3), ((3, 3), (1, 1), (1, 1), (1, 1))
    g = np.zeros((9, 9), np.float32)
    taps = np.array([1e8, 1, -1e8, 0.5, 3, 1e-3, -7, 2.5, 1], np.float32)
    for t in range(9):                     # tap t reads the centre from output position 8 - t
        g[t, 8 - t] = taps[t]
    want = np.float32(0)
    for v in taps:
        want = np.float32(want + v)
    assert path.col2im(g, shape, *geometry)[0, 0, 1, 1] == want


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", [1, 3])
def test_swap01(path, dtype, nthreads):
    rng = np.random.default_rng(3)
    for shape in [(1, 1, 1), (3, 5, 7), (8, 2, 1), (2, 9, 16)]:
        src = randn(rng, shape, dtype)
        same_bits(path.swap01(src, nthreads=nthreads), np.ascontiguousarray(src.swapaxes(0, 1)))
        bias = randn(rng, shape[0], dtype)
        same_bits(path.swap01(src, bias, nthreads=nthreads),
                  src.swapaxes(0, 1) + bias[None, :, None])


# ---------------------------------------------------------------- Winograd F(MxM, 3x3)

WINOGRAD = [((2, 3, 7, 9), (1, 1)), ((1, 2, 4, 4), (0, 0)), ((3, 2, 5, 6), (2, 1)),
            ((2, 3, 3, 3), (0, 1)), ((1, 4, 1, 1), (1, 1)), ((2, 5, 32, 32), (1, 1)),
            ((1, 2, 19, 40), (1, 0)),
            # planes of 16 tiles or more go plane by plane (a zero-bordered copy each; the
            # shapes above cover both ways): blocks of 64 tiles and a partial one, partial
            # tiles at the edges for F(4x4), a narrow tall plane for F(2x2)
            ((2, 3, 37, 35), (1, 0)), ((1, 2, 40, 9), (1, 1))]


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", THREADS)
def test_winograd_transforms_match_fallback(c, tile, dtype, nthreads):
    rng = np.random.default_rng(4)
    for shape, pad in WINOGRAD:
        x = randn(rng, shape, dtype)
        v = c.winograd_input(x, pad, tile, nthreads=nthreads)
        same_bits(v, fallback.winograd_input(x, pad, tile))
        out = (shape[0], 3) + tuple(n + 2 * p - 2 for n, p in zip(shape[2:], pad))
        m, bias = randn(rng, (v.shape[0], 3, v.shape[2]), dtype), randn(rng, 3, dtype)
        for b in (None, bias):
            same_bits(c.winograd_output(m, out, b, tile, nthreads=nthreads),
                      fallback.winograd_output(m, out, b, tile))
        dy = randn(rng, out, dtype)
        same_bits(c.winograd_output_adjoint(dy, tile, nthreads=nthreads),
                  fallback.winograd_output_adjoint(dy, tile))
        dv = randn(rng, v.shape, dtype)
        same_bits(c.winograd_input_adjoint(dv, shape, pad, tile, nthreads=nthreads),
                  fallback.winograd_input_adjoint(dv, shape, pad, tile))


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("shape,pad", WINOGRAD)
def test_winograd_convolution_and_adjoints(path, tile, shape, pad):
    """U @ V through the transforms is the 3x3 convolution; the adjoints are adjoint."""
    rng = np.random.default_rng(5)
    x, w = randn(rng, shape, np.float64), randn(rng, (3, shape[1], 3, 3), np.float64)
    out = (shape[0], 3) + out_size(shape, (3, 3), (1, 1), pad, (1, 1))
    u = (ops_conv._WINOGRAD_GG[tile] @ w.reshape(3 * shape[1], 9).T).reshape(-1, 3, shape[1])
    v = path.winograd_input(x, pad, tile)
    y = path.winograd_output(u @ v, out, tile=tile)
    direct = w.reshape(3, -1) @ path.im2col(x, (3, 3), 1, pad)
    np.testing.assert_allclose(y, direct.reshape(3, shape[0], -1).swapaxes(0, 1).reshape(out),
                               rtol=1e-10, atol=1e-10)
    dy = randn(rng, out, np.float64)
    np.testing.assert_allclose(np.vdot(y, dy),
                               np.vdot(u @ v, path.winograd_output_adjoint(dy, tile)),
                               rtol=1e-10)
    dv = randn(rng, v.shape, np.float64)
    np.testing.assert_allclose(np.vdot(v, dv),
                               np.vdot(x, path.winograd_input_adjoint(dv, shape, pad, tile)),
                               rtol=1e-10)


def test_winograd_float32_error_is_small(path):
    """F(4x4, 3x3) rounds more than F(2x2, 3x3); both stay near float32 im2col."""
    rng = np.random.default_rng(15)
    x, w = randn(rng, (2, 64, 16, 16), np.float32), randn(rng, (8, 64, 3, 3), np.float32)
    exact = (w.astype(np.float64).reshape(8, -1) @
             path.im2col(x.astype(np.float64), 3, 1, 1)).reshape(8, 2, 256)
    scale = np.abs(exact).max()
    for tile, bound in ((2, 2e-6), (4, 2e-5)):
        u = (ops_conv._WINOGRAD_GG[tile].astype(np.float32) @ w.reshape(512, 9).T)
        y = path.winograd_output(u.reshape(-1, 8, 64) @ path.winograd_input(x, 1, tile),
                                 (2, 8, 16, 16), tile=tile)
        err = np.abs(y.reshape(2, 8, 256).swapaxes(0, 1) - exact).max() / scale
        assert err < bound, (tile, err)


# ---------------------------------------------------------------- max pooling

# image shape, kernel, stride, pad, convention
POOLS = [((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), "valid"),
         ((2, 2, 7, 9), (3, 3), (2, 2), (1, 1), "valid"),
         ((1, 2, 7, 7), (3, 2), (2, 3), (1, 0), "full"),
         ((2, 1, 1, 7), (1, 3), (1, 2), (0, 1), "full"),
         ((1, 1, 4, 4), (4, 4), (1, 1), (0, 0), "valid"),
         ((3, 4, 5, 6), (2, 3), (1, 1), (1, 2), "valid"),
         ((1, 1, 2, 2), (3, 3), (3, 3), (2, 2), "full"),
         # 2x2 stride 2 unpadded float32 runs a vectorized path: full vectors, tails of
         # 1-3 outputs, an odd last row/column left out, and "full" (which pads, so not it)
         ((2, 3, 24, 24), (2, 2), (2, 2), (0, 0), "valid"),
         ((1, 2, 9, 14), (2, 2), (2, 2), (0, 0), "valid"),
         ((2, 1, 5, 11), (2, 2), (2, 2), (0, 0), "valid"),
         ((1, 1, 2, 2), (2, 2), (2, 2), (0, 0), "valid"),
         ((1, 2, 5, 11), (2, 2), (2, 2), (0, 0), "full"),
         # a column stride above 1 reads each input row split into its phases: odd and
         # even widths, vectors with tails, strides 2-4, and a row too wide to split
         ((2, 3, 17, 23), (3, 3), (2, 2), (1, 1), "valid"),
         ((1, 2, 12, 37), (3, 3), (2, 2), (1, 1), "full"),
         ((1, 1, 9, 40), (3, 3), (3, 3), (1, 1), "valid"),
         ((1, 1, 6, 29), (2, 5), (2, 4), (0, 2), "valid"),
         ((1, 1, 3, 4099), (3, 3), (2, 2), (1, 1), "valid")]


def ref_max_pool(x, kernel, stride, pad, convention):
    """Loops: the first NaN of each window, else its first maximum; -inf, -1 when empty."""
    n, c, h, w = x.shape
    up = convention == "full"
    oh, ow = (-(-(m + 2 * p - k) // s) + 1 if up else (m + 2 * p - k) // s + 1
              for m, k, s, p in zip((h, w), kernel, stride, pad))
    out, arg = np.full((n, c, oh, ow), -np.inf, x.dtype), np.full((n, c, oh, ow), -1, np.int32)
    for ni, ci, y, xo in np.ndindex(out.shape):
        best = None
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                r, q = y * stride[0] - pad[0] + i, xo * stride[1] - pad[1] + j
                if not (0 <= r < h and 0 <= q < w):
                    continue
                v = x[ni, ci, r, q]
                if best is None or (not np.isnan(best) and (v > best or np.isnan(v))):
                    best, arg[ni, ci, y, xo] = v, r * w + q
        if best is not None:
            out[ni, ci, y, xo] = best
    return out, arg


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", [1, 2, 4])
def test_max_pool_matches_fallback_and_definition(path, dtype, nthreads):
    rng = np.random.default_rng(6)
    for shape, *window in POOLS:
        x = randn(rng, shape, dtype)
        x.flat[::7] = x.flat[1::7]                     # ties
        if x.size > 20:
            x.flat[[3, 11, 12]] = [np.nan, -np.inf, np.inf]
        out, arg = path.max_pool2d(x, *window, nthreads=nthreads)
        want_out, want_arg = ref_max_pool(x, *window)
        same_bits(out, want_out)
        same_bits(arg, want_arg)
        dy = randn(rng, out.shape, dtype)
        dx = path.max_pool2d_backward(dy, arg, shape[2:], nthreads=nthreads)
        same_bits(dx, fallback.max_pool2d_backward(dy, arg, shape[2:]))
        want = np.zeros((shape[0] * shape[1], shape[2] * shape[3]), dtype)
        for p, o in np.ndindex(arg.shape[0] * arg.shape[1], out.shape[2] * out.shape[3]):
            a = arg.reshape(len(want), -1)[p, o]
            if a >= 0:
                want[p, a] += dy.reshape(len(want), -1)[p, o]
        same_bits(dx, want.reshape(shape))


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool_2x2_nan_and_tie_rule(path, dtype):
    # every pattern of NaN, +-inf and ties over the four taps, so the vectorized 2x2 path
    # meets each case of "first NaN, else first largest" in each of its lanes
    values = np.array([np.nan, -np.inf, np.inf, 1.0, 1.0, -2.0], dtype)
    windows = np.array(np.meshgrid(*[np.arange(len(values))] * 4)).reshape(4, -1).T
    x = values[windows].reshape(1, 6, -1, 2, 2)                 # (1, 6, 216 windows, 2, 2)
    x = np.ascontiguousarray(x.transpose(0, 1, 3, 2, 4).reshape(1, 6, 2, -1))   # side by side
    out, arg = path.max_pool2d(x, (2, 2), (2, 2))
    want_out, want_arg = ref_max_pool(x, (2, 2), (2, 2), (0, 0), "valid")
    same_bits(out, want_out)
    same_bits(arg, want_arg)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pad, convention", [((1, 1), "valid"), ((0, 0), "valid"),
                                             ((1, 1), "full"), ((2, 0), "valid")])
def test_max_pool_3x3_stride_2_nan_and_tie_rule(path, dtype, pad, convention):
    # 3x3 stride-2 float32 runs a vectorized path: maps drawn from NaN, +-inf and ties, so
    # its lanes meet "first NaN, else first largest" across rows, with edges both sides
    rng = np.random.default_rng(11)
    values = np.array([np.nan, -np.inf, np.inf, 1.0, 1.0, -2.0, 0.5], dtype)
    for shape in [(1, 3, 33, 41), (2, 2, 8, 10), (1, 1, 3, 3)]:
        x = values[rng.integers(0, len(values), shape)]
        out, arg = path.max_pool2d(x, (3, 3), (2, 2), pad, convention)
        want_out, want_arg = ref_max_pool(x, (3, 3), (2, 2), pad, convention)
        same_bits(out, want_out)
        same_bits(arg, want_arg)


def test_max_pool_backward_refuses_bad_argmax(path):
    dy = np.ones((1, 1, 2, 2), np.float32)
    for bad in (4 * 4, -2):
        arg = np.zeros((1, 1, 2, 2), np.int32)
        arg[0, 0, 1, 1] = bad
        with pytest.raises(ValueError, match="argmax holds positions outside"):
            path.max_pool2d_backward(dy, arg, (4, 4))


def test_max_pool_kernel_checks_argmax_itself(c):
    # the C module does not trust its caller: a bad position raises, nothing is written
    dy, dx = np.ones((1, 1, 1, 2), np.float32), np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(ValueError, match="argmax"):
        c._kernels.max_pool2d_backward(dy, np.array([[[[0, 1 << 30]]]], np.int32), dx, 2)
    assert dx[0, 0, 0, 0] == 1


# ---------------------------------------------------------------- batch norm, relu

BN_SHAPES = [(1, 1, 1), (4, 3, 5), (2, 7, 33), (32, 4, 64), (3, 2, 1000), (5, 16, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", THREADS)
def test_batch_norm_kernels(c, dtype, nthreads):
    rng = np.random.default_rng(7)
    for shape in BN_SHAPES:
        x = (randn(rng, shape, dtype) * 3 + 5).astype(dtype)
        dy = randn(rng, shape, dtype)
        mean, var = c.batch_norm_stats(x, nthreads=nthreads)
        # float64 sums in another order than NumPy's pairwise ones: equal up to rounding
        wide = x.astype(np.float64)
        np.testing.assert_allclose(mean, wide.mean(axis=(0, 2)), rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(var, wide.var(axis=(0, 2)), rtol=1e-12, atol=1e-13)
        for got, want in zip((mean, var), fallback.batch_norm_stats(x)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
        m = mean.astype(dtype)
        sums = c.batch_norm_sums(x, dy, m, nthreads=nthreads)
        for got, want in zip(sums, fallback.batch_norm_sums(x, dy, m)):
            np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)
        a, b, k = (randn(rng, shape[1], dtype) for _ in range(3))
        same_bits(c.batch_norm_forward(x, m, a, b, nthreads=nthreads),
                  fallback.batch_norm_forward(x, m, a, b))
        same_bits(c.batch_norm_backward(x, dy, m, a, b, k, nthreads=nthreads),
                  fallback.batch_norm_backward(x, dy, m, a, b, k))
        same_bits(fallback.batch_norm_forward(x, m, a, b),
                  ((x - m[None, :, None]) * a[None, :, None] + b[None, :, None]).astype(dtype))


SPECIALS = [np.inf, -np.inf, np.nan, -np.nan, -0.0, 0.0, 1e-45, -1e-40, 3e38, -2.5, 1.0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_relu_gives_numpy_bits(path, dtype, nthreads):
    rng = np.random.default_rng(8)
    for n in (0, 1, 7, 8, 9, 4095, 4096, 4097, 20000):
        x = np.resize(np.array(SPECIALS, dtype), n)
        x[::3] = randn(rng, x[::3].shape, dtype)
        dy = rng.permutation(np.resize(np.array(SPECIALS, dtype), n))
        same_bits(path.relu(x, nthreads=nthreads), np.maximum(x, 0))
        with np.errstate(invalid="ignore"):             # inf * 0
            want = dy * (x > 0)
        same_bits(path.relu_backward(x, dy, nthreads=nthreads), want)


CLIP_BOUNDS = [(0.0, 6.0), (-0.5, 0.8), (0.1, 0.1), (-np.inf, 2.0)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_clip_gives_numpy_bits(path, dtype, nthreads):
    rng = np.random.default_rng(9)
    for lo, hi in CLIP_BOUNDS:
        for n in (0, 1, 9, 4096, 4097, 20000):
            x = np.resize(np.array(SPECIALS + [lo, hi, 6.0, 5.999], dtype), n)
            x[::3] = randn(rng, x[::3].shape, dtype) * 4
            dy = rng.permutation(np.resize(np.array(SPECIALS, dtype), n))
            same_bits(path.clip(x, lo, hi, nthreads=nthreads), np.clip(x, lo, hi))
            inside = ((x >= dtype(lo)) & (x <= dtype(hi))).astype(dtype)
            with np.errstate(invalid="ignore"):             # inf * 0
                want = dy * inside
            same_bits(path.clip_backward(x, dy, lo, hi, nthreads=nthreads), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_kernel_matches_numpy_path(numpy_ops, dtype):
    # big enough for the kernels (ops_elemwise._HOST_MIN_SIZE), values on both bounds
    x = np.resize(np.array(SPECIALS + [0.0, 6.0, 7.5, -3.0], dtype), (5, 64, 61))
    for got, want in zip(_forward_backward(lambda a: nd.clip(a, 0, 6), [x]),
                         numpy_ops(lambda: _forward_backward(lambda a: nd.clip(a, 0, 6), [x]))):
        same_bits(got, want)


def test_clip_kernel_path_gradient_matches_finite_differences():
    # a directional derivative over a map big enough for the kernels, away from the kinks
    rng = np.random.default_rng(10)
    x = rng.uniform(-3, 9, (40, 600))
    x[np.abs(x) < 1e-2] += 0.1
    x[np.abs(x - 6) < 1e-2] += 0.1
    head, v, eps = rng.standard_normal(x.shape), rng.standard_normal(x.shape), 1e-4
    xs = nd.array(x, dtype="float64")
    xs.attach_grad()
    with autograd.record():
        y = nd.clip(xs, 0, 6)
    y.backward(nd.array(head, dtype="float64"))

    def f(a):
        return float((nd.clip(nd.array(a, dtype="float64"), 0, 6).asnumpy() * head).sum())
    numeric = (f(x + eps * v) - f(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose((xs.grad.asnumpy() * v).sum(), numeric, rtol=1e-8)


def test_clip_kernel_path_has_zero_second_derivative():
    x = nd.array(np.linspace(-2, 8, 20000, dtype=np.float32).reshape(100, 200))
    x.attach_grad()
    with autograd.record():
        g = autograd.grad(nd.clip(x, 0, 6), [x], head_grads=nd.ones(x.shape),
                          create_graph=True)[0]
        g2 = autograd.grad(g, [x], create_graph=True)[0]
    xs = x.asnumpy()
    np.testing.assert_array_equal(g.asnumpy(), ((xs >= 0) & (xs <= 6)).astype(np.float32))
    assert not g2.asnumpy().any()


# ---------------------------------------------------------------- bad input

def test_bad_arguments_raise_clear_errors(path):
    x = np.zeros((2, 3, 5, 5), np.float32)
    with pytest.raises(DTypeError, match="im2col: x has dtype float16"):
        path.im2col(x.astype(np.float16), 3)
    with pytest.raises(DTypeError, match="int64"):
        path.relu(np.zeros(4, np.int64))
    with pytest.raises(DTypeError, match="clip: x has dtype int32"):
        path.clip(np.zeros(4, np.int32), 0, 6)
    with pytest.raises(ShapeError, match="clip_backward: dy"):
        path.clip_backward(x, x[:1], 0, 6)
    with pytest.raises(TypeError, match="must be a numpy.ndarray"):
        path.im2col([[1.0]], 3)
    with pytest.raises(ValueError, match="not C-contiguous"):
        path.im2col(x[:, :, ::2], 3)
    with pytest.raises(ShapeError, match=r"must be \(N, C, H, W\)"):
        path.im2col(x[0], 3)
    with pytest.raises(ShapeError, match="does not fit"):
        path.im2col(x, 7)
    with pytest.raises(ValueError, match="stride must be an int >= 1"):
        path.im2col(x, 3, stride=0)
    with pytest.raises(ValueError, match="pad must be an int >= 0"):
        path.im2col(x, 3, pad=(1, -1))
    with pytest.raises(ValueError, match="kernel must be"):
        path.im2col(x, (3, 3, 3))
    with pytest.raises(ShapeError, match="cols has shape"):
        path.col2im(np.zeros((27, 49), np.float32), x.shape, 3)
    with pytest.raises(ShapeError, match="out has shape"):
        path.im2col(x, 3, out=np.zeros((27, 19), np.float32))
    with pytest.raises(DTypeError, match="out has dtype float64"):
        path.im2col(x, 3, out=np.zeros((27, 18), np.float64))
    ro = np.zeros(x.shape, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        path.relu(x, out=ro)
    with pytest.raises(ValueError, match="shares memory"):
        path.relu(x, out=x)
    with pytest.raises(ValueError, match="nthreads must be an integer >= 1"):
        path.swap01(np.zeros((2, 2, 2)), nthreads=0)
    with pytest.raises(ShapeError, match="bias has shape"):
        path.swap01(np.zeros((2, 3, 4)), bias=np.zeros(3))
    with pytest.raises(ShapeError, match=r"x must be \(outer, C, inner\)"):
        path.batch_norm_stats(x)
    with pytest.raises(ShapeError, match="mean has shape"):
        path.batch_norm_forward(x[0], np.zeros(4, np.float32), np.zeros(3, np.float32),
                                np.zeros(3, np.float32))
    with pytest.raises(ShapeError, match="dv has shape"):
        path.winograd_input_adjoint(np.zeros((16, 3, 8), np.float32), x.shape)
    with pytest.raises(ValueError, match="tile must be 2 or 4"):
        path.winograd_input(x, 1, tile=3)
    with pytest.raises(ValueError, match="convention"):
        path.max_pool2d(x, 2, convention="same")


def test_empty_batches(path):
    x = np.zeros((0, 3, 5, 5), np.float32)
    assert path.im2col(x, 3).shape == (27, 0)
    assert path.col2im(np.zeros((27, 0), np.float32), x.shape, 3).shape == x.shape
    assert path.winograd_input(x, 1).shape == (16, 3, 0)
    assert path.winograd_input_adjoint(np.zeros((16, 3, 0), np.float32), x.shape).shape == \
        x.shape
    out, arg = path.max_pool2d(x, 2)
    assert path.max_pool2d_backward(out, arg, (5, 5)).shape == x.shape
    mean, var = path.batch_norm_stats(np.zeros((0, 3, 4)))
    assert (mean == 0).all() and (var == 0).all()


def test_kernels_module_refuses_bad_buffers(c):
    """Direct calls of the raw module with inconsistent buffers raise, never crash."""
    k = c._kernels
    x = np.zeros((2, 3, 5, 5), np.float32)
    with pytest.raises(ValueError, match="out must hold"):
        k.im2col(x, np.zeros(10, np.float32), 3, 3, 1, 1, 0, 0, 1, 1, 2)
    with pytest.raises(ValueError, match="kernel, stride and dilate"):
        k.im2col(x, np.zeros(10, np.float32), 3, 3, 0, 1, 0, 0, 1, 1, 2)
    with pytest.raises(ValueError, match="does not fit"):
        k.col2im(np.zeros(10, np.float32), x, 9, 9, 1, 1, 0, 0, 1, 1, 2)
    with pytest.raises(TypeError, match="float16"):
        k.relu(x.astype(np.float16), None, x.astype(np.float16), 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        k.relu(x[:, :, ::2], None, np.zeros(x[:, :, ::2].shape, np.float32), 1)
    read_only = np.zeros(8)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        k.swap01(np.zeros((2, 2, 2)), None, read_only, 1)
    with pytest.raises(ValueError, match="argmax must hold"):
        k.max_pool2d(x, np.zeros((2, 3, 2, 2), np.float32), np.zeros(24, np.int64),
                     2, 2, 2, 2, 0, 0, 1)
    with pytest.raises(ValueError, match="kind must be"):
        k.batch_norm(7, x[0], None, None, None, None, None, None, None, None, 1)
    with pytest.raises(ValueError, match="s1 must hold"):
        k.batch_norm(0, x[0], None, None, None, None, None, None, np.zeros(3, np.float32),
                     np.zeros(3), 1)
    with pytest.raises(ValueError, match="only the output transform takes a bias"):
        k.winograd(0, x, np.zeros((16, 3, 2 * 2 * 2), np.float32), np.zeros(3, np.float32),
                   0, 0, 2, 1)
    with pytest.raises(ValueError, match="out must hold"):
        k.winograd(0, x, np.zeros(5, np.float32), None, 1, 1, 2, 1)
    with pytest.raises(ValueError, match="tile must be 2 or 4"):
        k.winograd(0, x, np.zeros(5, np.float32), None, 1, 1, 3, 1)


# ---------------------------------------------------------------- threads

def test_concurrent_callers_share_the_pool(c):
    """Python threads calling at once (the GIL is released) each get correct results."""
    rng = np.random.default_rng(9)
    x = randn(rng, (8, 16, 32, 32), np.float32)
    want = fallback.im2col(x, 3, 1, 1)
    errors = []

    def work():
        try:
            for _ in range(20):
                same_bits(c.im2col(x, 3, 1, 1, nthreads=2), want)
        except AssertionError as err:
            errors.append(err)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)


def test_pool_works_in_a_forked_child(c):
    c.relu(np.ones(1 << 16), nthreads=2)          # start the pool's workers in this process
    code = ("import os, numpy as np, minigluon_ext as ext\n"
            "ext.native.relu(np.ones(1 << 16), nthreads=2)\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    y = ext.native.relu(-np.ones(1 << 16), nthreads=2)\n"
            "    os._exit(0 if (y == 0).all() else 1)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "raise SystemExit(os.waitstatus_to_exitcode(status))\n")
    proc = subprocess.run([sys.executable, "-c", code], timeout=60,
                          env=dict(os.environ, MINIGLUON_EXT_FALLBACK="0"))
    assert proc.returncode == 0


def test_default_threads(monkeypatch):
    from minigluon import config, threads
    from minigluon_ext import _checks

    def layer_threads(work):
        threads.look_again()        # the environment is read every SAMPLE_S at most
        return _checks.layer_threads("f", work, None)
    # fixed counts here; tests/test_threads.py tests their following the free cores
    monkeypatch.setenv("MINIGLUON_ADAPTIVE_THREADS", "0")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert layer_threads(_checks.LAYER_MIN_WORK - 1) == 1
    monkeypatch.setattr(config, "usable_cores", lambda: 3)
    assert layer_threads(_checks.LAYER_MIN_WORK) == 3
    assert _checks.layer_threads("f", 1, 4) == 4
    # OMP_NUM_THREADS (set per worker by the local launcher) lowers it, never above the cores
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert layer_threads(_checks.LAYER_MIN_WORK) == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    assert layer_threads(_checks.LAYER_MIN_WORK) == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "2,1")       # OpenMP's nested form
    assert layer_threads(_checks.LAYER_MIN_WORK) == 2
    for bad in ("zero", "0"):
        monkeypatch.setenv("OMP_NUM_THREADS", bad)
        with pytest.raises(config.ConfigError, match=f"OMP_NUM_THREADS must be a positive "
                           f"integer .*got '{bad}'; unset it"):
            layer_threads(_checks.LAYER_MIN_WORK)
    monkeypatch.undo()
    threads.look_again()


# ---------------------------------------------------------------- the operators on both paths

@pytest.fixture
def numpy_ops(monkeypatch):
    """A function running `fn` with the operators' own NumPy paths instead of the kernels."""
    def run(fn):
        with monkeypatch.context() as m:
            for module in (ops_conv, ops_nn, ops_elemwise):
                m.setattr(module, "_HOST_KERNELS", False)
            return fn()
    return run


def _forward_backward(fn, arrays, head_seed=0):
    variables = [nd.array(a, dtype=a.dtype) for a in arrays]
    for v in variables:
        v.attach_grad()
    with autograd.record():
        y = fn(*variables)
    head = np.random.default_rng(head_seed).standard_normal(y.shape).astype(y.dtype)
    y.backward(nd.array(head, dtype=head.dtype))
    return [y.asnumpy()] + [v.grad.asnumpy() for v in variables]


CONV_OPS = [
    # data shape, weight shape, attributes (kernel from the weight)
    ((4, 8, 12, 12), (16, 8, 3, 3), dict(pad=(1, 1))),                 # Winograd 4x4
    ((2, 8, 9, 20), (4, 8, 3, 3), dict(pad=(0, 1))),                   # 4x4, partial tiles
    ((3, 5, 9, 7), (4, 5, 3, 3), dict()),                                # Winograd, odd sizes
    ((4, 8, 12, 12), (16, 8, 3, 3), dict(stride=(2, 2), pad=(1, 1))),   # columns, small w
    ((2, 16, 9, 9), (32, 16, 3, 3), dict(stride=(2, 2))),               # columns, big w
    ((2, 6, 10, 9), (4, 3, 3, 2), dict(num_group=2, dilate=(2, 1))),
    ((5, 4, 6, 6), (8, 4, 1, 1), dict(stride=(2, 2))),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CONV_OPS, ids=lambda c: "x".join(map(str, c[0])))
def test_convolution_kernels_match_numpy_path(numpy_ops, monkeypatch, dtype, case):
    monkeypatch.setattr(ops_conv, "_CHUNK_BYTES", 1)         # one sample per chunk
    monkeypatch.setattr(ops_conv, "_WINOGRAD_MIN_CHANNELS", 1)   # Winograd on few channels
    shape, wshape, attrs = case
    rng = np.random.default_rng(10)
    arrays = [randn(rng, shape, dtype), randn(rng, wshape, dtype), randn(rng, wshape[0], dtype)]

    def conv(x, w, b):
        return nd.Convolution(x, w, b, kernel=wshape[2:], num_filter=wshape[0], **attrs)

    tol = 1e-4 if dtype == np.float32 else 1e-11
    host = _forward_backward(conv, arrays)
    for got, want in zip(host, numpy_ops(lambda: _forward_backward(conv, arrays))):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_deconvolution_kernels_match_numpy_path(numpy_ops, dtype):
    rng = np.random.default_rng(11)
    for shape, wshape, attrs in [((2, 4, 5, 6), (4, 3, 3, 3), dict(pad=(1, 1))),
                                 ((2, 4, 5, 6), (4, 2, 4, 3), dict(stride=(2, 2), adj=(1, 0)))]:
        arrays = [randn(rng, shape, dtype), randn(rng, wshape, dtype)]

        def deconv(x, w):
            return nd.Deconvolution(x, w, kernel=wshape[2:], num_filter=wshape[1], **attrs)
        tol = 1e-4 if dtype == np.float32 else 1e-11
        host = _forward_backward(deconv, arrays)
        for got, want in zip(host, numpy_ops(lambda: _forward_backward(deconv, arrays))):
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pooling_kernels_match_numpy_path(numpy_ops, dtype):
    rng = np.random.default_rng(12)
    x = randn(rng, (3, 4, 9, 8), dtype)
    for attrs in [dict(kernel=(2, 2), stride=(2, 2)),
                  dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pooling_convention="full"),
                  dict(kernel=(2, 2), global_pool=True)]:
        def pool(a):
            return nd.Pooling(a, pool_type="max", **attrs)
        for got, want in zip(_forward_backward(pool, [x]),
                             numpy_ops(lambda: _forward_backward(pool, [x]))):
            # overlapping windows sum gradients in another order on the NumPy path
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_kernels_match_numpy_path(numpy_ops, dtype, training):
    rng = np.random.default_rng(13)
    arrays = [randn(rng, (6, 5, 4, 3), dtype) * 2 + 1, randn(rng, 5, dtype) + 2,
              randn(rng, 5, dtype)]
    moving = [randn(rng, 5, dtype), np.abs(randn(rng, 5, dtype)) + 0.5]

    def bn(x, g, b):
        mm, mv = (nd.array(m, dtype=m.dtype) for m in moving)
        with autograd.train_mode() if training else autograd.predict_mode():
            y = nd.BatchNorm(x, g, b, mm, mv, fix_gamma=False)
        bn.moving = (mm.asnumpy(), mv.asnumpy())
        return y

    host = _forward_backward(bn, arrays) + list(bn.moving)
    want = numpy_ops(lambda: _forward_backward(bn, arrays)) + list(bn.moving)
    tol = {np.float16: 2e-2, np.float32: 2e-4, np.float64: 1e-10}[dtype]
    for got, ref in zip(host, want):
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol,
                                   atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_kernel_matches_numpy_path(numpy_ops, dtype):
    x = np.resize(np.array(SPECIALS, dtype), (5, 64, 61))
    for got, want in zip(_forward_backward(nd.relu, [x]),
                         numpy_ops(lambda: _forward_backward(nd.relu, [x]))):
        same_bits(got, want)


def test_small_cifar_resnet_trains_the_same_on_both_paths(numpy_ops):
    from minigluon import gluon
    from minigluon.gluon.model_zoo import vision

    def losses():
        mx.random.seed(3)
        net = vision.cifar_resnet18(classes=10)
        net.initialize(mx.init.Xavier())
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        rng = np.random.default_rng(14)
        x = nd.array(rng.standard_normal((4, 3, 16, 16)).astype(np.float32))
        y = nd.array(rng.integers(0, 10, 4))
        out = []
        for _ in range(3):
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(4)
            out.append(float(loss.mean().asscalar()))
        return out
    # The loss falls from ~3 to ~0.005 on one repeated batch; near zero the float32 rounding
    # of Winograd against direct convolution is a larger share, hence the absolute term.
    np.testing.assert_allclose(losses(), numpy_ops(losses), rtol=1e-3, atol=2e-5)
