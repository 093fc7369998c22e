"""A hybridized block's outputs, and with them the values its traced graph recorded for
the backward, are freed as soon as the caller drops them: no reference cycle keeps them
until a full garbage collection (a recurrent layer that allocates few Python objects per
step otherwise grew by a graph's worth of arrays per training step)."""
import gc
import weakref

import minigluon as mx
from minigluon import autograd, nd
from minigluon.gluon import nn, rnn


def _freed_without_gc(net, x):
    net(x)                                    # the first call traces
    gc.collect()
    gc.disable()
    try:
        with autograd.record():
            out = net(x)
        refs = [weakref.ref(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
        del out
        return all(r() is None for r in refs)
    finally:
        gc.enable()


def test_hybridized_dense_output_is_freed_without_gc():
    net = nn.HybridSequential()
    net.add(nn.Dense(3), nn.Dense(2))
    net.initialize()
    net.hybridize()
    assert _freed_without_gc(net, nd.ones((2, 4)))


def test_hybridized_lstm_outputs_are_freed_without_gc():
    layer = rnn.LSTM(3, num_layers=2, input_size=4)
    layer.initialize(mx.init.Xavier())
    layer.hybridize()
    assert _freed_without_gc(layer, nd.ones((5, 2, 4)))
