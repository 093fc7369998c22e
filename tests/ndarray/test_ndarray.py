"""NDArray itself: attributes, conversions, devices, indexing and assignment (with their
gradients), in-place operators, and the errors users see for bad operands."""
import pickle

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import ContextError, DTypeError, MXNetError, ShapeError

from gradcheck import check_close, check_grad, rand


def test_attributes_and_conversions():
    x = nd.array([[1, 2, 3], [4, 5, 6]])
    assert x.shape == (2, 3) and x.size == 6 and x.ndim == 2 and len(x) == 2
    assert x.dtype == np.float32 and x.context == mx.cpu(0) and x.ctx == mx.cpu(0)
    assert x.stype == "default"
    assert x.asnumpy().dtype == np.float32
    assert x.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert np.asarray(x).shape == (2, 3)
    assert nd.array([7]).asscalar() == 7 and isinstance(nd.array([7]).item(), float)
    assert float(nd.array([2.5])) == 2.5 and int(nd.array([3.0])) == 3
    with pytest.raises(ShapeError, match="asscalar"):
        x.asscalar()
    assert bool(nd.array([1])) and not bool(nd.array([0])) and not bool(nd.zeros((0,)))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(x)
    assert [r.shape for r in x] == [(3,), (3,)]
    assert "NDArray 2x3 @cpu(0)" in repr(x)
    assert x.asnumpy() is not x._data and x.asnumpy().base is None
    a = x.asnumpy()
    a[0, 0] = 100
    assert x.asnumpy()[0, 0] == 1


def test_array_dtype_rules():
    assert nd.array([1, 2]).dtype == np.float32
    assert nd.array(np.array([1, 2], dtype=np.int64)).dtype == np.float32
    assert nd.array([1, 2], dtype="int32").dtype == np.int32
    assert nd.array(nd.array([1, 2], dtype="float16")).dtype == np.float16
    with pytest.raises(DTypeError, match="dtype"):
        nd.array([1], dtype="floaty")


def test_copy_copyto_and_pickle():
    x = nd.array(rand(2, 3))
    y = x.copy()
    y[0, 0] = 42
    assert x[0, 0].asscalar() != 42
    z = nd.zeros((2, 3))
    buf = z._data
    assert x.copyto(z) is z and z._data is buf
    check_close(z, x.asnumpy())
    with pytest.raises(ShapeError, match="copyto"):
        x.copyto(nd.zeros((3, 2)))
    w = x.copyto(mx.cpu(1))
    assert w.context == mx.cpu(1)
    check_close(w, x.asnumpy())
    assert x.as_in_context(mx.cpu(0)) is x
    assert x.as_in_context(mx.cpu(1)).context == mx.cpu(1)
    back = pickle.loads(pickle.dumps(w))
    assert back.context == mx.cpu(1) and back.dtype == np.float32
    check_close(back, x.asnumpy())


def test_context_scope_and_ctx_argument():
    with mx.cpu(1):
        a = nd.ones((2,))
        assert a.context == mx.cpu(1)
        assert (a + 1).context == mx.cpu(1)
    assert nd.ones((2,)).context == mx.cpu(0)
    assert nd.zeros((2,), ctx=mx.cpu(1)).context == mx.cpu(1)


def test_ops_on_different_devices_raise():
    a, b = nd.ones((2, 3), ctx=mx.cpu(0)), nd.ones((2, 3), ctx=mx.cpu(1))
    for fn, name in [(lambda: a + b, "add"), (lambda: nd.dot(a, b.T), "dot"),
                     (lambda: nd.concat(a, b, dim=0), "concat"),
                     (lambda: nd.where(a, a, b), "where")]:
        with pytest.raises(ContextError) as err:
            fn()
        msg = str(err.value)
        assert name in msg and "cpu(0)" in msg and "cpu(1)" in msg
    check_close(a + b.as_in_context(mx.cpu(0)), np.full((2, 3), 2.0))


def test_error_classes_are_mxnet_errors():
    cases = [
        (lambda: nd.dot(nd.ones((2, 3)), nd.ones((4, 5))), ShapeError, ["dot", "(2, 3)", "(4, 5)"]),
        (lambda: nd.ones((2, 3)).reshape((4, 2)), ShapeError, ["reshape", "(2, 3)", "(4, 2)"]),
        (lambda: nd.ones((2, 3)) + nd.ones((3, 2)), ShapeError, ["add", "(2, 3)", "(3, 2)"]),
        (lambda: nd.ones((2,)) * nd.ones((2,), dtype="int32"), DTypeError,
         ["multiply", "float32", "int32"]),
        (lambda: nd.ones((2,), ctx=mx.cpu(0)) - nd.ones((2,), ctx=mx.cpu(1)), ContextError,
         ["subtract", "cpu(0)", "cpu(1)"]),
    ]
    for fn, cls, words in cases:
        with pytest.raises(cls) as err:
            fn()
        assert isinstance(err.value, MXNetError)
        for w in words:
            assert w in str(err.value), (w, str(err.value))


# ---- indexing -----------------------------------------------------------------------
KEYS = [1, -1, slice(1, 3), slice(None, None, -1), slice(3, 0, -2), (1, 2), (slice(None), 0),
        (Ellipsis, -1), (None, 1), (slice(0, 4, 2), slice(None), slice(None, None, -1)),
        (1, slice(None), 0), (-2, -1, -3)]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_basic_indexing_and_its_gradient(key):
    x = rand(4, 3, 5)
    want = x[key]
    # MXNet 1.x has no 0-d arrays: indexing every axis with an int gives shape (1,)
    check_close(nd.array(x)[key], want.reshape(1) if np.ndim(want) == 0 else want)
    check_grad(lambda a: a[key], x)


def test_int_index_of_1d_array_is_a_1_element_view():
    x = nd.array([1, 2, 3])
    y = x[1]
    assert y.shape == (1,)
    y[:] = 7
    check_close(x, [1, 7, 3])


def test_basic_slices_are_views():
    x = nd.zeros((4, 3))
    row = x[1]
    row[:] = 7
    part = x[2:4]
    part += 1
    check_close(x, [[0, 0, 0], [7, 7, 7], [1, 1, 1], [1, 1, 1]])


ADVANCED = [lambda: nd.array([0, 2, 2]), lambda: [3, 0, 0], lambda: nd.array([[1, 1], [0, 3]]),
            lambda: np.array([-1, 0]), lambda: (nd.array([0, 2]), nd.array([1, 1])),
            lambda: (slice(None), [2, 0, 2]), lambda: nd.array([1, 1], dtype="int32")]


@pytest.mark.parametrize("make_key", ADVANCED)
def test_index_arrays_and_repeated_index_gradient(make_key):
    x = rand(4, 3)
    key = make_key()
    np_key = tuple(k.asnumpy().astype(np.int64) if isinstance(k, nd.NDArray) else k
                   for k in key) if isinstance(key, tuple) else \
        (key.asnumpy().astype(np.int64) if isinstance(key, nd.NDArray) else np.asarray(key))
    check_close(nd.array(x)[key], x[np_key])
    check_grad(lambda a: a[key], x)


def test_repeated_index_gradient_adds_up():
    x = nd.array([1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = x[nd.array([0, 0, 2, 0])]
    y.backward(nd.array([1.0, 10.0, 100.0, 1000.0]))
    check_close(x.grad, [1011, 0, 100])
    with autograd.record():
        y = x[[1, 1]]
    y.backward()
    check_close(x.grad, [0, 2, 0])


def test_boolean_mask_indexing():
    x = rand(3, 4)
    mask = x > 0
    for key in (nd.array(mask, dtype="bool"), mask, mask.tolist()):
        check_close(nd.array(x)[key], x[mask])
    rows = np.array([True, False, True])
    check_close(nd.array(x)[nd.array(rows, dtype="bool")], x[rows])
    check_grad(lambda a: a[nd.array(mask, dtype="bool")], x)
    check_grad(lambda a: a[nd.array(rows, dtype="bool")], x)


def test_index_out_of_bounds():
    with pytest.raises(ShapeError, match="out of bounds"):
        nd.zeros((2, 3))[5]
    with pytest.raises(MXNetError):
        nd.zeros((2, 3))[nd.array([0, 7])]


# ---- assignment ---------------------------------------------------------------------
SETS = [(1, 5.0), (-1, [1.0, 2.0, 3.0]), (slice(1, 3), 0.5), (slice(None, None, -2), -1.0),
        ((0, 2), 9.0), ((slice(None), 1), [7.0, 8.0, 9.0, 10.0]), ((Ellipsis, 0), 3.0),
        ([0, 3], 4.0), ((slice(None), [2, 0]), 1.5)]


@pytest.mark.parametrize("key,value", SETS, ids=[repr(k) for k, _ in SETS])
def test_setitem_matches_numpy(key, value):
    x = rand(4, 3)
    want = x.astype(np.float32).copy()
    want[key] = value
    a = nd.array(x)
    buf = a._data
    a[key] = value
    check_close(a, want)
    assert a._data is buf
    b = nd.array(x)
    b[key] = nd.array(np.broadcast_to(np.asarray(value, dtype=np.float32), want[key].shape))
    check_close(b, want)


def test_setitem_with_arrays_masks_and_other_devices():
    x = nd.zeros((3, 4))
    x[nd.array([0, 2])] = nd.ones((2, 4))
    x[x.asnumpy() == 0] = 5
    check_close(x, [[1] * 4, [5] * 4, [1] * 4])
    y = nd.zeros((3,))
    y[nd.array([True, False, True], dtype="bool")] = nd.array([2.0, 3.0])
    y[1] = nd.array([4.0], ctx=mx.cpu(1))
    check_close(y, [2, 4, 3])
    z = nd.zeros((2, 2))
    z[:] = np.array([[1, 2], [3, 4]])
    z[0] = nd.array([9, 9], dtype="int32")     # assignment casts to the target's dtype
    assert z.dtype == np.float32
    check_close(z, [[9, 9], [3, 4]])
    with pytest.raises(ShapeError, match="__setitem__"):
        z[0] = nd.ones((3,))


# ---- in-place operators ---------------------------------------------------------------
@pytest.mark.parametrize("op,fn", [("+=", np.add), ("-=", np.subtract), ("*=", np.multiply),
                                   ("/=", np.divide), ("%=", np.mod)])
def test_inplace_operators_write_into_the_buffer(op, fn):
    x0, y0 = rand(2, 3, seed=1), rand(3, seed=2)
    x = nd.array(x0)
    alias, buf = x, x._data
    view = x[1]
    for other, rhs in [(nd.array(y0), y0.astype(np.float32)), (2.0, 2.0)]:
        before = x.asnumpy()
        exec(f"x {op} other")
        assert x is alias and x._data is buf
        check_close(x, fn(before.astype(np.float64), rhs), rtol=1e-5, atol=1e-6)
    check_close(view, x.asnumpy()[1])


def test_inplace_errors():
    x = nd.ones((3,))
    with pytest.raises(ShapeError, match="in place"):
        x += nd.ones((2, 3))
    with pytest.raises(DTypeError):
        x += nd.ones((3,), dtype="float64")


def test_inplace_on_a_recorded_array_is_recorded():
    w = nd.array([1.0, 2.0, 3.0])
    w.attach_grad()
    with autograd.record():
        y = w * 2
        y += w
        y *= w
    y.backward()
    check_close(y, [3, 12, 27])
    check_close(w.grad, [6, 12, 18])             # d(3 w^2)/dw


def test_inplace_on_a_variable_under_record():
    w = nd.array([1.0, 2.0])
    w.attach_grad()
    with autograd.record():
        w += 1          # w is now the output of a recorded add
        z = w * w
    z.backward()
    check_close(w, [2, 3])
    check_close(w.grad, [4, 6])                  # dz/dw_old = 2 (w_old + 1)


def test_inplace_with_a_variable_operand_under_record():
    w = nd.array([1.0, 2.0])
    w.attach_grad()
    acc = nd.zeros((2,))
    with autograd.record():
        acc += w * 3
        acc += w
    acc.backward()
    check_close(w.grad, [4, 4])


def test_out_argument_writes_into_the_given_array():
    a, b = nd.array([1.0, 2.0]), nd.array([3.0, 4.0])
    out = nd.zeros((2,))
    buf = out._data
    assert nd.add(a, b, out=out) is out and out._data is buf
    check_close(out, [4, 6])
    with pytest.raises(MXNetError, match="out"):
        nd.add(a, b, out=nd.zeros((3,)))
