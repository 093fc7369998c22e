"""long_product: a product whose sum is split over threads equals the plain product (to
float tolerance), in part counts 1 to 4, batched, and as the 1x1 convolution's weight
gradient on two compute threads; bad arrays go to the plain product."""
import os

import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.ndarray import conv_host, long_product as lp


@pytest.mark.parametrize("parts", [1, 2, 3, 4])
@pytest.mark.parametrize("shape", [(16, 5000, 96), (3, 7, 4097, 5)], ids=["2d", "batched"])
def test_split_sum_equals_the_plain_product(parts, shape):
    rng = np.random.default_rng(parts)
    *lead, m, length, n = shape
    a = rng.standard_normal((*lead, m, length)).astype(np.float32)
    b = rng.standard_normal((*lead, length, n)).astype(np.float32)
    got = lp.long_product(a, b, parts=parts)
    want = (a.astype(np.float64) @ b.astype(np.float64))
    assert got.shape == want.shape and got.dtype == np.float32
    # float32 sums of `length` products: bound by the sum of |products|
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert np.all(np.abs(got - want) <= 1e-5 * scale)


def test_default_parts_follow_the_compute_threads(executor_calls):
    a, b = np.ones((4, 3 * lp.MIN_PART), np.float32), np.ones((3 * lp.MIN_PART, 2), np.float32)
    assert np.array_equal(lp.long_product(a, b), np.full((4, 2), 3 * lp.MIN_PART, np.float32))
    assert executor_calls == [1]
    # a sum too short for two parts of MIN_PART is one product
    lp.long_product(a[:, :lp.MIN_PART + 1], b[:lp.MIN_PART + 1])
    assert executor_calls == [1]


def test_a_forked_child_starts_its_own_pool():
    a, b = np.ones((2, 5000), np.float32), np.ones((5000, 3), np.float32)
    lp.long_product(a, b, parts=2)
    assert lp._pool is not None
    pid = os.fork()
    if pid == 0:    # the child: no pool inherited, and a split product still works
        ok = lp._pool is None and lp.long_product(a, b, parts=2)[0, 0] == 5000
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_1x1_weight_gradient_split_in_two_matches_float64(monkeypatch):
    calls = []

    def two_parts(a, b):
        calls.append((a.shape, b.shape))
        return lp.long_product(a, b, parts=2)
    monkeypatch.setattr(conv_host, "long_product", two_parts)
    rng = np.random.default_rng(7)
    # 7x7 maps: the columns path on any thread count (conv_pointwise.py's bounds)
    x = rng.standard_normal((4, 24, 7, 7)).astype(np.float32)
    w = nd.array(rng.standard_normal((40, 24, 1, 1)).astype(np.float32))
    dy = rng.standard_normal((4, 40, 7, 7)).astype(np.float32)
    xd = nd.array(x)
    for v in (xd, w):       # with the data gradient, the weight's takes the rows @ columns^T
        v.attach_grad()
    with autograd.record():
        y = nd.Convolution(xd, w, kernel=(1, 1), num_filter=40, no_bias=True)
    y.backward(nd.array(dy))
    assert calls == [((40, 4 * 49), (4 * 49, 24))]
    want = np.einsum("nfyx,ncyx->fc", dy.astype(np.float64), x.astype(np.float64))
    np.testing.assert_allclose(w.grad.asnumpy().reshape(40, 24), want, rtol=1e-5, atol=1e-4)
