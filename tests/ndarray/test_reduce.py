"""Oracle tests for ops_reduce: every axis variant against NumPy (with MXNet 1.x's rule that
a reduction never returns a 0-d array), gradients by finite differences, softmax, ordering."""
import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.base import MXNetError, ShapeError

from gradcheck import check_close, check_grad, rand


def mx_axes(ndim, axis, exclude=False):
    """MXNet's reading of `axis`: None or () reduce everything, even with exclude."""
    if axis is None or axis == ():
        return tuple(range(ndim))
    axes = {a % ndim for a in ((axis,) if isinstance(axis, int) else axis)}
    return tuple(sorted(set(range(ndim)) - axes if exclude else axes))


def mx_reduce(f, x, axis=None, keepdims=False, exclude=False):
    out = f(x, axis=mx_axes(x.ndim, axis, exclude), keepdims=keepdims)
    return out.reshape(1) if np.ndim(out) == 0 else out   # MXNet 1.x: shape (1,), not ()


REDUCERS = {
    "sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
    "nansum": np.nansum, "sum_axis": np.sum, "max_axis": np.max, "min_axis": np.min,
}
AXES = [dict(), dict(axis=None), dict(axis=()), dict(axis=1), dict(axis=-1), dict(axis=(0, 2)),
        dict(axis=(-1, 0)), dict(axis=1, keepdims=True), dict(axis=(0, 2), keepdims=True),
        dict(keepdims=True), dict(axis=1, exclude=True), dict(axis=(0, 2), exclude=True),
        dict(axis=(1,), exclude=True, keepdims=True), dict(axis=(), exclude=True),
        dict(axis=(0, 1, 2), exclude=True)]


@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_reduce_forward_every_axis_variant(name):
    x = rand(2, 3, 4).astype(np.float32)
    for kw in AXES:
        want = mx_reduce(REDUCERS[name], x.astype(np.float64), **kw)
        got = getattr(nd, name)(nd.array(x), **kw)
        assert got.dtype == np.float32, kw
        check_close(got, want, rtol=1e-5, atol=1e-6)
    if name in ("sum", "mean", "max", "min", "prod", "nansum"):
        check_close(getattr(nd.array(x), name)(axis=1), REDUCERS[name](x, axis=1), rtol=1e-5)


@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_reduce_size_one_odd_and_0d(name):
    f = REDUCERS[name]
    for shape, kw in [((1,), {}), ((1, 5, 1), dict(axis=0)), ((1, 5, 1), dict(axis=(0, 2))),
                      ((3, 1), dict(axis=1, keepdims=True)), ((7,), dict(axis=0)),
                      ((), {})]:
        x = rand(*shape, seed=3)
        check_close(getattr(nd, name)(nd.array(x), **kw), mx_reduce(f, x, **kw), rtol=1e-5)


def test_full_reduction_returns_shape_1():
    x = nd.array([[1, 2, 3], [4, 5, 6]])
    for out in (x.sum(), nd.sum(x), x.mean(), x.max(), x.min(), x.prod(), nd.norm(x),
                nd.sum(x, axis=(0, 1)), nd.sum(nd.array([1, 2]), axis=0)):
        assert out.shape == (1,)
    assert x.sum().asscalar() == 21
    assert x.sum(keepdims=True).shape == (1, 1)


GRAD_AXES = [dict(), dict(axis=0), dict(axis=-1), dict(axis=(0, 2)), dict(axis=1, keepdims=True),
             dict(axis=1, exclude=True), dict(axis=(0, 2), exclude=True, keepdims=True)]


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "nansum"])
def test_reduce_backward(name):
    x = rand(2, 3, 4, seed=9)
    for kw in GRAD_AXES:
        check_grad(lambda a: getattr(nd, name)(a, **kw), x)


def test_max_gradient_splits_ties():
    x = nd.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
    x.attach_grad()
    with autograd.record():
        y = x.max(axis=1)
    y.backward()
    check_close(x.grad, [[0, 0.5, 0.5], [1, 0, 0]])


def test_prod_gradient_with_zeros():
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0], [1.5, 2.0, -1.0]])
    check_close(nd.prod(nd.array(x), axis=1), np.prod(x, axis=1))
    check_grad(lambda a: nd.prod(a, axis=1), x)
    check_grad(lambda a: nd.prod(a), x)
    check_grad(lambda a: nd.prod(a, axis=0), x)


def test_nansum_skips_nan_and_its_gradient_is_zero_there():
    x = np.array([[1.0, np.nan, 2.0], [np.nan, np.nan, 3.0]])
    check_close(nd.nansum(nd.array(x), axis=1), [3.0, 3.0])
    a = nd.array(x)
    a.attach_grad()
    with autograd.record():
        y = nd.nansum(a)
    y.backward()
    check_close(a.grad, [[1, 0, 1], [0, 0, 1]])


def test_reduce_integer_dtype_and_bad_axis():
    xi = nd.array([[1, 2], [3, 4]], dtype="int32")
    assert xi.sum(axis=0).dtype == np.int32
    check_close(xi.sum(axis=0), [4, 6])
    with pytest.raises(ShapeError, match="sum"):
        nd.sum(nd.ones((2, 3)), axis=2)
    with pytest.raises(ShapeError, match="mean"):
        nd.mean(nd.ones((2, 3)), axis=(1, -1))


@pytest.mark.parametrize("ord_", [1, 2])
def test_norm(ord_):
    x = rand(2, 3, 4)
    f = (lambda v, axis, keepdims: np.abs(v).sum(axis=axis, keepdims=keepdims)) if ord_ == 1 \
        else (lambda v, axis, keepdims: np.sqrt((v * v).sum(axis=axis, keepdims=keepdims)))
    for kw in [dict(), dict(axis=1), dict(axis=-1, keepdims=True), dict(axis=(0, 2)),
               dict(keepdims=True)]:
        check_close(nd.norm(nd.array(x), ord=ord_, **kw), mx_reduce(f, x, **kw), rtol=1e-5)
        check_grad(lambda a: nd.norm(a, ord=ord_, **kw), x)
    check_close(nd.array(x).norm(), [np.sqrt((x * x).sum())], rtol=1e-5)
    with pytest.raises(MXNetError, match="norm"):
        nd.norm(nd.array(x), ord=3)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin(name):
    f = getattr(np, name)
    x = rand(3, 4, 5)
    for axis in (0, 1, 2, -1):
        out = getattr(nd, name)(nd.array(x), axis=axis)
        assert out.dtype == np.float32
        check_close(out, f(x, axis=axis))
        kept = getattr(nd, name)(nd.array(x), axis=axis, keepdims=True)
        check_close(kept, np.expand_dims(f(x, axis=axis), axis))
    everything = getattr(nd, name)(nd.array(x))
    assert everything.dtype == np.float32
    check_close(everything, [f(x)])
    check_close(getattr(nd, name)(nd.array(x), keepdims=True), np.full((1, 1, 1), f(x)))
    check_close(getattr(nd, name)(nd.array([3.0, 1.0, 3.0]), axis=0),
                [f(np.array([3.0, 1.0, 3.0]))])
    check_close(getattr(nd.array(x), name)(axis=1), f(x, axis=1))
    xi = nd.array([[1, 5, 5], [7, 2, 2]], dtype="int32")
    out = getattr(nd, name)(xi, axis=1)
    assert out.dtype == np.float32
    check_close(out, f(xi.asnumpy(), axis=1))


def np_softmax(x, axis, t=1.0):
    e = np.exp((x - x.max(axis=axis, keepdims=True)) / t)
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("temperature", [None, 2.0])
def test_softmax_and_log_softmax(axis, temperature):
    x = rand(2, 3, 4, high=3.0)
    t = temperature or 1.0
    sm = np_softmax(x, axis, t)
    check_close(nd.softmax(nd.array(x), axis=axis, temperature=temperature), sm, rtol=1e-5)
    z = (x - x.max(axis=axis, keepdims=True)) / t
    check_close(nd.log_softmax(nd.array(x), axis=axis, temperature=temperature),
                z - np.log(np.exp(z).sum(axis=axis, keepdims=True)), rtol=1e-5, atol=1e-5)
    check_grad(lambda a: nd.softmax(a, axis=axis, temperature=temperature), x)
    check_grad(lambda a: nd.log_softmax(a, axis=axis, temperature=temperature), x)


def test_softmax_is_stable_and_default_axis():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, 0.0, 1.0]])
    check_close(nd.softmax(nd.array(x)), np_softmax(x, -1), rtol=1e-5)
    check_close(nd.array(x).softmax(), np_softmax(x, -1), rtol=1e-5)
    z = x - x.max(axis=-1, keepdims=True)
    check_close(nd.array(x).log_softmax(), z - np.log(np.exp(z).sum(axis=-1, keepdims=True)),
                rtol=1e-5, atol=1e-4)
    with pytest.raises(ShapeError, match="softmax"):
        nd.softmax(nd.array(x), axis=2)


def np_topk_indices(x, axis, k, ascend):
    order = np.argsort(x if ascend else -x, axis=axis, kind="stable")
    return np.take(order, np.arange(k), axis=axis)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("is_ascend", [False, True])
def test_topk(axis, is_ascend):
    x = rand(3, 4, seed=11)
    k = 2
    idx = np_topk_indices(x, axis, k, is_ascend)
    vals = np.take_along_axis(x, idx, axis=axis)
    a = nd.array(x)
    got = nd.topk(a, axis=axis, k=k, is_ascend=is_ascend)
    assert got.dtype == np.float32
    check_close(got, idx)
    check_close(nd.topk(a, axis=axis, k=k, ret_typ="value", is_ascend=is_ascend), vals)
    v, i = nd.topk(a, axis=axis, k=k, ret_typ="both", is_ascend=is_ascend)
    check_close(v, vals)
    check_close(i, idx)
    mask = np.zeros_like(x)
    np.put_along_axis(mask, idx, 1, axis=axis)
    check_close(nd.topk(a, axis=axis, k=k, ret_typ="mask", is_ascend=is_ascend), mask)
    as_int = a.topk(axis=axis, k=k, dtype="int32", is_ascend=is_ascend)
    assert as_int.dtype == np.int32
    check_close(as_int, idx)
    check_grad(lambda t: nd.topk(t, axis=axis, k=k, ret_typ="value", is_ascend=is_ascend), x)
    check_grad(lambda t: nd.topk(t, axis=axis, k=k, ret_typ="both", is_ascend=is_ascend)[0], x)


def test_topk_flattened_and_whole_axis():
    x = rand(3, 4, seed=12)
    flat = x.reshape(-1)
    check_close(nd.topk(nd.array(x), axis=None, k=3), np.argsort(-flat, kind="stable")[:3])
    check_close(nd.topk(nd.array(x), axis=None, k=3, ret_typ="value"),
                np.sort(flat)[::-1][:3])
    check_close(nd.topk(nd.array(x), k=0, ret_typ="value"), -np.sort(-x, axis=-1))
    with pytest.raises(ShapeError, match="topk"):
        nd.topk(nd.array(x), k=5)
    with pytest.raises(ShapeError, match="topk"):
        nd.topk(nd.array(x), ret_typ="values")


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
@pytest.mark.parametrize("is_ascend", [True, False])
def test_sort_argsort_topk_any_dtype(dtype, is_ascend):
    x = np.array([[3, 0, 7, 1], [0, 9, 2, 200]], dtype=dtype)
    want_idx = np.argsort(x if is_ascend else -x.astype(np.int64), axis=-1, kind="stable")
    want = np.take_along_axis(x, want_idx, axis=-1)
    a = nd.array(x, dtype=dtype)
    check_close(nd.sort(a, is_ascend=is_ascend), want)
    assert nd.sort(a).dtype == np.dtype(dtype).type
    check_close(nd.argsort(a, is_ascend=is_ascend), want_idx)
    assert nd.argsort(a).dtype == np.float32
    check_close(nd.topk(a, k=2, ret_typ="value", is_ascend=is_ascend), want[:, :2])


def test_sort_axes_and_gradient():
    x = rand(3, 4, 2, seed=13)
    for axis in (0, 1, -1):
        check_close(nd.sort(nd.array(x), axis=axis), np.sort(x, axis=axis))
        check_close(nd.array(x).sort(axis=axis, is_ascend=False),
                    -np.sort(-x, axis=axis))
        check_close(nd.argsort(nd.array(x), axis=axis), np.argsort(x, axis=axis))
        check_grad(lambda a: nd.sort(a, axis=axis), x)
        check_grad(lambda a: nd.sort(a, axis=axis, is_ascend=False), x)
    check_close(nd.array(x).argsort(axis=0, dtype="int64"), np.argsort(x, axis=0))


def test_nanprod_skips_nans_and_its_gradient():
    x = rand(3, 4)
    x[1, 2] = np.nan
    check_close(nd.nanprod(nd.array(x), axis=1), np.nanprod(x, axis=1))
    check_close(nd.array(x).nanprod(axis=(0, 1), keepdims=True),
                np.nanprod(x, axis=(0, 1), keepdims=True))
    check_grad(lambda a: nd.nanprod(a, axis=0), rand(3, 4))
    a = nd.array(x, dtype="float64")
    a.attach_grad()
    with autograd.record():
        nd.nanprod(a, axis=1).backward()
    assert a.grad.asnumpy()[1, 2] == 0 and np.isfinite(a.grad.asnumpy()).all()


def test_softmin_is_softmax_of_the_negation():
    x = rand(2, 5)
    e = np.exp(-x - (-x).max(axis=1, keepdims=True))
    check_close(nd.softmin(nd.array(x)), e / e.sum(axis=1, keepdims=True))
    check_close(nd.array(x).softmin(axis=0, temperature=2.0),
                nd.softmax(nd.array(-x / 2.0), axis=0).asnumpy())
    check_grad(lambda a: nd.softmin(a, axis=1, temperature=0.5), rand(2, 5))
    with pytest.raises(ShapeError):
        nd.softmin(nd.ones((2, 3)), axis=2)


def test_argmax_channel_is_the_last_axis_argmax_as_float32():
    x = rand(3, 5)
    got = nd.argmax_channel(nd.array(x))
    assert got.dtype == np.float32
    check_close(got, np.argmax(x, axis=-1).astype(np.float32))
    with pytest.raises(ShapeError, match="argmax_channel"):
        nd.argmax_channel(nd.zeros((3, 0)))
