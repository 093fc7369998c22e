"""FullyConnected's bias gradient: a BLAS product (ones @ dy) for host float batches of
BIAS_PRODUCT_ROWS rows or more, NumPy's sum below; both against the float64 sum of the
rows, through the operator, flattened or not."""
import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.ndarray import ops_nn


@pytest.mark.parametrize("dtype,rtol", [("float32", 2e-5), ("float64", 1e-12)])
@pytest.mark.parametrize("lead", [(3,), (255,), (256,), (35, 32), (1200,)])
@pytest.mark.parametrize("flatten", [True, False])
def test_bias_gradient_is_the_sum_of_the_rows(lead, flatten, dtype, rtol):
    rng = np.random.default_rng(len(lead) + lead[0])
    x = nd.array(rng.standard_normal(lead + (6,)), dtype=dtype)
    w = nd.array(rng.standard_normal((7, 6 if not flatten or len(lead) == 1 else 6 * lead[1])),
                 dtype=dtype)
    if flatten and len(lead) == 2:
        x = x.reshape((lead[0], lead[1] * 6))
    b = nd.zeros((7,), dtype=dtype)
    head = rng.standard_normal((lead[0], 7) if flatten else lead + (7,)).astype(dtype)
    for a in (x, w, b):
        a.attach_grad()
    with autograd.record():
        y = nd.FullyConnected(x, w, b, num_hidden=7, flatten=flatten)
    y.backward(nd.array(head, dtype=dtype))
    want = head.reshape(-1, 7).astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(b.grad.asnumpy(), want, rtol=rtol, atol=rtol)
    assert b.grad.dtype == np.dtype(dtype)


def test_the_product_is_taken_from_the_bound():
    rows = ops_nn.BIAS_PRODUCT_ROWS
    d2 = np.random.default_rng(0).standard_normal((rows, 5)).astype(np.float32)
    np.testing.assert_allclose(ops_nn._bias_grad(d2), d2.astype(np.float64).sum(axis=0),
                               rtol=1e-5, atol=1e-5)
    half = d2[:rows - 1].astype(np.float16)          # below the bound and float16: NumPy
    np.testing.assert_array_equal(ops_nn._bias_grad(half), half.sum(axis=0))
