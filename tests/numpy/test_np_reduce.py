"""Oracle tests for mx.np's reductions and orderings: values, shapes (0-d when every axis
reduces), dtypes and gradients."""
import numpy as onp
import pytest

from minigluon import autograd, np
from gradcheck import check_grad, pos, rand
from nphelpers import check_np

AXES = [None, 0, -1, (0, 2)]
REDUCERS = {"sum": onp.sum, "prod": onp.prod, "mean": onp.mean, "max": onp.max,
            "min": onp.min}


@pytest.mark.parametrize("name", sorted(REDUCERS))
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(name, axis, keepdims):
    a = pos(2, 3, 4).astype("float32")
    want = REDUCERS[name](a, axis=axis, keepdims=keepdims)
    check_np(getattr(np, name)(np.array(a), axis=axis, keepdims=keepdims), want, rtol=1e-5)
    check_np(getattr(np.array(a), name)(axis=axis, keepdims=keepdims), want, rtol=1e-5)


def test_full_reduction_is_0d():
    x = np.ones((2, 3))
    assert x.sum().shape == () and x.mean(axis=(0, 1)).shape == ()
    assert np.ones(3).max(axis=0).shape == ()
    assert float(x.sum()) == 6.0


@pytest.mark.parametrize("dtype,want", [("int32", "int64"), ("bool", "int64"),
                                        ("uint8", "uint64"), ("float32", "float32")])
def test_sum_and_prod_accumulate_like_numpy(dtype, want):
    a = onp.array([[1, 0, 1], [1, 1, 0]]).astype(dtype)
    check_np(np.sum(np.array(a)), onp.sum(a), dtype=want)
    check_np(np.sum(np.array(a), axis=1), onp.sum(a, axis=1), dtype=want)
    check_np(np.prod(np.array(a) + 1, axis=0), onp.prod(a.astype(want) + 1, axis=0),
             dtype=want)


def test_sum_with_dtype_and_no_axes():
    a = onp.arange(6, dtype="int32").reshape(2, 3)
    check_np(np.sum(np.array(a), dtype="float32"), onp.sum(a, dtype="float32"))
    check_np(np.sum(np.array(a), axis=()), onp.sum(a, axis=()), dtype="int64")


def test_mean_std_var_of_integers_are_float32():
    a = onp.arange(6, dtype="int32").reshape(2, 3)
    check_np(np.mean(np.array(a), axis=0), onp.mean(a, axis=0), dtype="float32")
    check_np(np.var(np.array(a)), onp.var(a), dtype="float32")
    check_np(np.std(np.array(a), axis=1), onp.std(a, axis=1), dtype="float32")


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_std_and_var_match_numpy(axis, ddof, keepdims):
    a = rand(2, 3, 4).astype("float32")
    check_np(np.var(np.array(a), axis=axis, ddof=ddof, keepdims=keepdims),
             onp.var(a, axis=axis, ddof=ddof, keepdims=keepdims), rtol=1e-5)
    check_np(np.array(a).std(axis=axis, ddof=ddof, keepdims=keepdims),
             onp.std(a, axis=axis, ddof=ddof, keepdims=keepdims), rtol=1e-5)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_arg_reductions_give_int64(name, axis, keepdims):
    a = rand(3, 4).astype("float32")
    want = getattr(onp, name)(a, axis=axis, keepdims=keepdims)
    check_np(getattr(np, name)(np.array(a), axis=axis, keepdims=keepdims), want,
             dtype="int64")


def test_argmax_of_an_empty_array_names_the_problem():
    with pytest.raises(ValueError, match="empty"):
        np.zeros((0, 3)).argmax()


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cumsum_matches_numpy(axis, dtype):
    a = (rand(3, 4) * 4).astype(dtype)
    want = onp.cumsum(a, axis=axis)
    check_np(np.cumsum(np.array(a), axis=axis), want,
             dtype="int64" if dtype == "int32" else dtype, rtol=1e-5)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_sort_and_argsort_match_numpy(axis):
    a = rand(3, 5).astype("float32")
    check_np(np.sort(np.array(a), axis=axis), onp.sort(a, axis=axis))
    check_np(np.argsort(np.array(a), axis=axis), onp.argsort(a, axis=axis), dtype="int64")
    check_np(np.array(a).argsort(axis=axis), onp.argsort(a, axis=axis), dtype="int64")


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min"])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_reduction_gradients(name, axis):
    check_grad(lambda a: getattr(np, name)(a, axis=axis), rand(2, 3, 2))


@pytest.mark.parametrize("axis", [None, 1])
def test_std_var_cumsum_sort_gradients(axis):
    check_grad(lambda a: np.var(a, axis=axis, ddof=1), rand(3, 4))
    check_grad(lambda a: np.std(a, axis=axis), rand(3, 4))
    check_grad(lambda a: np.cumsum(a, axis=axis), rand(3, 4))
    check_grad(lambda a: np.sort(a, axis=axis), rand(3, 4))


def test_backward_from_a_0d_loss():
    x = np.array([1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        loss = (x * x).sum()
    assert loss.shape == ()
    loss.backward()
    check_np(x.grad, [2.0, 4.0, 6.0], dtype="float32")


@pytest.mark.parametrize("name", ["any", "all"])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_any_all_match_numpy(name, axis, keepdims):
    a = onp.array([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0]])
    want = getattr(onp, name)(a, axis=axis, keepdims=keepdims)
    check_np(getattr(np, name)(np.array(a), axis=axis, keepdims=keepdims), want)
    check_np(getattr(np.array(a) > 0, name)(axis=axis, keepdims=keepdims),
             getattr(a > 0, name)(axis=axis, keepdims=keepdims))
