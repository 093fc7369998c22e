"""mx.np creation functions and mx.np.random: values, MXNet's dtype defaults, devices."""
import numpy as onp
import pytest

import minigluon as mx
from minigluon import np, npx
from nphelpers import check_np


@pytest.mark.parametrize("source,dtype", [
    ([[1, 2], [3, 4]], "float32"),              # lists: float32, as in MXNet
    ([True, False], "float32"),
    (onp.arange(4, dtype="int64"), "int64"),    # arrays keep their dtype
    (onp.ones(3, dtype="float64"), "float64"),
    (onp.array(2.5, dtype="float32"), "float32"),
])
def test_array_dtype_rules(source, dtype):
    check_np(np.array(source), onp.asarray(source).astype(dtype), dtype=dtype)


def test_array_copies_and_converts_mx_arrays():
    src = onp.array([1.0, 2.0], dtype="float32")
    x = np.array(src)
    src[0] = 9
    check_np(x, [1.0, 2.0], dtype="float32")
    check_np(np.array(x, dtype="int32"), [1, 2], dtype="int32")
    check_np(np.array(mx.nd.ones((2,), dtype="float16")), onp.ones(2, "float16"))
    check_np(np.array([1, 2], dtype="int8"), onp.array([1, 2], "int8"))


@pytest.mark.parametrize("fn,want", [
    (lambda: np.zeros((2, 3)), onp.zeros((2, 3), "float32")),
    (lambda: np.zeros(4, dtype="int32"), onp.zeros(4, "int32")),
    (lambda: np.ones((2,)), onp.ones(2, "float32")),
    (lambda: np.full((2, 2), 7), onp.full((2, 2), 7, "float32")),
    (lambda: np.full(3, 1.5, dtype="float64"), onp.full(3, 1.5)),
    (lambda: np.empty((1, 2)), onp.zeros((1, 2), "float32")),
    (lambda: np.arange(5), onp.arange(5, dtype="float32")),
    (lambda: np.arange(1, 2, 0.25), onp.arange(1, 2, 0.25, dtype="float32")),
    (lambda: np.arange(2, 10, 3, dtype="int64"), onp.arange(2, 10, 3)),
    (lambda: np.linspace(0, 1, 5), onp.linspace(0, 1, 5, dtype="float32")),
    (lambda: np.linspace(0, 1, 4, endpoint=False), onp.linspace(0, 1, 4, False, dtype="float32")),
    (lambda: np.eye(3), onp.eye(3, dtype="float32")),
    (lambda: np.eye(2, 4, k=1), onp.eye(2, 4, k=1, dtype="float32")),
    (lambda: np.zeros_like(np.ones((2, 3), dtype="int32")), onp.zeros((2, 3), "int32")),
    (lambda: np.ones_like(np.zeros(2), dtype="float16"), onp.ones(2, "float16")),
    (lambda: np.zeros(()), onp.zeros((), "float32")),
])
def test_creation_matches_numpy(fn, want):
    check_np(fn(), want)


def test_linspace_retstep_and_bad_arguments():
    out, step = np.linspace(0, 2, 5, retstep=True)
    check_np(out, onp.linspace(0, 2, 5, dtype="float32"))
    assert step == 0.5
    with pytest.raises(ValueError, match="axis"):
        np.linspace(0, 1, 3, axis=1)
    with pytest.raises(ValueError, match="order='C'"):
        np.zeros(3, order="F")
    with pytest.raises(ValueError, match="step"):
        np.arange(0, 3, 0)


def test_ctx_and_device_arguments():
    x = np.zeros(2, ctx=mx.cpu(1))
    assert x.ctx == mx.cpu(1) and x.device == mx.cpu(1) and x.context == mx.cpu(1)
    assert np.ones(2, device=mx.cpu(1)).ctx == mx.cpu(1)
    assert np.array([1.0], ctx=mx.cpu(1)).ctx == mx.cpu(1)
    y = x.as_in_context(mx.cpu(0))
    assert isinstance(y, np.ndarray) and y.ctx == mx.cpu(0)
    assert x.as_in_ctx(mx.cpu(1)) is x and isinstance(x.to_device(mx.cpu(0)), np.ndarray)
    with pytest.raises(ValueError, match="only one"):
        np.zeros(2, ctx=mx.cpu(0), device=mx.cpu(1))


def test_random_uniform_and_normal():
    npx.seed(7)
    u = np.random.uniform(-1, 2, size=(200, 3))
    assert isinstance(u, np.ndarray) and u.shape == (200, 3) and u.dtype == onp.float32
    assert -1 <= float(u.min()) and float(u.max()) < 2
    n = np.random.normal(3.0, 0.5, size=(4000,))
    assert abs(float(n.mean()) - 3.0) < 0.05 and abs(float(n.std()) - 0.5) < 0.05
    assert np.random.uniform().shape == ()
    assert np.random.normal(size=3, dtype="float64").dtype == onp.float64


def test_random_with_array_parameters_draws_per_element():
    low = np.array([0.0, 10.0, 20.0])
    u = np.random.uniform(low, low + 1)
    assert u.shape == (3,)
    assert ((u >= low) & (u < low + 1)).asnumpy().all()
    with pytest.raises(ValueError, match="size=None"):
        np.random.uniform(low, low + 1, size=(2, 3))


def test_random_randint():
    r = np.random.randint(3, 7, size=(500,))
    assert r.dtype == onp.int64 and set(r.asnumpy().tolist()) == {3, 4, 5, 6}
    r = np.random.randint(4, size=(2, 50), dtype="int32")
    assert r.dtype == onp.int32 and r.shape == (2, 50)
    assert 0 <= int(r.min()) and int(r.max()) < 4


def test_seed_makes_draws_repeat():
    npx.seed(3)
    a = np.random.normal(size=(5,)).asnumpy()
    npx.seed(3)
    assert (np.random.normal(size=(5,)).asnumpy() == a).all()


def test_shuffle_permutes_rows_in_place():
    x = np.arange(20).reshape(10, 2)
    before = x
    assert np.random.shuffle(x) is None and x is before
    rows = sorted(map(tuple, x.asnumpy().tolist()))
    assert rows == [(2.0 * i, 2.0 * i + 1) for i in range(10)]
    with pytest.raises(TypeError, match="at least one axis"):
        np.random.shuffle(np.array(1.0))


def test_missing_random_function_points_to_alternatives():
    with pytest.raises(AttributeError, match=r"npx\.seed"):
        np.random.seed(0)
    with pytest.raises(AttributeError, match="mx.np.random.gamma"):
        np.random.gamma
