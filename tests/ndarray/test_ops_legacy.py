"""Oracle tests for ops_legacy (choose/fill_element_0index, onehot_encode, _slice_assign and
its scalar form) and for manipulation.py (moveaxis, concatenate), against NumPy, with
finite-difference gradients."""
import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.base import AutogradError, ShapeError

from gradcheck import check_close, check_grad, rand

COLS = np.array([2, 0, 3])


def test_choose_element_0index_picks_one_per_row():
    x = rand(3, 4)
    check_close(nd.choose_element_0index(nd.array(x), nd.array(COLS)), x[np.arange(3), COLS])


def test_choose_element_0index_gradient():
    check_grad(lambda x: nd.choose_element_0index(x, nd.array(COLS)), rand(3, 4))


def test_fill_element_0index_writes_a_copy():
    x, v = rand(3, 4), rand(3, seed=2)
    want = x.copy()
    want[np.arange(3), COLS] = v
    src = nd.array(x)
    check_close(nd.fill_element_0index(src, nd.array(v), nd.array(COLS)), want)
    check_close(src, x)     # the input is unchanged


def test_fill_element_0index_gradient():
    check_grad(lambda x, v: nd.fill_element_0index(x, v, nd.array(COLS)), rand(3, 4),
               rand(3, seed=2))


def test_row_index_out_of_range_names_the_range():
    with pytest.raises(ShapeError, match=r"\[0, 4\)"):
        nd.choose_element_0index(nd.ones((3, 4)), nd.array([0, 4, 1]))
    with pytest.raises(ShapeError, match="one index per row"):
        nd.fill_element_0index(nd.ones((3, 4)), nd.ones((3,)), nd.array([0, 1]))


def test_onehot_encode_writes_into_out():
    out = nd.full((3, 4), 7)
    assert nd.onehot_encode(nd.array(COLS), out) is out
    check_close(out, np.eye(4)[COLS])


def test_slice_assign_and_crop_alias():
    x, v = rand(2, 3, 4), rand(2, 1, 3, seed=3)
    want = x.copy()
    want[0:2, 0:1, 0:3] = v
    check_close(nd._internal._slice_assign(nd.array(x), nd.array(v), begin=(0, 0, 0),
                                           end=(2, 1, 3)), want)
    dst = nd.array(x)
    nd._internal._crop_assign(dst, nd.array(v), begin=(0, 0, 0), end=(2, 1, 3), out=dst)
    check_close(dst, want)


def test_slice_assign_gradients():
    f = lambda x, v: nd._internal._slice_assign(x, v, begin=(1, None), end=(3, None), step=(1, 2))
    check_grad(f, rand(4, 5), rand(2, 3, seed=4))
    g = lambda x: nd._internal._slice_assign_scalar(x, scalar=5, begin=(0,), end=(2,))
    check_grad(g, rand(4, 5))


def test_slice_assign_scalar_value():
    x = rand(3, 4)
    want = x.copy()
    want[1:3, ::2] = 5
    got = nd._internal._crop_assign_scalar(nd.array(x), scalar=5, begin=(1, None),
                                           end=(3, None), step=(1, 2))
    check_close(got, want)


def test_slice_assign_shape_mismatch_is_clear():
    with pytest.raises(ShapeError, match="does not fit"):
        nd._internal._slice_assign(nd.ones((3, 4)), nd.ones((5,)), begin=(0,), end=(2,))


@pytest.mark.parametrize("src,dst", [(0, 2), (2, 0), (-1, 0), ([0, 1], [2, 0]), ((1,), (1,))])
def test_moveaxis_matches_numpy(src, dst):
    x = rand(2, 3, 4)
    check_close(nd.moveaxis(nd.array(x), src, dst), np.moveaxis(x, src, dst))


def test_moveaxis_gradient():
    check_grad(lambda x: nd.moveaxis(x, [0, 2], [1, 0]), rand(2, 3, 4))


@pytest.mark.parametrize("src,dst", [(3, 0), (-4, 0), (0, 5), ([0, 0], [0, 1]), ([0, 1], [1, 1]),
                                     (0, [0, 1])])
def test_moveaxis_bad_axes_raise_value_error(src, dst):
    with pytest.raises(ValueError, match="moveaxis"):
        nd.moveaxis(nd.zeros((1, 2, 3)), src, dst)


def test_concatenate_matches_numpy_and_keeps_gradients():
    parts = [rand(2, k, 3, seed=k) for k in (1, 2, 3)]
    check_close(nd.concatenate([nd.array(p) for p in parts], axis=1),
                np.concatenate(parts, axis=1))
    check_grad(lambda a, b: nd.concatenate([a, b], axis=0), rand(2, 3), rand(1, 3, seed=5))
    one = nd.ones((2,))
    assert nd.concatenate([one], always_copy=False) is one
    with pytest.raises(ShapeError, match="at least one"):
        nd.concatenate([])


def test_setitem_while_recording_raises_like_mxnet():
    x, y = nd.zeros((3,)), nd.ones((1,))
    y.attach_grad()
    with autograd.record():
        with pytest.raises(AutogradError, match="Inplace operations"):
            x[0] = y
    x[0] = y      # outside recording it writes
    check_close(x, [1, 0, 0])
