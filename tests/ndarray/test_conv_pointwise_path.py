"""The pointwise (1x1, unpadded) convolution path: forward and gradients against the
loop reference and finite differences, with the size threshold lowered so that small
arrays take it, and the same results as the columns path it replaces on big maps."""
import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.ndarray import conv_pointwise

from test_ops_conv import check_gradients, ref_conv

CASES = [  # data shape, num_filter, stride, groups, no_bias
    ((2, 3, 4, 5), 4, (1, 1), 1, False),
    ((2, 4, 7, 6), 6, (2, 3), 2, False),
    ((3, 2, 9), 3, (2,), 1, True),
    ((1, 2, 3, 4, 5), 2, (1, 2, 2), 1, False),
]


@pytest.fixture
def small_maps_pointwise(monkeypatch):
    monkeypatch.setattr(conv_pointwise, "MIN_POSITIONS", 1)
    monkeypatch.setattr(conv_pointwise, "MIN_SAMPLE_BYTES", 1)
    monkeypatch.setattr(conv_pointwise, "ONE_THREAD_MIN_POSITIONS", 1)


def _inputs(shape, f, groups, no_bias, rng):
    kernel = (1,) * (len(shape) - 2)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((f, shape[1] // groups) + kernel)
    return x, w, (None if no_bias else rng.standard_normal(f)), kernel


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])))
def test_pointwise_forward_and_gradients(case, small_maps_pointwise):
    shape, f, stride, groups, no_bias = case
    x, w, b, kernel = _inputs(shape, f, groups, no_bias, np.random.default_rng(5))
    attrs = dict(kernel=kernel, stride=stride, num_filter=f, num_group=groups, no_bias=no_bias)
    y = nd.Convolution(nd.array(x, dtype="float64"), nd.array(w, dtype="float64"),
                       None if b is None else nd.array(b, dtype="float64"), **attrs)
    zeros = (0,) * len(kernel)
    np.testing.assert_allclose(y.asnumpy(), ref_conv(x, w, b, stride, zeros, (1,) * len(kernel),
                                                     groups), rtol=1e-12, atol=1e-12)
    check_gradients(lambda *a: nd.Convolution(*a, **attrs), [a for a in (x, w, b) if a is not None])


def _run(x, w, b, stride, need_grad=True):
    xs, ws, bs = nd.array(x), nd.array(w), nd.array(b)
    for v in (xs, ws, bs):
        v.attach_grad()
    with autograd.record():
        y = nd.Convolution(xs, ws, bs, kernel=(1, 1), stride=stride, num_filter=w.shape[0])
    y.backward(nd.array(np.linspace(-1, 1, y.size).reshape(y.shape)))
    return [a.asnumpy() for a in (y, xs.grad, ws.grad, bs.grad)]


@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
def test_big_maps_take_the_pointwise_path_and_agree_with_columns(stride, monkeypatch):
    monkeypatch.setattr(conv_pointwise, "compute_threads", lambda: 2)
    rng = np.random.default_rng(7)
    # 512 channels of 32x32 (2 MiB a sample, 512 KiB strided): big enough for the path
    monkeypatch.setattr(conv_pointwise, "MIN_SAMPLE_BYTES", 512 << 10)
    x = rng.standard_normal((2, 512, 32, 32)).astype(np.float32)
    w, b = rng.standard_normal((6, 512, 1, 1)).astype(np.float32), rng.standard_normal(6)
    taken = []
    real = conv_pointwise.Pointwise.forward
    monkeypatch.setattr(conv_pointwise.Pointwise, "forward",
                        lambda self, *a: taken.append(1) or real(self, *a))
    fast = _run(x, w, b, stride)
    assert taken == [1]
    monkeypatch.setattr(conv_pointwise, "MIN_SAMPLE_BYTES", 10**12)   # the columns path
    monkeypatch.setattr(conv_pointwise, "ONE_THREAD_MIN_POSITIONS", 10**12)
    for got, want in zip(fast, _run(x, w, b, stride)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    assert taken == [1]


def test_small_maps_keep_the_batched_columns_path(monkeypatch):
    monkeypatch.setattr(conv_pointwise, "compute_threads", lambda: 2)
    taken = []
    monkeypatch.setattr(conv_pointwise.Pointwise, "forward", lambda *a: taken.append(1))
    x = nd.ones((4, 64, 7, 7))             # 7x7: batched columns are faster
    y = nd.Convolution(x, nd.ones((8, 64, 1, 1)), kernel=(1, 1), num_filter=8, no_bias=True)
    assert taken == [] and float(y[0, 0, 0, 0].asscalar()) == 64.0
    x = nd.ones((4, 64, 16, 16))           # grouped and 64 KiB a sample: columns too
    y = nd.Convolution(x, nd.ones((8, 32, 1, 1)), kernel=(1, 1), num_filter=8, num_group=2,
                       no_bias=True)
    assert taken == [] and float(y[0, 0, 0, 0].asscalar()) == 32.0


def test_one_group_from_14x14_takes_the_split_pointwise_path(monkeypatch):
    # its per-sample products run one per thread (long_product.stacked_product)
    monkeypatch.setattr(conv_pointwise, "compute_threads", lambda: 2)
    taken = []
    real = conv_pointwise.Pointwise.forward
    monkeypatch.setattr(conv_pointwise.Pointwise, "forward",
                        lambda self, *a: taken.append(1) or real(self, *a))
    x = nd.ones((4, 64, 14, 14))           # 49 KiB a sample
    y = nd.Convolution(x, nd.ones((8, 64, 1, 1)), kernel=(1, 1), num_filter=8, no_bias=True)
    assert taken == [1] and float(y[0, 0, 0, 0].asscalar()) == 64.0


@pytest.mark.parametrize("size,pointwise", [(14, True), (7, False)])
def test_on_one_thread_maps_from_14x14_take_the_pointwise_path(size, pointwise, monkeypatch):
    # one compute thread wakes no BLAS threads: the columns' copies decide (see the module)
    monkeypatch.setattr(conv_pointwise, "compute_threads", lambda: 1)
    taken = []
    real = conv_pointwise.Pointwise.forward
    monkeypatch.setattr(conv_pointwise.Pointwise, "forward",
                        lambda self, *a: taken.append(1) or real(self, *a))
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 16, size, size)).astype(np.float32)
    w, b = rng.standard_normal((5, 16, 1, 1)).astype(np.float32), rng.standard_normal(5)
    got = _run(x, w, b, (1, 1))
    assert taken == ([1] if pointwise else [])
    monkeypatch.setattr(conv_pointwise, "ONE_THREAD_MIN_POSITIONS", 10**12)  # the columns
    for a, want in zip(got, _run(x, w, b, (1, 1))):
        np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-4)
    assert taken == ([1] if pointwise else [])
