"""autograd.get_symbol: the recorded operators rebuilt as a Symbol that computes the same
values (the forward pass itself is the oracle)."""
import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.base import AutogradError, MXNetError


def _marked(*values):
    arrays = [nd.array(v) for v in values]
    for a in arrays:
        a.attach_grad()
    return arrays


def test_arguments_are_the_marked_arrays_named_as_mxnet():
    x, z = _marked([1.0], [2.0])
    with autograd.record():
        y1 = x * x + 2 * x - 1
        y2 = x * x + 2 * z - 1
    assert autograd.get_symbol(y1).list_arguments() == ["var0"]
    assert autograd.get_symbol(y2).list_arguments() == ["var0", "var1"]


def test_symbol_computes_what_was_recorded():
    w, = _marked([[1.0, 2.0], [3.0, 4.0]])
    data = nd.relu(nd.array([[1.0, -1.0]]) * 2)     # not recorded: a constant of the graph
    with autograd.record():
        parts = nd.split(nd.FullyConnected(data, w, num_hidden=2, no_bias=True) +
                         nd.sum(w), num_outputs=2, axis=1)
        y = nd.tanh(parts[1]) / 3.0
    sym = autograd.get_symbol(y)
    assert sym.list_arguments() == ["null0", "var1"]
    got = sym.eval(null0=data, var1=w)[0]
    np.testing.assert_allclose(got.asnumpy(), y.asnumpy(), rtol=1e-6)


def test_unrecorded_array_is_refused():
    with pytest.raises(AutogradError, match="not computed inside autograd.record"):
        autograd.get_symbol(nd.ones((2,)))


def test_custom_function_has_no_call_to_rebuild():
    class Double(autograd.Function):
        def forward(self, x):
            return x * 2

        def backward(self, dy):
            return dy * 2

    x, = _marked([1.0, 2.0])
    with autograd.record():
        y = Double()(x) + 1
    with pytest.raises(MXNetError, match="Double .*custom Function"):
        autograd.get_symbol(y)
