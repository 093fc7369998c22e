"""make_loss: identity forward; its gradient ignores the head and follows the formula of
each normalization, in nd (autograd) and in sym (an executor's backward())."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import MXNetError

X = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -4.0]])


@pytest.mark.parametrize("kwargs, divisor", [({}, 1), (dict(normalization="batch"), 2),
                                             (dict(normalization="valid"), 3),
                                             (dict(normalization="valid", valid_thresh=2.5), 1),
                                             (dict(normalization="valid", valid_thresh=9), 1)])
def test_gradient_is_grad_scale_over_the_normalizer(kwargs, divisor):
    x = nd.array(X)
    x.attach_grad()
    with autograd.record():
        y = nd.make_loss(x, grad_scale=3.0, **kwargs)
    y.backward(nd.array(np.full(X.shape, 7.0)))     # the head gradient is ignored
    np.testing.assert_array_equal(y.asnumpy(), X.astype(np.float32))
    np.testing.assert_allclose(x.grad.asnumpy(), np.full(X.shape, 3.0 / divisor), rtol=1e-6)


def test_chain_rule_through_the_ops_below():
    x = nd.array(X)
    x.attach_grad()
    with autograd.record():
        y = nd.MakeLoss(nd.square(x), normalization="batch")
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * X / 2, rtol=1e-6)


def test_symbolic_make_loss_trains_without_a_head_gradient():
    sym = mx.sym.make_loss(mx.sym.square(mx.sym.var("a")), grad_scale=0.5)
    grad = nd.zeros(X.shape)
    ex = sym.bind(mx.cpu(), {"a": nd.array(X)}, args_grad={"a": grad})
    np.testing.assert_allclose(ex.forward(is_train=True)[0].asnumpy(), X ** 2, rtol=1e-6)
    ex.backward()
    np.testing.assert_allclose(grad.asnumpy(), 0.5 * 2 * X, rtol=1e-6)


def test_unknown_normalization_is_named():
    with pytest.raises(MXNetError, match=r"normalization must be one of .*'mean'"):
        nd.make_loss(nd.array(X), normalization="mean")
