"""mx.nd.contrib's floating-point class tests against NumPy."""
import numpy as np
import pytest

from minigluon import autograd, nd

VALUES = np.array([[np.inf, -np.inf, 1.5], [np.nan, 0.0, -2.0]], dtype=np.float32)


@pytest.mark.parametrize("name", ["isinf", "isnan", "isfinite"])
def test_class_tests_match_numpy_in_input_dtype(name):
    got = getattr(nd.contrib, name)(nd.array(VALUES))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.asnumpy(), getattr(np, name)(VALUES).astype(np.float32))


def test_class_test_takes_out_and_has_no_gradient():
    out = nd.zeros(VALUES.shape)
    nd.contrib.isnan(nd.array(VALUES), out=out)
    assert out.asnumpy()[1, 0] == 1
    x = nd.array(VALUES)
    x.attach_grad()
    with autograd.record():
        y = nd.contrib.isinf(x)
    assert y._node is None      # a 0/1 mask is not differentiable


def test_class_test_needs_an_array():
    with pytest.raises(TypeError, match="isinf: expected an NDArray, got list"):
        nd.contrib.isinf([1.0, 2.0])
