"""gluon.rnn's layers run each direction of each layer as one `_rnn_sequence` operator;
here they are checked against the plain path, one step at a time with the unfused step
functions of the cells (a dozen operators per step), for outputs, returned states and
every gradient (inputs, states, weights), hybridized and not."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.gluon import rnn
from minigluon.gluon.rnn.rnn_cell import gru_step, lstm_step, rnn_step

HIDDEN = 3
KINDS = {"lstm": lambda **k: rnn.LSTM(HIDDEN, **k), "gru": lambda **k: rnn.GRU(HIDDEN, **k),
         "rnn_tanh": lambda **k: rnn.RNN(HIDDEN, activation="tanh", **k),
         "rnn_relu": lambda **k: rnn.RNN(HIDDEN, activation="relu", **k)}
# (num_layers, bidirectional, batch, steps, with states, layout)
SHAPES = [(1, False, 1, 1, False, "TNC"), (1, True, 3, 4, True, "NTC"),
          (2, True, 5, 3, True, "TNC"), (2, False, 7, 1, False, "NTC"),
          (2, False, 2, 6, True, "TNC")]


def plain_direction(kind, steps, w, h, c):
    """One direction, step by step with the cells' unfused step functions."""
    rows = w["h2h_weight"].shape[0]
    outs = []
    for x in steps:
        i2h = nd.FullyConnected(x, w["i2h_weight"], w["i2h_bias"], num_hidden=rows)
        h2h = nd.FullyConnected(h, w["h2h_weight"], w["h2h_bias"], num_hidden=rows)
        if kind == "lstm":
            h, c = lstm_step(nd, i2h, h2h, c, HIDDEN)
        elif kind == "gru":
            h = gru_step(nd, i2h, h2h, h, HIDDEN)
        else:
            h = rnn_step(nd, i2h, h2h, kind[4:])
        outs.append(h)
    return outs, h, c


def plain_layer(kind, layer, x, states, num_layers, dirs):
    """The layer's network over x (T, N, C), its states (L*D, N, H) each; (out, states)."""
    w = {k[len(layer.prefix):]: p.data() for k, p in layer.collect_params().items()}
    steps = [x[t] for t in range(x.shape[0])]
    finals = [[], []]
    for n in range(num_layers):
        outputs = []
        for d in range(dirs):
            k, pre = n * dirs + d, f"{'lr'[d]}{n}_"
            seq = steps if d == 0 else steps[::-1]
            c = states[1][k] if kind == "lstm" else None
            outs, h, c = plain_direction(kind, seq, {name[len(pre):]: v for name, v in w.items()
                                                     if name.startswith(pre)},
                                         states[0][k], c)
            outputs.append(outs if d == 0 else outs[::-1])
            finals[0].append(h)
            finals[1].append(c)
        steps = outputs[0] if dirs == 1 else [nd.concat(a, b, dim=1) for a, b in zip(*outputs)]
    kept = finals[:2 if kind == "lstm" else 1]
    return nd.stack(*steps, axis=0), [nd.stack(*s, axis=0) for s in kept]


def run(layer, fn, x, states, heads):
    """Outputs and gradients of sum(heads * outputs) w.r.t. x, states and the weights."""
    for p in layer.collect_params().values():
        p.zero_grad()
    x = x.copy()
    states = [s.copy() for s in states] if states is not None else None
    for a in [x] + (states or []):
        a.attach_grad()
    with autograd.record():
        got = fn(x, states)
        outs = [got[0]] + list(got[1]) if isinstance(got, tuple) else [got]
    autograd.backward(outs, heads[:len(outs)])
    grads = [a.grad.asnumpy() for a in [x] + (states or [])]
    grads += [p.grad().asnumpy() for _, p in sorted(layer.collect_params().items())]
    return [o.asnumpy() for o in outs], grads


@pytest.mark.parametrize("row_parts", ["1", "3"])     # batch rows in parts: rnn_row_parts.py
@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_fused_layer_equals_the_plain_per_step_path(kind, shape, hybridize, row_parts,
                                                    monkeypatch):
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", row_parts)
    num_layers, bidirectional, batch, steps, with_states, layout = shape
    dirs = 2 if bidirectional else 1
    layer = KINDS[kind](num_layers=num_layers, bidirectional=bidirectional, layout=layout,
                        input_size=4, dropout=0)
    layer.cast("float64")
    layer.initialize(mx.init.Uniform(0.6))
    rng = np.random.default_rng(sum(shape[:4]))
    tnc = rng.standard_normal((steps, batch, 4))
    if kind == "rnn_relu":
        tnc = np.abs(tnc) + 0.1          # keep pre-activations away from relu's kink
    x = nd.array(tnc if layout == "TNC" else tnc.transpose(1, 0, 2), dtype="float64")
    states = [s + nd.array(rng.uniform(-0.5, 0.5, s.shape), dtype="float64")
              for s in layer.begin_state(batch, dtype="float64")]
    heads = [nd.array(rng.standard_normal(s), dtype="float64")
             for s in [x.shape[:2] + (dirs * HIDDEN,)] + [s.shape for s in states]]
    if hybridize:
        layer.hybridize()

    def fused(x, s):
        return layer(x, s) if with_states else layer(x)

    def plain(x, s):
        zeros = [z * 0 for z in s]
        tnc_x = x if layout == "TNC" else nd.swapaxes(x, dim1=0, dim2=1)
        out, finals = plain_layer(kind, layer, tnc_x, s if with_states else zeros,
                                  num_layers, dirs)
        out = out if layout == "TNC" else nd.swapaxes(out, dim1=0, dim2=1)
        return (out, finals) if with_states else out

    want_outs, want_grads = run(layer, plain, x, states, heads)
    got_outs, got_grads = run(layer, fused, x, states, heads)
    assert len(got_outs) == len(want_outs) == (1 + len(states) if with_states else 1)
    for got, want in zip(got_outs + got_grads, want_outs + want_grads):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_fused_layer_float32_within_float_tolerance(kind):
    """float32 runs the C kernels with their own exp and tanh: equal within rounding."""
    layer = KINDS[kind](num_layers=2, bidirectional=True, input_size=8)
    layer.initialize(mx.init.Xavier())
    rng = np.random.default_rng(5)
    x = nd.array(rng.standard_normal((6, 4, 8)).astype(np.float32))
    states = layer.begin_state(4)
    heads = [nd.array(rng.standard_normal((6, 4, 2 * HIDDEN)).astype(np.float32))] + \
        [nd.array(rng.standard_normal(s.shape).astype(np.float32)) for s in states]

    def plain(x, s):
        return plain_layer(kind, layer, x, s, 2, 2)
    want_outs, want_grads = run(layer, plain, x, states, heads)
    got_outs, got_grads = run(layer, lambda x, s: layer(x, s), x, states, heads)
    for got, want in zip(got_outs + got_grads, want_outs + want_grads):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def test_layer_records_one_operator_per_layer_and_direction():
    """The point of the fused path: the tape holds a handful of nodes, not T of each."""
    layer = rnn.LSTM(HIDDEN, num_layers=2, bidirectional=True, input_size=4)
    layer.initialize()
    ops = []
    x = nd.ones((20, 2, 4))
    with autograd.record():
        out = layer(x)
    stack = [out._node]
    while stack:
        node = stack.pop()
        if node is None or any(node is seen for seen in ops):
            continue
        ops.append(node)
        stack.extend(getattr(a, "_node", None) for a in node.inputs if a is not None)
    names = [n.op_name for n in ops]
    assert names.count("_rnn_sequence") == 4, names
    assert len(names) < 20, names
