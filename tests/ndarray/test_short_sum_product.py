"""short_sum_product: a product with a short sum, split over threads by the rows of its
result, equals the one-call product in part counts 1 to 4 (on transposed views too); the
Winograd weight transform and its adjoint, split in two, give the columns path's values
and gradients; small products stay one call."""
import numpy as np
import pytest

from minigluon import autograd, nd, threads
from minigluon.ndarray import conv_host, long_product as lp


def _pair(seed, a_shape, b_shape, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)


@pytest.mark.parametrize("parts", [1, 2, 3, 4])
@pytest.mark.parametrize("a_shape,b_shape,transpose_a", [
    ((36, 9), (9, 64 * 32), False),     # F(4x4)'s weight transform
    ((16, 9), (9, 40 * 24), False),     # F(2x2)'s
    ((36, 50 * 20), (36, 9), True),     # the adjoint: du^T, a transposed view
    ((3, 5), (5, 7), False),            # fewer rows than some part counts
], ids=["transform4", "transform2", "adjoint", "short"])
def test_short_sum_product_equals_the_one_call_product(parts, a_shape, b_shape, transpose_a):
    for dtype in (np.float32, np.float64):
        a, b = _pair(parts, a_shape, b_shape, dtype)
        a = a.T if transpose_a else a
        got = lp.short_sum_product(a, b, parts=parts)
        want = a @ b
        assert got.shape == want.shape and got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-13,
                                   atol=1e-6 if dtype == np.float32 else 1e-13)


def test_small_products_are_one_call_and_big_ones_follow_the_compute_threads(monkeypatch):
    calls = []
    monkeypatch.setattr(lp.threads, "compute_threads", lambda: 2)
    real = lp._executor

    def spy(workers):
        calls.append(workers)
        return real(workers)
    monkeypatch.setattr(lp, "_executor", spy)
    small = _pair(0, (36, 9), (9, 128 * 128))        # 5.3M multiply-adds: one call
    np.testing.assert_allclose(lp.short_sum_product(*small), small[0] @ small[1], rtol=1e-6)
    assert calls == []
    big = _pair(1, (16, 9), (9, 512 * 512))         # 38M: a 512-channel layer's, split
    assert 16 * 9 * 512 * 512 >= lp.MIN_SHORT_SUM_WORK
    np.testing.assert_allclose(lp.short_sum_product(*big), big[0] @ big[1], rtol=1e-6)
    assert calls == [1]
    monkeypatch.undo()
    threads.look_again()        # BLAS back to the real compute count


def _conv_grads(x, w, b):
    xd, wd, bd = nd.array(x), nd.array(w), nd.array(b)
    for v in (xd, wd, bd):
        v.attach_grad()
    with autograd.record():
        y = nd.Convolution(xd, wd, bd, num_filter=w.shape[0], kernel=(3, 3), pad=(1, 1))
    dy = np.random.default_rng(5).standard_normal(y.shape).astype(x.dtype)
    y.backward(nd.array(dy, dtype=x.dtype))
    return y.asnumpy(), xd.grad.asnumpy(), wd.grad.asnumpy(), bd.grad.asnumpy()


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("shape", [(2, 16, 9, 9, 5), (3, 24, 8, 8, 32), (2, 64, 4, 4, 48)],
                         ids=["2x16x9x9_f5", "3x24x8x8_f32", "2x64x4x4_f48"])
def test_winograd_weight_transforms_split_in_two_match_the_columns_path(monkeypatch, tile,
                                                                        shape):
    n, c, h, wd, f = shape
    x, w = _pair(tile, (n, c, h, wd), (f, c, 3, 3))
    b = np.random.default_rng(7).standard_normal(f).astype(np.float32)
    monkeypatch.setattr(conv_host, "_PATH", "columns")
    want = _conv_grads(x, w, b)
    real, calls = lp.short_sum_product, []

    def two_parts(a, b, parts=None):
        calls.append(a.shape)
        return real(a, b, parts=2)
    monkeypatch.setattr(conv_host, "_PATH", f"winograd{tile}")
    monkeypatch.setattr(conv_host, "short_sum_product", two_parts)
    got = _conv_grads(x, w, b)
    # the forward's transform and the weight gradient's adjoint
    assert calls == [((tile + 2) ** 2, 9), (f * c, (tile + 2) ** 2)]
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-4, atol=1e-4 * np.abs(v).max())
