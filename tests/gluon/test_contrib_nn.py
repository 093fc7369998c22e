"""gluon.contrib.nn: Concurrent and HybridConcurrent against their children's outputs,
Identity, PixelShuffle1D/2D/3D against a NumPy formula; hybridized == imperative."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import gluon
from minigluon import autograd, nd
from minigluon.base import MXNetError, ShapeError
from minigluon.gluon import nn
from minigluon.gluon.contrib import nn as cnn


def out_and_grads(net, x):
    x = nd.array(x, dtype="float64")
    x.attach_grad()
    with autograd.record():
        y = net(x)
    head = np.random.default_rng(1).standard_normal(y.shape)
    y.backward(nd.array(head, dtype="float64"))
    params = [p.grad().asnumpy() for p in net.collect_params().values()]
    return y.asnumpy(), x.grad.asnumpy(), params, head


@pytest.mark.parametrize("kind", [cnn.Concurrent, cnn.HybridConcurrent])
@pytest.mark.parametrize("axis", [-1, 1])
def test_concurrent_concatenates_its_branches(kind, axis):
    net = kind(axis=axis)
    net.add(nn.Dense(3), cnn.Identity(), nn.Dense(2, activation="tanh"))
    net.cast("float64")
    net.initialize(mx.init.Xavier())
    x = np.random.default_rng(0).standard_normal((4, 5))
    out, dx, grads, head = out_and_grads(net, x)
    branches = [net[i](nd.array(x, dtype="float64")).asnumpy() for i in range(3)]
    np.testing.assert_array_equal(out, np.concatenate(branches, axis=axis))
    assert out.shape == (4, 10)
    # the input's gradient sums each branch's, given its slice of the head
    want_dx, start = np.zeros_like(x), 0
    for i, width in enumerate((3, 5, 2)):
        xi = nd.array(x, dtype="float64")
        xi.attach_grad()
        with autograd.record():
            yi = net[i](xi)
        yi.backward(nd.array(head[:, start:start + width], dtype="float64"))
        want_dx, start = want_dx + xi.grad.asnumpy(), start + width
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-14)
    assert len(grads) == 4
    if kind is cnn.HybridConcurrent:
        net.hybridize()
        out_and_grads(net, x)
        h_out, h_dx, h_grads, _ = out_and_grads(net, x)
        np.testing.assert_array_equal(h_out, out)
        np.testing.assert_array_equal(h_dx, dx)
        for a, b in zip(h_grads, grads):
            np.testing.assert_array_equal(a, b)
    assert repr(net).startswith(f"{kind.__name__}(\n  (0): Dense")


def test_identity_passes_the_input_and_its_gradient():
    x = np.random.default_rng(0).standard_normal((2, 3))
    out, dx, _, head = out_and_grads(cnn.Identity(), x)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(dx, head)


def shuffle_reference(x, factors):
    """out[n, c, s1*f1 + i1, ...] = x[n, c * prod(f) + flat index of (i1, ...), s1, ...]."""
    n, cf, *spatial = x.shape
    d = len(factors)
    group = int(np.prod(factors))
    c = cf // group
    grouped = x.reshape((n, c, group) + tuple(spatial))
    out = np.empty((n, c) + tuple(s * f for s, f in zip(spatial, factors)))
    for sub in np.ndindex(*factors):
        where = (slice(None), slice(None)) + tuple(slice(i, None, f) for i, f in
                                                   zip(sub, factors))
        out[where] = grouped[:, :, np.ravel_multi_index(sub, factors)]
    assert out.ndim == d + 2
    return out


@pytest.mark.parametrize("kind,factor,shape", [
    (cnn.PixelShuffle1D, 3, (2, 6, 4)),
    (cnn.PixelShuffle2D, 2, (2, 8, 3, 2)),
    (cnn.PixelShuffle2D, (2, 3), (1, 12, 2, 3)),
    (cnn.PixelShuffle3D, (1, 2, 2), (1, 8, 2, 1, 3)),
])
def test_pixel_shuffle(kind, factor, shape):
    net = kind(factor)
    factors = (factor,) * (len(shape) - 2) if isinstance(factor, int) else factor
    x = np.random.default_rng(0).standard_normal(shape)
    out, dx, _, head = out_and_grads(net, x)
    np.testing.assert_array_equal(out, shuffle_reference(x, factors))
    # a permutation: the gradient is the head shuffled back
    np.testing.assert_allclose((dx * x).sum(), (head * out).sum(), rtol=1e-12)
    net.hybridize()
    out_and_grads(net, x)
    h_out, h_dx, _, _ = out_and_grads(net, x)
    np.testing.assert_array_equal(h_out, out)
    np.testing.assert_array_equal(h_dx, dx)


def test_pixel_shuffle_names_bad_input():
    with pytest.raises(ShapeError, match=r"PixelShuffle2D\(factor=\(2, 2\)\) needs data "
                                         r"\(N, C \* 4, \.\.\.\) with 2 spatial axes, got "
                                         r"shape \(1, 6, 2, 2\)"):
        cnn.PixelShuffle2D(2)(nd.ones((1, 6, 2, 2)))
    with pytest.raises(MXNetError, match="factor must be a positive int or 2 of them"):
        cnn.PixelShuffle2D((2, 0))


def test_sync_batchnorm_on_one_device_normalizes_with_the_batch_statistics():
    x = np.random.RandomState(0).uniform(size=(6, 3, 4)).astype(np.float32)
    bn = gluon.contrib.nn.SyncBatchNorm(in_channels=3, num_devices=1)
    bn.initialize()
    data = mx.nd.array(x)
    data.attach_grad()
    with mx.autograd.record():
        out = bn(data)
        (out ** 2).sum().backward()
    mean = x.mean(axis=(0, 2), keepdims=True)
    var = x.var(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(out.asnumpy(), (x - mean) / np.sqrt(var + 1e-5), atol=1e-4)
    np.testing.assert_allclose(bn.running_mean.data().asnumpy(), 0.1 * mean.ravel(), atol=1e-5)
    # the loss sum(out**2) equals N*C*H minus eps terms, so its gradient is about zero
    np.testing.assert_allclose(data.grad.asnumpy(), 0, atol=1e-2)


def test_sync_batchnorm_matches_batchnorm_gradients_and_rejects_bad_num_devices():
    x = mx.nd.array(np.random.RandomState(1).normal(size=(4, 2, 3)))
    grads = []
    for layer in (gluon.nn.BatchNorm(in_channels=2), gluon.contrib.nn.SyncBatchNorm(in_channels=2)):
        layer.initialize()
        xi = x.copy()
        xi.attach_grad()
        with mx.autograd.record():
            (layer(xi) * mx.nd.arange(24).reshape((4, 2, 3))).sum().backward()
        grads.append(xi.grad.asnumpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)
    with pytest.raises(mx.base.MXNetError, match="num_devices must be a positive integer, got 0"):
        gluon.contrib.nn.SyncBatchNorm(num_devices=0)
