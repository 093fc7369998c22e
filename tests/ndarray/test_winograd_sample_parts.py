"""HostWinograd on two or more compute threads runs a layer as sample parts, one per thread,
each part's transforms and products on that thread alone: values and gradients as the
one-part layer's and the columns path's, shape by shape (DenseNet's 3x3 128 -> 32 on 7x7
and 14x14 among them), with several chunks per part, parts of unequal size, and against
finite differences."""
import numpy as np
import pytest

from minigluon import autograd, nd, threads
from minigluon.ndarray import conv_host, sample_parts


def _grads(x, w, dy_seed=5):
    xd, wd = nd.array(x), nd.array(w)
    for v in (xd, wd):
        v.attach_grad()
    with autograd.record():
        y = nd.Convolution(xd, wd, no_bias=True, num_filter=w.shape[0], kernel=(3, 3),
                           pad=(1, 1))
    dy = np.random.default_rng(dy_seed).standard_normal(y.shape).astype(x.dtype)
    y.backward(nd.array(dy, dtype=x.dtype))
    return y.asnumpy(), xd.grad.asnumpy(), wd.grad.asnumpy()


@pytest.fixture
def on_threads(monkeypatch):
    """use(path, count): force the conv path and the compute-thread count; the parts that
    ran are recorded in the returned list."""
    calls, real = [], sample_parts.run_parts

    def spy(part, samples, parts):
        calls.append((samples, parts))
        return real(part, samples, parts)
    monkeypatch.setattr(sample_parts, "run_parts", spy)

    def use(path, count):
        monkeypatch.setattr(conv_host, "_PATH", path)
        monkeypatch.setattr(conv_host.threads, "compute_threads", lambda: count)
        calls.clear()
        return calls
    yield use
    monkeypatch.undo()
    threads.look_again()        # BLAS back to the real compute count


SHAPES = [(8, 128, 7, 7, 32), (8, 128, 14, 14, 32), (3, 20, 12, 10, 32), (5, 16, 9, 9, 5)]


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("shape", SHAPES, ids=["dn7x7", "dn14x14", "3x20x12x10", "5x16x9x9"])
def test_sample_parts_match_one_part_and_the_columns_path(on_threads, monkeypatch, parts,
                                                          tile, shape):
    n, c, h, wd, f = shape
    rng = np.random.default_rng(tile * 10 + parts)
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = (rng.standard_normal((f, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    on_threads("columns", 1)
    want = _grads(x, w)
    on_threads(f"winograd{tile}", 1)
    one = _grads(x, w)
    # chunks of one sample: several per part, the tiles kept by chunk for the backward
    monkeypatch.setattr(conv_host, "_CHUNK_BYTES", 1)
    calls = on_threads(f"winograd{tile}", parts)
    got = _grads(x, w)
    assert calls == [(n, parts)] * 2           # forward, backward: once each
    for name, g, o, v in zip(("y", "dx", "dw"), got, one, want):
        scale = np.abs(v).max()
        np.testing.assert_allclose(g, o, rtol=1e-5, atol=1e-5 * scale, err_msg=name)
        np.testing.assert_allclose(g, v, rtol=1e-4, atol=1e-4 * scale, err_msg=name)


def test_one_sample_or_one_thread_is_one_part(on_threads):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 16, 3, 3)).astype(np.float32)
    calls = on_threads("winograd2", 2)
    _grads(rng.standard_normal((1, 16, 6, 6)).astype(np.float32), w)
    assert calls == []
    calls = on_threads("winograd2", 1)
    _grads(rng.standard_normal((4, 16, 6, 6)).astype(np.float32), w)
    assert calls == []


@pytest.mark.parametrize("tile", [2, 4])
def test_sample_parts_gradients_match_finite_differences(on_threads, tile):
    rng = np.random.default_rng(tile)
    x = rng.standard_normal((3, 16, 8, 8))
    w = rng.standard_normal((4, 16, 3, 3)) / 12
    dy = np.random.default_rng(5).standard_normal((3, 4, 8, 8))
    calls = on_threads(f"winograd{tile}", 2)
    _, dx, dw = _grads(x, w)
    assert calls == [(3, 2)] * 2
    on_threads("columns", 1)

    def loss(x_, w_):
        y = nd.Convolution(nd.array(x_, dtype=np.float64), nd.array(w_, dtype=np.float64),
                           no_bias=True, num_filter=4, kernel=(3, 3), pad=(1, 1))
        return float((y.asnumpy() * dy).sum())
    eps = 1e-6
    for arr, grad, at in ((x, dx, (2, 5, 0, 7)), (x, dx, (0, 0, 4, 4)), (w, dw, (3, 15, 2, 1)),
                          (w, dw, (0, 7, 1, 1))):
        up, down = arr.copy(), arr.copy()
        up[at] += eps
        down[at] -= eps
        args_up = (up, w) if arr is x else (x, up)
        args_down = (down, w) if arr is x else (x, down)
        numeric = (loss(*args_up) - loss(*args_down)) / (2 * eps)
        assert grad[at] == pytest.approx(numeric, rel=1e-5, abs=1e-7), at
