"""Devices: cpu(i) identity, the `with` default, simulated GPUs and the no-CuPy error."""
import importlib.util

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import ContextError


def test_cpu_ids_are_distinct_devices():
    assert mx.cpu(0) != mx.cpu(1)
    assert mx.cpu(1) == mx.Context("cpu", 1)
    assert len({mx.cpu(0), mx.cpu(1), mx.cpu(0)}) == 2
    assert repr(mx.cpu(1)) == "cpu(1)"


def test_with_context_sets_the_default():
    assert mx.current_context() == mx.cpu(0)
    with mx.Context(mx.cpu(1)):
        assert mx.current_context() == mx.cpu(1)
        assert nd.zeros((2,)).context == mx.cpu(1)
    assert mx.current_context() == mx.cpu(0)


def test_bad_device_names_fail_clearly():
    with pytest.raises(ContextError, match="unknown device type 'tpu'"):
        mx.Context("tpu")
    with pytest.raises(ContextError, match="non-negative"):
        mx.cpu(-1)


def test_ops_across_devices_name_both(monkeypatch):
    a, b = nd.ones((2,), ctx=mx.cpu(0)), nd.ones((2,), ctx=mx.cpu(1))
    with pytest.raises(ContextError, match=r"add: .*cpu\(0\) and cpu\(1\)"):
        a + b


def test_simulated_gpus(monkeypatch):
    monkeypatch.setenv("MINIGLUON_SIMULATED_GPUS", "2")
    assert mx.num_gpus() == 2
    x = nd.array([1.0, 2.0], ctx=mx.gpu(1))
    assert x.context == mx.gpu(1)
    assert isinstance(x._data, np.ndarray)
    y = (x * 3).as_in_context(mx.gpu(0))
    assert y.context == mx.gpu(0)
    np.testing.assert_array_equal(y.asnumpy(), [3.0, 6.0])
    with pytest.raises(ContextError, match=r"gpu\(2\) does not exist"):
        nd.zeros((1,), ctx=mx.gpu(2))


def test_gradients_cross_simulated_gpus(monkeypatch):
    monkeypatch.setenv("MINIGLUON_SIMULATED_GPUS", "2")
    x = nd.array([1.0, 2.0, 3.0], ctx=mx.gpu(0))
    x.attach_grad()
    with autograd.record():
        y = (x.as_in_context(mx.gpu(1)) ** 2).sum()
    y.backward()
    assert x.grad.context == mx.gpu(0)
    np.testing.assert_allclose(x.grad.asnumpy(), [2.0, 4.0, 6.0])


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_gpu_without_cupy_says_how_to_install(monkeypatch):
    monkeypatch.delenv("MINIGLUON_SIMULATED_GPUS", raising=False)
    assert mx.num_gpus() == 0
    with pytest.raises(ContextError, match=r"needs CuPy.*pip install 'minigluon\[gpu\]'"):
        nd.zeros((2,), ctx=mx.gpu(0))


def test_bad_simulated_gpu_value(monkeypatch):
    monkeypatch.setenv("MINIGLUON_SIMULATED_GPUS", "two")
    with pytest.raises(mx.MXNetError, match="MINIGLUON_SIMULATED_GPUS must be an integer, got 'two'"):
        mx.num_gpus()


def test_default_ctx_class_attribute_reads_and_sets_the_current_device():
    with pytest.warns(DeprecationWarning):
        assert mx.Context.default_ctx == mx.cpu(0)
    with mx.cpu(3):
        with pytest.warns(DeprecationWarning):
            mx.Context.default_ctx = mx.cpu(4)
        assert mx.current_context() == mx.cpu(4)
    assert mx.current_context() == mx.cpu(0)
    with pytest.raises(ContextError, match="must be a Context, got 'gpu'"):
        with pytest.warns(DeprecationWarning):
            mx.Context.default_ctx = "gpu"
