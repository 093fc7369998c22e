"""mx.np.ndarray's NumPy semantics next to mx.nd.NDArray's MXNet 1.x ones, conversions
between the two, autograd on mx.np arrays, the NumPy-mode switch, and error messages."""
import numpy as onp
import pytest

import minigluon as mx
from minigluon import autograd, nd, np, npx
from nphelpers import check_np


def test_comparisons_give_bool_in_np_and_float_in_nd():
    a = [1.0, 2.0, 3.0]
    assert (np.array(a) > 2).dtype == onp.bool_
    assert (nd.array(a) > 2).dtype == onp.float32
    assert float((np.array(a) == np.array([1.0, 0.0, 3.0])).sum()) == 2.0


def test_reductions_and_indexing_give_0d_in_np_and_1_in_nd():
    x, y = np.ones((2, 3)), nd.ones((2, 3))
    assert x.sum().shape == () and y.sum().shape == (1,)
    assert x[0, 1].shape == () and y[0, 1].shape == (1,)
    assert np.arange(3)[1].shape == ()


def test_attributes():
    x = np.arange(6, dtype="int32").reshape(2, 3)
    assert x.shape == (2, 3) and x.size == 6 and x.ndim == 2 and len(x) == 2
    assert x.dtype == onp.dtype("int32") and x.dtype == onp.int32 and x.dtype == "int32"
    assert isinstance(x.dtype, onp.dtype)
    assert x.ctx == mx.cpu() and x.device == mx.cpu() and x.context == mx.cpu()
    check_np(x.T, onp.arange(6, dtype="int32").reshape(2, 3).T)
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert isinstance(x, nd.NDArray) and isinstance(x, np.ndarray)


def test_scalars_out_of_0d_arrays():
    loss = np.array([1.5, 2.5]).sum()
    assert float(loss) == 4.0 and loss.item() == 4.0 and isinstance(loss.item(), float)
    assert int(np.array(7, dtype="int64")) == 7
    assert bool(np.array(0.0) == 0)
    assert f"{loss:.2f}" == "4.00"
    with pytest.raises(ValueError, match="size 1"):
        np.ones(3).item()


def test_repr_and_str_look_like_numpy():
    assert repr(np.array([1.0, 2.0])) == "array([1., 2.], dtype=float32)"
    assert repr(np.zeros(1, ctx=mx.cpu(1))).endswith("ctx=cpu(1))")
    assert str(np.array([[1, 2]], dtype="int32")) == "[[1 2]]"


def test_astype_copy_and_conversion_to_numpy():
    x = np.array([1.7, -2.2])
    check_np(x.astype("int32"), [1, -2], dtype="int32")
    check_np(x.astype(bool), [True, True])
    assert x.astype("float32", copy=False) is x
    c = x.copy()
    c[0] = 5
    assert float(x[0]) == pytest.approx(1.7)
    assert isinstance(x.asnumpy(), onp.ndarray) and onp.asarray(x).dtype == onp.float32


def test_as_nd_and_as_np_share_data():
    x = np.zeros(3)
    legacy = x.as_nd_ndarray()
    assert type(legacy) is nd.NDArray and legacy.as_nd_ndarray() is legacy
    legacy[0] = 4
    assert float(x[0]) == 4.0
    back = legacy.as_np_ndarray()
    assert isinstance(back, np.ndarray) and back.as_np_ndarray() is back
    assert (legacy > 1).dtype == onp.float32 and (back > 1).dtype == onp.bool_


def test_np_functions_accept_nd_arrays_lists_and_numpy():
    check_np(np.exp(nd.zeros(2)), [1.0, 1.0], dtype="float32")
    check_np(np.add([1, 2], onp.array([1.0, 1.0], "float32")), [2.0, 3.0], dtype="float32")
    check_np(np.sum([[1, 2], [3, 4]], axis=0), [4.0, 6.0], dtype="float32")


def test_nd_ops_and_methods_keep_the_np_class():
    x = np.array([[-1.0, 2.0]])
    for y in (nd.relu(x), x.relu(), x.softmax(), x.as_in_context(mx.cpu(1)), x.detach(),
              x.copy(), x.zeros_like(), x.expand_dims(0), nd.concat(x, x, dim=0)):
        assert isinstance(y, np.ndarray), type(y)


def test_autograd_on_np_arrays():
    x = np.array([[0.1, 0.2], [-0.3, 0.4]])
    x.attach_grad()
    assert isinstance(x.grad, np.ndarray)
    with autograd.record():
        y = np.tanh(x @ x).mean() + (x ** 2)[0, 1]
    y.backward()
    xs = x.asnumpy().astype(onp.float64)
    t = onp.tanh(xs @ xs)
    g = (1 - t * t) / 4
    want = g @ xs.T + xs.T @ g
    want[0, 1] += 2 * xs[0, 1]
    onp.testing.assert_allclose(x.grad.asnumpy(), want, rtol=1e-5, atol=1e-7)
    (gx,) = [autograd.grad(_record(x), [x])[0]]
    assert isinstance(gx, np.ndarray)


def _record(x):
    with autograd.record():
        return (x * 3).sum()


def test_variable_used_directly_and_through_a_view_gets_the_sum():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = np.sum(x * 2) + np.sum(x.as_np_ndarray() * 3)
    y.backward()
    check_np(x.grad.as_np_ndarray(), [5.0, 5.0], dtype="float32")


def test_np_mode_switch():
    assert not npx.is_np_array() and not npx.is_np_shape()
    npx.set_np()
    assert npx.is_np_array() and npx.is_np_shape() and np.is_np_array()
    npx.reset_np()
    assert not npx.is_np_array()
    npx.set_np(shape=True, array=False)
    assert npx.is_np_shape() and not npx.is_np_array()


def test_np_mode_rejects_unsupported_settings():
    with pytest.raises(ValueError, match="dtype='float64'"):
        npx.set_np(dtype=True)
    with pytest.raises(ValueError, match="shape=False, array=True"):
        npx.set_np(shape=False, array=True)


def test_missing_functions_say_what_to_use_instead():
    with pytest.raises(AttributeError, match=r"mx.np.fft is not implemented.*asnumpy\(\)"):
        np.fft
    with pytest.raises(AttributeError, match="mx.npx.foo is not implemented"):
        npx.foo


def test_mixing_devices_names_both():
    with pytest.raises(mx.base.ContextError, match=r"cpu\(0\) and cpu\(1\)"):
        np.zeros(2) + np.zeros(2, ctx=mx.cpu(1))


def test_bad_reshape_names_the_shapes():
    with pytest.raises(ValueError, match=r"shape \(2, 3\).*into shape \(4, -1\)"):
        np.ones((2, 3)).reshape(4, -1)


def test_dtype_names_and_constants():
    assert np.float32 is onp.float32 and np.int64 is onp.int64 and np.pi == onp.pi
    assert np.zeros(2, dtype=np.float16).dtype == onp.float16
    check_np(np.ones(3)[np.newaxis], onp.ones((1, 3), "float32"))


B = onp.arange(1, 13, dtype="float32").reshape(3, 4) / 4


@pytest.mark.parametrize("call", [
    lambda a: a.ravel(), lambda a: a.swapaxes(0, 1), lambda a: a[None].squeeze(0),
    lambda a: a.repeat(2, axis=1), lambda a: a.cumsum(axis=0), lambda a: a.prod(axis=1),
    lambda a: a.dot(a.T), lambda a: a.argmax(axis=0), lambda a: a.argmin(),
    lambda a: a.transpose(1, 0), lambda a: a.transpose((1, 0)), lambda a: a.transpose(),
    lambda a: a.var(axis=1, ddof=1), lambda a: a.std(), lambda a: a.max(axis=1),
])
def test_methods_match_numpy_methods(call):
    want = call(B)
    check_np(call(np.array(B)), want, rtol=1e-5)


@pytest.mark.parametrize("alias,name", [("true_divide", "divide"), ("remainder", "mod"),
                                        ("amax", "max"), ("amin", "min"),
                                        ("around", "round"), ("absolute", "abs")])
def test_aliases(alias, name):
    args = (np.array(B), np.array(B[0] + 1)) if name in ("divide", "mod") else (np.array(B),)
    check_np(getattr(np, alias)(*args), getattr(np, name)(*args).asnumpy())


def test_pickle_keeps_the_class_values_and_device():
    import pickle
    x = np.array([[1, 2]], dtype="int32", ctx=mx.cpu(1))
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, np.ndarray) and y.ctx == mx.cpu(1)
    check_np(y, [[1, 2]], dtype="int32")
