"""stacked_product and summed_product: a stack of products split over threads by entry
equals the plain product (each entry's bits are its one-call product's), in part counts 1
to 4, with a broadcast stack of one and an `out`; and the convolutions that use them
(Winograd's products, the 1x1 layers' per-sample products) give the plain path's values and
gradients when split in two."""
import numpy as np
import pytest

from minigluon import autograd, nd, threads
from minigluon.ndarray import conv_host, conv_pointwise, long_product as lp


def _stacks(seed, a_shape, b_shape):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(a_shape).astype(np.float32),
            rng.standard_normal(b_shape).astype(np.float32))


@pytest.mark.parametrize("parts", [1, 2, 3, 4])
@pytest.mark.parametrize("a_shape,b_shape", [
    ((36, 32, 128), (36, 128, 50)),     # Winograd's forward stack
    ((1, 24, 40), (7, 40, 49)),         # one weight against every sample
    ((5, 9, 16), (1, 16, 3)),
    ((3, 4, 6), (3, 6, 2)),             # fewer entries than some part counts
], ids=["winograd", "broadcast_a", "broadcast_b", "short"])
def test_stacked_product_equals_one_call_per_entry(parts, a_shape, b_shape):
    a, b = _stacks(parts, a_shape, b_shape)
    got = lp.stacked_product(a, b, parts=parts)
    want = np.stack([a[min(s, len(a) - 1)] @ b[min(s, len(b) - 1)]
                     for s in range(max(len(a), len(b)))])
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)


def test_stacked_product_writes_out_and_takes_transposed_views():
    a, b = _stacks(3, (36, 32, 128), (36, 32, 60))
    out = np.full((36, 128, 60), np.nan, np.float32)
    got = lp.stacked_product(a.swapaxes(1, 2), b, out=out, parts=2)
    assert got is out
    np.testing.assert_allclose(out, a.swapaxes(1, 2) @ b, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_summed_product_equals_the_sum_of_the_stack(parts):
    a, b = _stacks(parts, (8, 16, 300), (8, 20, 300))
    got = lp.summed_product(a, b.swapaxes(1, 2), parts=parts)
    want = np.einsum("sfp,scp->fc", a.astype(np.float64), b.astype(np.float64))
    scale = np.einsum("sfp,scp->fc", np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert got.shape == (16, 20) and got.dtype == np.float32
    assert np.all(np.abs(got - want) <= 1e-5 * scale)


def test_small_stacks_are_one_call_and_big_ones_follow_the_compute_threads(monkeypatch):
    calls = []
    monkeypatch.setattr(lp.threads, "compute_threads", lambda: 2)
    real = lp._executor

    def spy(workers):
        calls.append(workers)
        return real(workers)
    monkeypatch.setattr(lp, "_executor", spy)
    small = _stacks(0, (2, 4, 4), (2, 4, 4))
    np.testing.assert_allclose(lp.stacked_product(*small), small[0] @ small[1], rtol=1e-6)
    assert calls == []
    big = _stacks(1, (36, 32, 128), (36, 128, 16))       # 2.4M multiply-adds
    assert 36 * 32 * 128 * 16 >= lp.MIN_STACK_WORK
    np.testing.assert_allclose(lp.stacked_product(*big), big[0] @ big[1], rtol=1e-5, atol=1e-4)
    assert calls == [1]
    monkeypatch.undo()
    threads.look_again()        # BLAS back to the real compute count


def _conv_grads(x, w, **attrs):
    xd, wd = nd.array(x), nd.array(w)
    for v in (xd, wd):
        v.attach_grad()
    with autograd.record():
        y = nd.Convolution(xd, wd, no_bias=True, num_filter=w.shape[0], **attrs)
    dy = np.random.default_rng(5).standard_normal(y.shape).astype(np.float32)
    y.backward(nd.array(dy))
    return y.asnumpy(), xd.grad.asnumpy(), wd.grad.asnumpy()


def _split_in_two(monkeypatch, module, name):
    real, calls = getattr(lp, name), []

    def two_parts(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **dict(kwargs, parts=2))
    monkeypatch.setattr(module, name, two_parts)
    return calls


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("shape", [(2, 16, 9, 9, 5), (3, 20, 12, 10, 32)],
                         ids=["2x16x9x9_f5", "3x20x12x10_f32"])
def test_winograd_split_in_two_matches_the_columns_path(monkeypatch, tile, shape):
    n, c, h, wd, f = shape
    x, w = _stacks(tile, (n, c, h, wd), (f, c, 3, 3))
    monkeypatch.setattr(conv_host, "_PATH", "columns")
    want = _conv_grads(x, w, kernel=(3, 3), pad=(1, 1))
    monkeypatch.setattr(conv_host, "_PATH", f"winograd{tile}")
    calls = _split_in_two(monkeypatch, conv_host, "stacked_product")
    got = _conv_grads(x, w, kernel=(3, 3), pad=(1, 1))
    assert len(calls) >= 3      # forward, data gradient and weight gradient products
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-4, atol=1e-4 * np.abs(v).max())


@pytest.mark.parametrize("stride", [1, 2])
def test_pointwise_split_in_two_matches_the_columns_path(monkeypatch, stride):
    x, w = _stacks(stride, (5, 24, 16, 16), (40, 24, 1, 1))
    attrs = dict(kernel=(1, 1), stride=(stride, stride))
    monkeypatch.setattr(conv_host, "_PATH", "columns")
    monkeypatch.setattr(conv_pointwise, "MIN_SAMPLE_BYTES", 1 << 40)   # no pointwise path
    monkeypatch.setattr(conv_pointwise, "ONE_THREAD_MIN_POSITIONS", 1 << 40)
    want = _conv_grads(x, w, **attrs)
    monkeypatch.setattr(conv_pointwise, "MIN_SAMPLE_BYTES", 0)
    monkeypatch.setattr(conv_pointwise, "MIN_POSITIONS", 0)
    monkeypatch.setattr(conv_pointwise, "ONE_THREAD_MIN_POSITIONS", 0)
    stacked = _split_in_two(monkeypatch, conv_pointwise, "stacked_product")
    summed = _split_in_two(monkeypatch, conv_pointwise, "summed_product")
    got = _conv_grads(x, w, **attrs)
    assert len(stacked) == 2 and len(summed) == 1      # forward, data gradient; weight
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-5, atol=1e-5 * np.abs(v).max())
