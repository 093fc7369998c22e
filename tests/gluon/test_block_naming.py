"""Blocks traced on Symbols name their operators under their prefix (mx.name.Prefix), as
MXNet's do; hybridize() takes MXNet's CachedOp flags, and inline_limit decides whether a
recorded call is one _CachedOp node or its operators."""
import json

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon, nd
from minigluon.base import MXNetError
from minigluon.gluon import nn, rnn


def test_a_layer_on_symbols_names_its_operators_under_its_prefix():
    dense = nn.Dense(4, activation="tanh", in_units=3, prefix="fc_")
    out = dense(mx.sym.var("data"))
    assert out.list_outputs() == ["fc_tanh_fwd_output"]
    assert out.list_arguments() == ["data", "fc_weight", "fc_bias"]
    net = nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(nn.Dense(4), nn.Dense(2))
    internals = net(mx.sym.var("data")).get_internals().list_outputs()
    assert [n for n in internals if n.endswith("_output")] == \
        ["net_dense0_fwd_output", "net_dense1_fwd_output"]


def test_name_scope_prefixes_symbols_made_inside_it_and_an_empty_prefix_keeps_the_outer():
    net = nn.HybridSequential(prefix="outer_")
    with net.name_scope():
        inner = nn.HybridSequential(prefix="")
        assert mx.sym.relu(mx.sym.var("x"), name="a").name == "outer_a"
        with inner.name_scope():
            assert mx.sym.relu(mx.sym.var("x"), name="b").name == "outer_b"
    assert mx.sym.relu(mx.sym.var("x"), name="c").name == "c"


def test_recurrent_cells_name_each_step_once_under_their_prefix():
    cell = rnn.GRUCell(3, prefix="gru_")
    outs, _ = cell.unroll(2, [mx.sym.var("x0"), mx.sym.var("x1")])
    internals = mx.sym.Group(outs).get_internals().list_outputs()
    assert mx.sym.Group(outs).list_outputs() == ["gru_t0_out_output", "gru_t1_out_output"]
    assert {"gru_t0_i2h_output", "gru_t0_h2h_output", "gru_t1_i2h_output"} <= set(internals)
    residual = rnn.ResidualCell(rnn.RNNCell(3, input_size=3, prefix="r_"))
    out, _ = residual(mx.sym.var("x"), residual.begin_state(func=mx.sym.zeros))
    assert out.name == "r_residualcellt0_fwd"      # ModifierCell: base prefix + alias


def _dense_net():
    net = nn.HybridSequential()
    with net.name_scope():
        for _ in range(3):
            net.add(nn.Dense(5))
    net.initialize()
    return net


def _recorded_nodes(net):
    x = nd.zeros((1, 5))
    x.attach_grad()
    with autograd.record():
        y = net(x)
    nodes = json.loads(autograd.get_symbol(y).tojson())["nodes"]
    y.backward()
    return [n["op"] for n in nodes if n["op"] != "null"]


def test_inline_limit_decides_whether_a_recorded_call_is_one_node():
    net = _dense_net()
    net.hybridize(inline_limit=3)
    assert _recorded_nodes(net) == ["FullyConnected"] * 3       # the first call too
    net.hybridize(inline_limit=0)
    assert _recorded_nodes(net) == ["_CachedOp"]
    net.hybridize(inline_limit=3, static_alloc=True)
    assert _recorded_nodes(net) == ["_CachedOp"]


def test_hybridized_and_imperative_calls_agree_from_the_first_call():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(4, activation="relu"), nn.BatchNorm(), nn.Dense(2))
    net.initialize()
    x = nd.array(np.random.default_rng(0).standard_normal((3, 6)))
    plain = net(x).asnumpy()
    stats = net[1].running_mean.data().asnumpy().copy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), plain, rtol=1e-6)
    np.testing.assert_array_equal(net[1].running_mean.data().asnumpy(), stats)


def test_deferred_shapes_are_learned_before_the_first_trace():
    net = _dense_net()
    net.hybridize(inline_limit=0)
    with autograd.record():
        y = net(nd.ones((2, 7)))
    assert y.shape == (2, 5) and net[0].weight.shape == (5, 7)


def test_hybridize_refuses_backends_and_bad_flags():
    net = _dense_net()
    with pytest.raises(MXNetError, match="no subgraph backends, so backend='MKLDNN'"):
        net.hybridize(backend="MKLDNN")
    with pytest.raises(MXNetError, match=r"backend options \['inline_limt'\]"):
        net.hybridize(inline_limt=2)
    with pytest.raises(MXNetError, match="static_shape=True needs static_alloc=True"):
        net.hybridize(static_shape=True)


def test_clear_false_keeps_a_traced_graph():
    net = _dense_net()
    net.hybridize()
    net(nd.ones((1, 5)))
    net.hybridize(inline_limit=0, clear=False)
    assert len(net._cached) == 1
    net.hybridize(inline_limit=0)
    assert len(net._cached) == 0


def test_an_exported_block_loads_back_as_a_symbol_block_with_hooks(tmp_path):
    net = _dense_net()
    net.hybridize()
    x = nd.ones((2, 5))
    want = net(x).asnumpy()
    sym_file, params_file = net.export(str(tmp_path / "net"))
    block = gluon.SymbolBlock.imports(sym_file, "data", params_file)
    seen = []
    block.register_op_hook(lambda name, op, arr: seen.append(name))
    np.testing.assert_allclose(block(x).asnumpy(), want, rtol=1e-6)
    assert len(seen) == 3 and all(name.endswith(b"_fwd_output") for name in seen)
    block.hybridize(inline_limit=0)             # new flags, the hook stays
    with autograd.record():
        y = block(x)
    assert len(seen) == 6
    assert [n["op"] for n in json.loads(autograd.get_symbol(y).tojson())["nodes"]
            if n["op"] != "null"] == ["_CachedOp"]
