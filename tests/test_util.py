"""mx.util's NumPy-mode scopes and decorators, and mx.base's MXNet helper names."""
import os

import pytest

import minigluon as mx
from minigluon import base, gluon, nd, util


@pytest.fixture(autouse=True)
def legacy_mode():
    util.reset_np()
    yield
    util.reset_np()


def test_np_shape_and_np_array_scopes_restore_the_mode():
    with util.np_shape(True):
        assert util.is_np_shape() and not util.is_np_array()
        with util.np_array(True):
            assert util.is_np_array() and util.is_np_shape()
        assert not util.is_np_array() and util.is_np_shape()
    assert not util.is_np_shape()


def test_scope_restores_after_an_error():
    with pytest.raises(KeyError):
        with util.np_array(True):
            raise KeyError("boom")
    assert not util.is_np_array() and not util.is_np_shape()


def test_use_np_on_a_function_and_on_a_block_class():
    @util.use_np
    def make():
        return nd.ones((2,)), util.is_np_array()

    assert make()[1] and not util.is_np_array()

    @util.use_np
    class Doubler(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.dense = gluon.nn.Dense(2, in_units=3)

        def hybrid_forward(self, F, x):
            return self.dense(x) * 2

    net = Doubler()
    net.initialize()
    out = net(mx.np.ones((1, 3)))
    assert isinstance(out, mx.np.ndarray) and out.shape == (1, 2)
    assert not util.is_np_array()


def test_set_np_shape_returns_the_previous_state():
    assert util.set_np_shape(True) is False
    assert util.is_np_shape()
    assert util.set_np_shape(False) is True
    assert not util.is_np_shape()


def test_decorating_something_not_callable_fails_clearly():
    with pytest.raises(TypeError, match="expected a function or a class"):
        util.use_np(3)


def test_getenv_setenv(monkeypatch):
    monkeypatch.delenv("MINIGLUON_UTIL_TEST", raising=False)
    assert util.getenv("MINIGLUON_UTIL_TEST") is None
    util.setenv("MINIGLUON_UTIL_TEST", 5)
    assert os.environ["MINIGLUON_UTIL_TEST"] == "5"
    util.setenv("MINIGLUON_UTIL_TEST", None)
    assert "MINIGLUON_UTIL_TEST" not in os.environ


def test_base_names_and_mxnet_error_is_a_runtime_error():
    assert base.py_str(b"caf\xc3\xa9") == "café" and base.py_str(3) == "3"
    assert isinstance(3, base.integer_types) and isinstance("a", base.string_types)
    assert issubclass(base.MXNetError, RuntimeError)
    assert issubclass(base.ShapeError, ValueError) and issubclass(base.ShapeError, RuntimeError)
    param = gluon.Parameter("w", shape=(2,))
    with pytest.raises(RuntimeError):       # d2l catches RuntimeError around data()
        param.data()
