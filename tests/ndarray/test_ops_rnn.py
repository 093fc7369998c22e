"""nd.RNN, the fused recurrent operator: its outputs and states equal gluon.rnn's layers
given the same weights packed in MXNet's order (float64), its gradients equal finite
differences for every mode, and bad shapes are named."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import MXNetError, ShapeError
from minigluon.gluon import rnn
from minigluon.ndarray import rnn_kernels

from gradcheck import check_grad

LAYERS = {"lstm": lambda **k: rnn.LSTM(3, **k), "gru": lambda **k: rnn.GRU(3, **k),
          "rnn_tanh": lambda **k: rnn.RNN(3, activation="tanh", **k),
          "rnn_relu": lambda **k: rnn.RNN(3, activation="relu", **k)}


def packed(layer, num_layers, dirs):
    """The layer's parameters as one vector in MXNet's order: all weights, then biases."""
    p = {k[len(layer.prefix):]: v.data().asnumpy() for k, v in layer.collect_params().items()}
    keys = [(f"{d}{i}_", kind) for kind in ("weight", "bias") for i in range(num_layers)
            for d in "lr"[:dirs]]
    return np.concatenate([p[f"{pre}{g}_{kind}"].ravel() for pre, kind in keys
                           for g in ("i2h", "h2h")])


@pytest.mark.parametrize("mode", sorted(LAYERS))
@pytest.mark.parametrize("bidirectional", [False, True])
def test_rnn_op_matches_the_gluon_layer(mode, bidirectional):
    dirs = 2 if bidirectional else 1
    layer = LAYERS[mode](num_layers=2, bidirectional=bidirectional, input_size=4)
    layer.cast("float64")
    layer.initialize(mx.init.Uniform(0.5))
    x = nd.array(np.random.default_rng(1).standard_normal((5, 2, 4)), dtype="float64")
    states = [s + 0.1 for s in layer.begin_state(2, dtype="float64")]
    want, want_states = layer(x, states)
    extra = {"state_cell": states[1]} if mode == "lstm" else {}
    got = nd.RNN(x, nd.array(packed(layer, 2, dirs), dtype="float64"), states[0],
                 state_size=3, num_layers=2, bidirectional=bidirectional, mode=mode,
                 state_outputs=True, **extra)
    np.testing.assert_allclose(got[0].asnumpy(), want.asnumpy(), rtol=1e-12, atol=1e-12)
    for g, w in zip(got[1:], want_states):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", sorted(LAYERS))
def test_rnn_op_gradients_match_finite_differences(mode):
    rng = np.random.default_rng(2)
    gates = {"lstm": 4, "gru": 3}.get(mode, 1)
    size = 2 * (gates * 2 * 3 + gates * 2 * 2 + 2 * gates * 2)     # 2 directions, 1 layer
    x, params = rng.standard_normal((3, 2, 3)), rng.uniform(-0.6, 0.6, size)
    h0, c0 = rng.standard_normal((2, 2, 2)), rng.standard_normal((2, 2, 2))
    if mode == "rnn_relu":
        x = np.abs(x) + 0.2            # keep pre-activations away from relu's kink

    def run(x, params, h0, c0):
        extra = {"state_cell": c0} if mode == "lstm" else {}
        return list(nd.RNN(x, params, h0, state_size=2, bidirectional=True, mode=mode,
                           state_outputs=True, **extra))
    check_grad(run, x, params, h0, c0, rtol=1e-4, atol=1e-6)


def test_rnn_op_bad_inputs_are_named():
    x, h = nd.ones((3, 2, 4)), nd.zeros((1, 2, 5))
    with pytest.raises(ShapeError, match="parameters holds 7 values; gru .* needs 165"):
        nd.RNN(x, nd.ones(7), h, state_size=5, mode="gru")
    with pytest.raises(ShapeError, match=r"states must have shape \(2, 2, 5\)"):
        nd.RNN(x, nd.ones(180), h, state_size=5, mode="gru", num_layers=2)
    with pytest.raises(MXNetError, match="mode must be one of"):
        nd.RNN(x, nd.ones(180), h, state_size=5, mode="elman")


# ---------------------------------------------------------------- the fused LSTM cell update

def _unfused_lstm(i2h, h2h, c):
    """gluon.rnn's unfused step (a dozen operators), the path the fused op replaces."""
    from minigluon.gluon.rnn.rnn_cell import lstm_step
    h, c_next = lstm_step(nd, i2h, h2h, c, c.shape[1])
    return nd.stack(h, c_next, axis=0)


@pytest.mark.parametrize("host_kernels", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (32, 64)])
def test_fused_lstm_cell_matches_the_unfused_step(shape, host_kernels, monkeypatch):
    monkeypatch.setattr(rnn_kernels, "HOST_KERNELS", host_kernels)
    n, h = shape
    rng = np.random.default_rng(31)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((n, 4 * h), (n, 4 * h), (n, h))]
    head = nd.array(rng.standard_normal((2, n, h)).astype(np.float32))
    results = []
    for fn in (nd._rnn_lstm_cell, _unfused_lstm):
        xs = [nd.array(a) for a in arrays]
        for x in xs:
            x.attach_grad()
        with autograd.record():
            y = fn(*xs)
        y.backward(head)
        results.append([y.asnumpy()] + [x.grad.asnumpy() for x in xs])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("host_kernels", [True, False])
def test_fused_lstm_cell_gradients(host_kernels, monkeypatch):
    monkeypatch.setattr(rnn_kernels, "HOST_KERNELS", host_kernels)
    rng = np.random.default_rng(32)
    check_grad(nd._rnn_lstm_cell, rng.standard_normal((2, 12)), rng.standard_normal((2, 12)),
               rng.standard_normal((2, 3)))


def test_fused_lstm_cell_rejects_mismatched_shapes():
    with pytest.raises(ShapeError, match=r"must both be \(N, 4H\).*\(2, 3\)"):
        nd._rnn_lstm_cell(nd.zeros((2, 8)), nd.zeros((2, 12)), nd.zeros((2, 3)))


# ---------------------------------------------------------------- the fused GRU cell update

def _unfused_gru(i2h, h2h, h):
    """gluon.rnn's unfused step, the path the fused op replaces in GRUCell."""
    from minigluon.gluon.rnn.rnn_cell import gru_step
    return gru_step(nd, i2h, h2h, h, h.shape[1])


@pytest.mark.parametrize("host_kernels", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (32, 64)])
def test_fused_gru_cell_matches_the_unfused_step(shape, host_kernels, monkeypatch):
    monkeypatch.setattr(rnn_kernels, "HOST_KERNELS", host_kernels)
    n, h = shape
    rng = np.random.default_rng(33)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((n, 3 * h), (n, 3 * h), (n, h))]
    head = nd.array(rng.standard_normal((n, h)).astype(np.float32))
    results = []
    for fn in (nd._rnn_gru_cell, _unfused_gru):
        xs = [nd.array(a) for a in arrays]
        for x in xs:
            x.attach_grad()
        with autograd.record():
            y = fn(*xs)
        y.backward(head)
        results.append([y.asnumpy()] + [x.grad.asnumpy() for x in xs])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("host_kernels", [True, False])
def test_fused_gru_cell_gradients(host_kernels, monkeypatch):
    monkeypatch.setattr(rnn_kernels, "HOST_KERNELS", host_kernels)
    rng = np.random.default_rng(34)
    check_grad(nd._rnn_gru_cell, rng.standard_normal((2, 9)), rng.standard_normal((2, 9)),
               rng.standard_normal((2, 3)))


def test_fused_gru_cell_rejects_mismatched_shapes():
    with pytest.raises(ShapeError, match=r"must both be \(N, 3H\).*\(2, 3\)"):
        nd._rnn_gru_cell(nd.zeros((2, 8)), nd.zeros((2, 9)), nd.zeros((2, 3)))
