"""NDArray details MXNet's own tests check: flatten/squeeze/expand_dims copies versus
`inplace=True` views, the contiguity rule of basic slices, `out=` on the creation functions,
and the MXNet-internal names its tests import (py_slice, _STORAGE_TYPE_STR_TO_ID)."""
import itertools

import numpy as np
import pytest

from minigluon import nd
from minigluon.base import ShapeError
from minigluon.ndarray import ndarray as nd_module


@pytest.mark.parametrize("method,kwargs,shape,oracle", [
    ("flatten", {}, (2, 3, 4), lambda a: a.reshape(2, 12)),
    ("squeeze", {"axis": 1}, (2, 1, 4), lambda a: np.squeeze(a, axis=1)),
    ("expand_dims", {"axis": 1}, (2, 3), lambda a: np.expand_dims(a, 1))])
def test_shape_methods_copy_unless_inplace(method, kwargs, shape, oracle):
    x = nd.array(np.arange(np.prod(shape)).reshape(shape))
    want = oracle(x.asnumpy())
    copy = getattr(x, method)(**kwargs)
    view = getattr(x, method)(inplace=True, **kwargs)
    x[:] = -1
    np.testing.assert_array_equal(copy.asnumpy(), want)
    assert (view.asnumpy() == -1).all() and view.shape == want.shape


SLICES = [slice(None), slice(2), slice(1, 4), slice(None, None, 2), slice(0, 1),
          slice(None, None, -1), slice(3, None, -2), slice(5, 5)]


def test_basic_slice_contiguity_matches_numpy():
    x = np.zeros((6, 7, 5))
    for key in itertools.product(SLICES, repeat=3):
        want = x[key].flags.contiguous
        assert nd.NDArray._basic_indexing_slice_is_contiguous(key, x.shape) == want, key
    assert nd.NDArray._basic_indexing_slice_is_contiguous((1, slice(None)), x.shape)
    assert not nd.NDArray._basic_indexing_slice_is_contiguous(slice(None, None, 2), x.shape)


@pytest.mark.parametrize("make,args,want", [
    (nd.zeros, ((2, 2),), np.zeros((2, 2))), (nd.ones, ((2, 2),), np.ones((2, 2))),
    (nd.full, ((2, 2), 3), np.full((2, 2), 3)), (nd.arange, (0, 4), np.arange(4)),
    (nd.linspace, (0, 1, 4), np.linspace(0, 1, 4)), (nd.eye, (2,), np.eye(2))])
def test_creation_functions_write_into_out(make, args, want):
    out = nd.full(want.shape, 9)
    assert make(*args, out=out) is out
    np.testing.assert_allclose(out.asnumpy(), want)


def test_creation_out_of_the_wrong_shape_is_refused():
    with pytest.raises(ShapeError, match=r"out has shape \(3,\), the result has \(2, 2\)"):
        nd.zeros((2, 2), out=nd.zeros((3,)))


def test_broadcast_like_axes_must_pair_up():
    lhs, rhs = nd.ones((1, 2)), nd.ones((3, 4))
    assert nd.broadcast_like(lhs, rhs, lhs_axes=(0,), rhs_axes=(0,)).shape == (3, 2)
    with pytest.raises(ShapeError, match="non-empty and of the same length"):
        nd.broadcast_like(lhs, rhs, lhs_axes=(), rhs_axes=())
    with pytest.raises(ShapeError, match="non-empty and of the same length"):
        nd.broadcast_like(lhs, rhs, lhs_axes=(0, 1), rhs_axes=(0,))


def test_mxnet_internal_names():
    assert nd_module.py_slice is slice
    assert nd_module._STORAGE_TYPE_STR_TO_ID == {"undefined": -1, "default": 0,
                                                 "row_sparse": 1, "csr": 2}
    assert nd_module._STORAGE_TYPE_STR_TO_ID is nd_module.STORAGE_TYPE_STR_TO_ID
    assert nd_module.STORAGE_TYPE_ID_TO_STR[1] == "row_sparse"
    assert nd.uniform is nd.random_uniform and nd.normal is nd.random_normal


def test_numpy_all_any_and_reductions_take_ndarrays():
    x = nd.array([[0, 2], [3, 4]], dtype="int32")
    assert np.all(x.floor() == x) and not np.all(x)
    assert np.any(x) and not np.any(nd.zeros((3,)))
    np.testing.assert_array_equal(np.all(x, axis=0), [False, True])
    assert isinstance(np.sum(x), nd.NDArray) and np.sum(x).asscalar() == 9


def test_fluent_methods_take_out_and_rhs_by_name():
    y = nd.zeros((2,))
    assert nd.ones((2, 3)).sum(axis=1, out=y) is y
    np.testing.assert_array_equal(y.asnumpy(), [3, 3])
    assert nd.ones((2, 3)).reshape_like(rhs=nd.zeros((3, 2))).shape == (3, 2)
    with pytest.raises(ShapeError, match="reshape_like"):
        nd.ones((2, 3)).reshape_like(nd.zeros((4,)))
