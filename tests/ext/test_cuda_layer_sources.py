"""The layer kernels of minigluon_ext/cuda_src (columns, pool, relu, batchnorm), compiled for
the CPU (cuda_on_cpu.py) and, where there is a GPU, by NVRTC for it, run through
minigluon_ext.gpu.Kernels, against the C kernels: the same bits. Average pooling, which has
no C kernel, against the Pooling operator's NumPy path, to rounding. Argument checks and
launch plans are checked on the CPU build only.
"""
import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.base import DTypeError, ShapeError
from minigluon_ext import gpu, gpu_layers

import cuda_on_cpu

NEEDS_GXX = pytest.mark.skipif(cuda_on_cpu.compiler() is None, reason="needs g++")
DTYPES = [np.float32, np.float64]
UINT = {4: np.uint32, 8: np.uint64}

# image shape, kernel, stride, pad, dilate
CONV_GEOMETRIES = [
    ((2, 3, 7, 9), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((3, 2, 8, 7), (3, 2), (2, 1), (1, 0), (1, 1)),
    ((2, 4, 9, 9), (3, 3), (2, 2), (2, 1), (2, 1)),
    ((1, 6, 5, 6), (1, 1), (1, 1), (0, 0), (1, 1)),
    ((2, 3, 20, 21), (7, 7), (2, 2), (3, 3), (1, 1)),
    ((1, 2, 4, 4), (3, 3), (3, 3), (4, 4), (1, 1)),
    ((4, 5, 6, 3), (2, 3), (1, 3), (3, 2), (3, 1)),
]

# image shape, kernel, stride, pad, convention
POOL_GEOMETRIES = [
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), "valid"),
    ((2, 3, 9, 7), (3, 3), (2, 2), (1, 1), "valid"),
    ((1, 2, 9, 7), (3, 3), (2, 2), (1, 1), "full"),
    ((2, 2, 5, 6), (3, 2), (1, 3), (1, 0), "full"),
    ((1, 4, 6, 5), (6, 5), (1, 1), (0, 0), "valid"),        # global pooling
    ((1, 1, 3, 3), (2, 2), (3, 3), (1, 1), "full"),         # windows in the padding only
]


def same_bits(x, y):
    assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, x.shape, y.dtype, y.shape)
    if x.dtype.kind != "f":
        np.testing.assert_array_equal(x, y)
        return
    bad = np.flatnonzero(x.view(UINT[x.dtype.itemsize]) != y.view(UINT[y.dtype.itemsize]))
    assert bad.size == 0, f"{bad.size} values differ, first at {bad[0]}: " \
                          f"{x.flat[bad[0]]!r} != {y.flat[bad[0]]!r}"


def values(shape, dtype, seed=0):
    """Random values with ties, zeros of both signs and a NaN: what order and rules decide."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[::5] = np.round(flat[::5])
    flat[3::11] = -0.0
    flat[7::17] = 0.0
    if flat.size > 40:
        flat[29] = np.nan
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,kernel,stride,pad,dilate", CONV_GEOMETRIES)
def test_im2col_and_col2im_are_the_host_kernels_bit_for_bit(kernels, host, dtype, shape, kernel,
                                                            stride, pad, dilate):
    x = values(shape, dtype)
    geo = dict(kernel=kernel, stride=stride, pad=pad, dilate=dilate)
    cols = kernels.im2col(x, **geo)
    same_bits(cols, host.im2col(x, **geo))
    dcols = values(cols.shape, dtype, seed=1)
    same_bits(kernels.col2im(dcols, shape, **geo), host.col2im(dcols, shape, **geo))


def test_col2im_writes_into_out_and_im2col_into_a_reused_buffer(kernels, host):
    x, geo = values((2, 3, 6, 6), np.float32), dict(kernel=3, pad=1)
    buf = np.full((27, 72), 7.0, np.float32)
    assert kernels.im2col(x, out=buf, **geo) is buf
    same_bits(buf, host.im2col(x, **geo))
    out = np.full(x.shape, 5.0, np.float32)          # every element is overwritten
    assert kernels.col2im(buf, x.shape, out=out, **geo) is out
    same_bits(out, host.col2im(buf, x.shape, **geo))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,kernel,stride,pad,convention", POOL_GEOMETRIES)
def test_max_pool2d_and_its_gradients_are_the_host_kernels_bit_for_bit(
        kernels, host, dtype, shape, kernel, stride, pad, convention):
    x = values(shape, dtype)
    out, argmax = kernels.max_pool2d(x, kernel, stride, pad, convention)
    want, want_argmax = host.max_pool2d(x, kernel, stride, pad, convention)
    same_bits(out, want)
    same_bits(argmax, want_argmax)
    dy = values(out.shape, dtype, seed=2)
    expected = host.max_pool2d_backward(dy, argmax, shape[2:])
    same_bits(kernels.max_pool2d_backward(dy, argmax, shape[2:]), expected)
    same_bits(kernels.max_pool2d_backward(dy, argmax, shape[2:], kernel=kernel, stride=stride,
                                          pad=pad), expected)


def test_overlapping_windows_add_their_gradients_in_window_order(kernels, host):
    # one element is the maximum of all four overlapping 3x3 windows: four adds, in order
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 1, 1] = 1
    out, argmax = kernels.max_pool2d(x, 3, 1, 1)
    assert (argmax[0, 0, :2, :2] == 5).all()
    dy = np.array([1e8, 1, -1e8, 1e-3], np.float32).reshape(1, 1, 2, 2)
    dy = np.pad(dy, ((0, 0), (0, 0), (0, 2), (0, 2)))
    dx = kernels.max_pool2d_backward(dy, argmax, (4, 4), kernel=3, stride=1, pad=1)
    same_bits(dx, host.max_pool2d_backward(dy, argmax, (4, 4)))
    assert dx[0, 0, 1, 1] == np.float32(np.float32(np.float32(1e8 + 1) - 1e8) + 1e-3)


def pool_with_numpy(x, kernel, stride, pad, convention, pool_type, count_include_pad):
    """The Pooling operator's NumPy path, and its input (for the gradient)."""
    data = nd.array(x, dtype=x.dtype)
    data.attach_grad()
    with autograd.record():
        y = nd.Pooling(data, kernel=kernel, stride=stride, pad=pad, pool_type=pool_type,
                       pooling_convention=convention, count_include_pad=count_include_pad)
    return y, data


# a 'full' window past the image counts 0 positions: 0/0 = NaN, as in MXNet, on both paths
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pool_type,count_include_pad", [("avg", True), ("avg", False),
                                                         ("sum", True)])
@pytest.mark.parametrize("shape,kernel,stride,pad,convention", POOL_GEOMETRIES)
def test_avg_pool2d_is_the_pooling_operator_to_rounding(kernels, dtype, pool_type,
                                                        count_include_pad, shape, kernel,
                                                        stride, pad, convention):
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    y, data = pool_with_numpy(x, kernel, stride, pad, convention, pool_type, count_include_pad)
    out = kernels.avg_pool2d(x, kernel, stride, pad, convention, count_include_pad, pool_type)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(out, y.asnumpy(), **tol)
    dy = np.random.default_rng(4).standard_normal(out.shape).astype(dtype)
    y.backward(nd.array(dy, dtype=dtype))
    dx = kernels.avg_pool2d_backward(dy, shape[2:], kernel, stride, pad, count_include_pad,
                                     pool_type)
    np.testing.assert_allclose(dx, data.grad.asnumpy(), **tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 13, 1000])
def test_relu_and_its_gradient_are_the_host_kernels_bit_for_bit(kernels, host, dtype, n):
    x = values(n, dtype)
    x[:4] = [np.inf, -np.inf, 0.0, -0.0][:n] if n >= 4 else x[:4]
    dy = values(n, dtype, seed=5)
    if n >= 4:
        dy[:2] = [np.nan, np.inf]
    same_bits(kernels.relu(x), host.relu(x))
    same_bits(kernels.relu_backward(x, dy), host.relu_backward(x, dy))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3, 10), (1, 5, 1), (7, 2, 33)])
def test_batch_norm_maps_are_the_host_kernels_bit_for_bit(kernels, host, dtype, shape):
    x, dy = values(shape, dtype), values(shape, dtype, seed=6)
    c = shape[1]
    mean, scale, shift, b, k = (values(c, dtype, seed=s) for s in range(7, 12))
    same_bits(kernels.batch_norm_forward(x, mean, scale, shift),
              host.batch_norm_forward(x, mean, scale, shift))
    same_bits(kernels.batch_norm_backward(x, dy, mean, scale, b, k),
              host.batch_norm_backward(x, dy, mean, scale, b, k))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("threads", [1, 64, 1 << 18])     # 1, a few, one segment per row
def test_batch_norm_sums_are_the_host_sums_to_rounding(kernels, host, monkeypatch, dtype,
                                                       threads):
    monkeypatch.setattr(gpu_layers, "BN_THREADS", threads)
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((7, 4, 50)) * 3 + 2).astype(dtype)
    dy = rng.standard_normal(x.shape).astype(dtype)
    # both add in double, in other orders: far closer than the data's precision
    for got, want in zip(kernels.batch_norm_stats(x), host.batch_norm_stats(x)):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12)
    mean = host.batch_norm_stats(x)[0].astype(dtype)
    for got, want in zip(kernels.batch_norm_sums(x, dy, mean), host.batch_norm_sums(x, dy, mean)):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)


def test_batch_norm_stats_of_no_values_are_zeros(kernels, host):
    x = np.zeros((0, 3, 4), np.float32)
    for got, want in zip(kernels.batch_norm_stats(x), host.batch_norm_stats(x)):
        np.testing.assert_array_equal(got, want)


def test_bad_layer_arguments_are_named(cpu_kernels):
    kernels = cpu_kernels
    x = np.zeros((1, 2, 4, 4), np.float32)
    with pytest.raises(DTypeError, match="x has dtype float16"):
        kernels.im2col(x.astype(np.float16), 3)
    with pytest.raises(ShapeError, match=r"x must be \(N, C, H, W\), got shape \(2, 4, 4\)"):
        kernels.max_pool2d(x[0], 2)
    with pytest.raises(ShapeError, match=r"cols has shape \(3, 4\) but image"):
        kernels.col2im(np.zeros((3, 4), np.float32), x.shape, 3)
    with pytest.raises(ShapeError, match=r"dy has spatial shape \(3, 3\) but kernel"):
        kernels.avg_pool2d_backward(np.zeros((1, 2, 3, 3), np.float32), (4, 4), 2, 2)
    with pytest.raises(ValueError, match="pool_type must be 'avg' or 'sum', got 'max'"):
        kernels.avg_pool2d(x, 2, pool_type="max")
    with pytest.raises(ShapeError, match=r"out has shape \(2,\), expected \(1, 2, 4, 4\)"):
        kernels.relu(x, out=np.zeros(2, np.float32))
    with pytest.raises(DTypeError, match="mean has dtype float64 but x's channels needs float32"):
        kernels.batch_norm_forward(x.reshape(1, 2, 16), np.zeros(2), np.zeros(2, np.float32),
                                   np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="not C-contiguous"):
        kernels.relu(x.transpose(0, 1, 3, 2))


@NEEDS_GXX
def test_sizes_past_the_kernels_int_indices_are_refused_before_any_launch():
    backend = cuda_on_cpu.CpuBackend()
    # a row of 2**31 values that are never read: the check comes before any allocation
    x = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (1, 1, 1, 2**31), (4,) * 4)
    with pytest.raises(ShapeError, match=r"im2col: columns = 2147483648 does not fit the "
                                         r"kernels' 32-bit indices.*help: split the batch"):
        gpu.Kernels(backend).im2col(x, 1)
    assert backend.launches == []


@NEEDS_GXX
def test_each_layer_kernel_launches_once_over_its_output():
    backend = cuda_on_cpu.CpuBackend()
    k = gpu.Kernels(backend)
    x = values((2, 3, 6, 6), np.float32)
    k.im2col(x, 3, pad=1)
    k.max_pool2d(x, 2, 2)
    k.relu(x)
    assert backend.launches == [("columns", "im2col_f32", 27 * 72),
                                ("pool", "max_pool2d_f32", 2 * 3 * 9),
                                ("relu", "relu_f32", x.size)]
