"""sample_parts: concatenations and gradient sums split over threads by samples give
NumPy's bits, in 1 to 3 parts and along any axis; a hybridized dense block whose
concatenations and gradient sums are split gives the unsplit values and gradients."""
import numpy as np
import pytest

from minigluon import autograd, nd, threads
from minigluon.gluon import nn
from minigluon.gluon.contrib.nn import HybridConcurrent, Identity
from minigluon.ndarray import sample_parts


@pytest.fixture
def split_everything(monkeypatch):
    """Every array big enough, `parts` compute threads; BLAS back to the real count after."""
    def use(parts):
        monkeypatch.setattr(sample_parts, "MIN_BYTES", 0)
        monkeypatch.setattr(sample_parts.threads, "compute_threads", lambda: parts)
    yield use
    monkeypatch.undo()
    threads.look_again()


@pytest.mark.parametrize("parts", [1, 2, 3])
@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_concatenate_is_numpys(split_everything, parts, axis):
    split_everything(parts)
    rng = np.random.default_rng(axis)
    shapes = [(5, 4, 3, 6), (5, 4, 3, 6), (5, 4, 3, 6)]
    arrays = []
    for k, shape in enumerate(shapes):
        shape = list(shape)
        shape[axis] += k          # different lengths along the joined axis
        arrays.append(rng.standard_normal(shape).astype(np.float32))
    got = sample_parts.concatenate(arrays, axis)
    want = np.concatenate(arrays, axis=axis)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got, want)


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_add_is_numpys_on_views(split_everything, parts):
    split_everything(parts)
    rng = np.random.default_rng(parts)
    whole = rng.standard_normal((7, 9, 4, 4))
    view = np.split(whole, [6], axis=1)[0]          # what concat's backward hands on
    other = rng.standard_normal((7, 6, 4, 4))
    got = sample_parts.add(view, other)
    assert got.flags.c_contiguous and np.array_equal(got, view + other)
    # mixed shapes or dtypes are NumPy's own sum
    assert np.array_equal(sample_parts.add(other, np.float64(2.0)), other + 2.0)


def _dense_block(layers=3, growth=4):
    net = nn.HybridSequential()
    for _ in range(layers):
        new = nn.HybridSequential()
        new.add(nn.BatchNorm(), nn.Activation("relu"), nn.Conv2D(growth, 3, padding=1))
        layer = HybridConcurrent(axis=1)
        layer.add(Identity(), new)
        net.add(layer)
    net.initialize()
    return net


def _run(net, x):
    xd = nd.array(x)
    xd.attach_grad()
    with autograd.record():
        y = net(xd)
        loss = (y * y).sum()
    loss.backward()
    params = sorted(net.collect_params().items())
    return [y.asnumpy(), xd.grad.asnumpy()] + [p.grad().asnumpy() for _, p in params
                                                if p.grad_req != "null"]


def test_hybridized_dense_block_split_matches_unsplit(split_everything, monkeypatch):
    x = np.random.default_rng(3).standard_normal((4, 6, 8, 8)).astype(np.float32)
    net = _dense_block()
    net.hybridize()
    _run(net, x)                                    # trace; moving statistics settle alike
    monkeypatch.setattr(sample_parts, "MIN_BYTES", 1 << 60)
    want = _run(net, x)
    split_everything(2)
    calls, real = [], sample_parts._run

    def spy(part, samples, parts):
        calls.append(parts)
        return real(part, samples, parts)
    monkeypatch.setattr(sample_parts, "_run", spy)
    got = _run(net, x)
    assert len(calls) >= 3 + 2 and set(calls) == {2}   # the concatenations, the sums
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
