"""Op hooks on cached graphs: the callback sees every operator's outputs (and inputs with
monitor_all) under MXNet's monitor names, as copies of the values the graph computes."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import MXNetError
from minigluon.gluon import nn


class Seen:
    def __init__(self):
        self.calls = []

    def __call__(self, name, op_name, array):
        self.calls.append((name, op_name, array))

    @property
    def names(self):
        return [name.decode() for name, _, _ in self.calls]


def _dense_relu():
    net = nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(nn.Dense(3), nn.Activation("relu"))
    net.initialize()
    net.hybridize()
    return net


@pytest.mark.parametrize("monitor_all, want", [
    (False, ["net_dense0_fwd_output", "net_relu0_fwd_output"]),
    (True, ["net_dense0_fwd_data", "net_dense0_fwd_weight", "net_dense0_fwd_bias",
            "net_dense0_fwd_output", "net_relu0_fwd_input0", "net_relu0_fwd_output"])])
def test_a_hybridized_block_reports_each_operator_from_its_first_call(monitor_all, want):
    net, seen = _dense_relu(), Seen()
    net.register_op_hook(seen, monitor_all)
    x = nd.array(np.arange(8.0).reshape(2, 4) - 4)
    out = net(x)
    assert seen.names == want
    assert [op for _, op, _ in seen.calls][-1] == b"Activation"
    dense = net[0]
    fc = nd.FullyConnected(x, dense.weight.data(), dense.bias.data(), num_hidden=3)
    arrays = dict(zip(seen.names, (a for _, _, a in seen.calls)))
    np.testing.assert_allclose(arrays["net_dense0_fwd_output"].asnumpy(), fc.asnumpy())
    np.testing.assert_allclose(arrays["net_relu0_fwd_output"].asnumpy(), out.asnumpy())
    arrays["net_relu0_fwd_output"][:] = 100      # a copy: the result is untouched
    assert out.asnumpy().max() < 100


def test_the_hook_fires_when_the_call_is_inlined_while_recording():
    net, seen = _dense_relu(), Seen()
    net(nd.ones((2, 4)))
    net.register_op_hook(seen)
    x = nd.ones((2, 4))
    x.attach_grad()
    with autograd.record():
        net(x).sum().backward()
    assert seen.names == ["net_dense0_fwd_output", "net_relu0_fwd_output"]


def test_a_watched_run_shows_the_graph_as_traced_not_as_rewritten():
    # a hybridized relu -> max-pool runs pool-then-relu (symbol/rewrite.py); the hook must
    # still see the relu's full-size output
    net = nn.HybridSequential(prefix="p_")
    with net.name_scope():
        net.add(nn.Activation("relu"), nn.MaxPool2D(2))
    net.hybridize()
    seen = Seen()
    net.register_op_hook(seen)
    x = nd.array(np.random.default_rng(0).standard_normal((1, 1, 4, 4)))
    out = net(x)
    assert seen.names == ["p_relu0_fwd_output", "p_pool0_fwd_output"]
    np.testing.assert_allclose(seen.calls[0][2].asnumpy(), np.maximum(x.asnumpy(), 0))
    np.testing.assert_allclose(seen.calls[1][2].asnumpy(), out.asnumpy())


def test_unnamed_operators_number_their_inputs_and_outputs():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    op = mx.nd.CachedOp(mx.sym.sum(mx.sym.add(x, y, name="s"), name="t"))
    seen = Seen()
    op.register_op_hook(seen, monitor_all=True)
    op(nd.ones(2), nd.ones(2))
    assert seen.names == ["s_lhs", "s_rhs", "s_0", "t_input0", "t_0"]
    op.register_op_hook(None)
    op(nd.ones(2), nd.ones(2))
    assert len(seen.calls) == 5


def test_a_callback_must_be_callable():
    net = _dense_relu()
    with pytest.raises(MXNetError, match="callback must be callable, got 'print'"):
        net.register_op_hook("print")
