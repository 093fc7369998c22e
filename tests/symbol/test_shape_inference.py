"""Symbol.infer_shape: output shapes from the data shapes alone, FullyConnected weights and
biases sized from their data (flatten or not), shapes given on variables, and None when a
shape cannot be inferred."""
import pytest

import minigluon as mx
from minigluon import nd


def test_fully_connected_parameters_are_sized_from_the_data():
    x = mx.sym.var("x")
    h = mx.sym.FullyConnected(x, mx.sym.var("w1"), mx.sym.var("b1"), num_hidden=4)
    y = mx.sym.FullyConnected(mx.sym.tanh(h), mx.sym.var("w2"), num_hidden=2, no_bias=True,
                              flatten=False)
    args, outs, aux = y.infer_shape(x=(5, 3, 2))
    assert dict(zip(y.list_arguments(), args)) == {"x": (5, 3, 2), "w1": (4, 6), "b1": (4,),
                                                   "w2": (2, 4)}
    assert outs == [(5, 2)] and aux == []
    # the same shapes as running it
    feed = {n: nd.ones(s) for n, s in zip(y.list_arguments(), args)}
    assert y.eval(**feed)[0].shape == outs[0]


def test_shapes_on_variables_count_and_partial_ones_are_filled():
    x = mx.sym.var("x", shape=(2, 7))
    w = mx.sym.var("w", shape=(3, 0))                       # a deferred weight
    y = mx.sym.FullyConnected(x, w, mx.sym.var("b"), num_hidden=3)
    args, outs, _ = y.infer_shape()
    assert args == [(2, 7), (3, 7), (3,)] and outs == [(2, 3)]


def test_a_recurrent_cell_unrolled_on_symbols():
    cell = mx.gluon.rnn.GRUCell(6, prefix="g_")
    outs, _ = cell.unroll(2, [mx.sym.var("a"), mx.sym.var("b")])
    args, shapes, _ = mx.sym.Group(outs).infer_shape(a=(3, 5), b=(3, 5))
    assert shapes == [(3, 6), (3, 6)]
    assert dict(zip(mx.sym.Group(outs).list_arguments(), args))["g_i2h_weight"] == (18, 5)


def test_unknown_shapes_give_none_and_bad_shapes_name_the_node():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    assert mx.sym.dot(x, w).infer_shape(x=(2, 3)) == (None, None, None)
    y = mx.sym.dot(x, w, name="product")
    with pytest.raises(mx.MXNetError, match="infer_shape: product"):
        y.infer_shape(x=(2, 3), w=(4, 5))
