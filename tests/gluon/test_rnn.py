"""gluon.rnn: cells and layers against a NumPy recurrence (float64), gradients against
central finite differences, hybridized == imperative bit for bit, states in and out,
layouts, errors, and a small LSTM that learns."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon, nd
from minigluon.base import MXNetError, ShapeError
from minigluon.gluon import rnn


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def np_step(kind, x, state, w, hidden):
    """One step of the reference recurrence; w = (i2h_w, h2h_w, i2h_b, h2h_b)."""
    i2h = x @ w[0].T + w[2]
    h2h = state[0] @ w[1].T + w[3]
    if kind in ("relu", "tanh"):
        z = i2h + h2h
        h = np.maximum(z, 0) if kind == "relu" else np.tanh(z)
        return [h]
    if kind == "lstm":
        i, f, g, o = np.split(i2h + h2h, 4, axis=1)
        c = sigmoid(f) * state[1] + sigmoid(i) * np.tanh(g)
        return [sigmoid(o) * np.tanh(c), c]
    ri, zi, ni = np.split(i2h, 3, axis=1)
    rh, zh, nh = np.split(h2h, 3, axis=1)
    r, z = sigmoid(ri + rh), sigmoid(zi + zh)
    n = np.tanh(ni + r * nh)
    return [(1 - z) * n + z * state[0]]


def np_layer(kind, layer, x_tnc, states):
    """The reference for a whole (multi-layer, maybe bidirectional) layer, TNC in and out."""
    params = {k[len(layer.prefix):]: p.data().asnumpy()
              for k, p in layer.collect_params().items()}
    dirs = 2 if layer._dirs == 2 else 1
    seq = list(x_tnc)
    new_states = [[] for _ in states]
    k = 0
    for lay in range(layer._num_layers):
        outs = []
        for d in "lr"[:dirs]:
            w = [params[f"{d}{lay}_{n}"] for n in ("i2h_weight", "h2h_weight", "i2h_bias",
                                                   "h2h_bias")]
            state = [s[k] for s in states]
            order = seq if d == "l" else seq[::-1]
            out = []
            for x in order:
                state = np_step(kind, x, state, w, layer._hidden_size)
                out.append(state[0])
            outs.append(out if d == "l" else out[::-1])
            for kept, s in zip(new_states, state):
                kept.append(s)
            k += 1
        seq = outs[0] if dirs == 1 else [np.concatenate(p, axis=1) for p in zip(*outs)]
    return np.stack(seq), [np.stack(s) for s in new_states]


LAYERS = {"relu": lambda **kw: rnn.RNN(activation="relu", **kw),
          "tanh": lambda **kw: rnn.RNN(activation="tanh", **kw),
          "lstm": lambda **kw: rnn.LSTM(**kw), "gru": lambda **kw: rnn.GRU(**kw)}


def make_layer(kind, input_size=5, **kwargs):
    layer = LAYERS[kind](hidden_size=3, input_size=input_size, **kwargs)
    layer.cast("float64")
    layer.initialize(mx.init.Uniform(0.6))
    return layer


@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (2, True)])
@pytest.mark.parametrize("layout", ["TNC", "NTC"])
def test_layer_matches_the_recurrence(kind, num_layers, bidirectional, layout):
    layer = make_layer(kind, num_layers=num_layers, bidirectional=bidirectional,
                       layout=layout)
    rng = np.random.default_rng(0)
    x_tnc = rng.standard_normal((4, 2, 5))
    x = x_tnc if layout == "TNC" else x_tnc.transpose(1, 0, 2)
    begin = [rng.standard_normal(info["shape"]) * 0.5 for info in layer.state_info(2)]
    want, want_states = np_layer(kind, layer, x_tnc, begin)
    want = want if layout == "TNC" else want.transpose(1, 0, 2)

    out, states = layer(nd.array(x, dtype="float64"),
                        [nd.array(s, dtype="float64") for s in begin])
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-12, atol=1e-12)
    for got, ref in zip(states, want_states):
        np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-12, atol=1e-12)
    # without states: zeros, and only the output comes back
    zero_out = layer(nd.array(x, dtype="float64"))
    ref, _ = np_layer(kind, layer, x_tnc, [np.zeros(i["shape"]) for i in layer.state_info(2)])
    np.testing.assert_allclose(zero_out.asnumpy(),
                               ref if layout == "TNC" else ref.transpose(1, 0, 2),
                               rtol=1e-12, atol=1e-12)


def grads_of(block, x, states, head_seed=1):
    xs = nd.array(x, dtype="float64")
    xs.attach_grad()
    with autograd.record():
        out = block(xs, [nd.array(s, dtype="float64") for s in states])[0]
    head = np.random.default_rng(head_seed).standard_normal(out.shape)
    out.backward(nd.array(head, dtype="float64"))
    params = {k: p.grad().asnumpy() for k, p in block.collect_params().items()}
    return out.asnumpy(), xs.grad.asnumpy(), params, head


@pytest.mark.parametrize("kind", ["tanh", "lstm", "gru"])
def test_layer_gradients_match_finite_differences(kind):
    layer = make_layer(kind, input_size=2, num_layers=2, bidirectional=True)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 2, 2))
    states = [rng.standard_normal(i["shape"]) * 0.5 for i in layer.state_info(2)]
    _, dx, dparams, head = grads_of(layer, x, states)

    def objective(x_value):
        out = layer(nd.array(x_value, dtype="float64"),
                    [nd.array(s, dtype="float64") for s in states])[0]
        return float((out.asnumpy() * head).sum())

    eps = 1e-6
    numeric = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[idx] += eps
        down[idx] -= eps
        numeric[idx] = (objective(up) - objective(down)) / (2 * eps)
    np.testing.assert_allclose(dx, numeric, rtol=1e-6, atol=1e-9)
    for name in ("l0_i2h_weight", "r1_h2h_weight", "l1_h2h_bias"):
        param = layer.collect_params()[layer.prefix + name]
        base = param.data().asnumpy()
        numeric = np.zeros_like(base)
        for idx in np.ndindex(*base.shape):
            values = []
            for sign in (1, -1):
                moved = base.copy()
                moved[idx] += sign * eps
                param.set_data(nd.array(moved, dtype="float64"))
                values.append(objective(x))
            numeric[idx] = (values[0] - values[1]) / (2 * eps)
        param.set_data(nd.array(base, dtype="float64"))
        np.testing.assert_allclose(dparams[layer.prefix + name], numeric, rtol=1e-6,
                                   atol=1e-9, err_msg=name)


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_hybridized_layer_is_identical_and_retraces_per_length(kind):
    layer = make_layer(kind, num_layers=2, bidirectional=True)
    rng = np.random.default_rng(3)
    runs = []
    for hybrid in (False, True):
        if hybrid:
            layer.hybridize()
        for steps in (4, 2, 4):
            x = rng.standard_normal((steps, 2, 5)) if not hybrid else runs[len(runs) - 3][0]
            states = [np.full(i["shape"], 0.1) for i in layer.state_info(2)]
            runs.append((x,) + grads_of(layer, x, states))
    for plain, hybrid in zip(runs[:3], runs[3:]):
        np.testing.assert_array_equal(plain[1], hybrid[1])
        np.testing.assert_array_equal(plain[2], hybrid[2])
        for name in plain[3]:
            np.testing.assert_array_equal(plain[3][name], hybrid[3][name])
    assert len(layer._cached) == 2           # one graph per sequence length


CELLS = {"rnn": (lambda: rnn.RNNCell(3), "tanh"), "lstm": (lambda: rnn.LSTMCell(3), "lstm"),
         "gru": (lambda: rnn.GRUCell(3), "gru")}


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_unroll_matches_the_recurrence_and_hybridizes(name):
    make, kind = CELLS[name]
    cell = make()
    cell.cast("float64")
    cell.initialize(mx.init.Uniform(0.6))
    x = np.random.default_rng(4).standard_normal((2, 5, 4))            # NTC
    out, states = cell.unroll(5, nd.array(x, dtype="float64"), merge_outputs=True)
    w = [getattr(cell, n).data().asnumpy() for n in ("i2h_weight", "h2h_weight", "i2h_bias",
                                                      "h2h_bias")]
    ref_state = [np.zeros((2, 3)) for _ in cell.state_info(2)]
    ref = []
    for t in range(5):
        ref_state = np_step(kind, x[:, t], ref_state, w, 3)
        ref.append(ref_state[0])
    np.testing.assert_allclose(out.asnumpy(), np.stack(ref, axis=1), rtol=1e-12, atol=1e-12)
    for got, want in zip(states, ref_state):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-12, atol=1e-12)
    # merge_outputs=None gives a list of steps, as MXNet's cells do, for both input forms
    for inputs in ([nd.array(x[:, t], dtype="float64") for t in range(5)],
                   nd.array(x, dtype="float64")):
        listed, _ = cell.unroll(5, inputs)
        assert isinstance(listed, list) and len(listed) == 5
    cell.hybridize()
    cell.unroll(5, nd.array(x, dtype="float64"))
    again, _ = cell.unroll(5, nd.array(x, dtype="float64"), merge_outputs=True)
    np.testing.assert_array_equal(again.asnumpy(), out.asnumpy())
    assert repr(cell) == f"{type(cell).__name__}(4 -> 3)"


def test_stacked_cells_carry_each_cells_states():
    stack = rnn.HybridSequentialRNNCell()
    stack.add(rnn.LSTMCell(4), rnn.GRUCell(3))
    stack.initialize()
    assert [i["shape"] for i in stack.state_info(2)] == [(2, 4), (2, 4), (2, 3)]
    x = nd.array(np.random.default_rng(5).standard_normal((2, 6, 5)))
    out, states = stack.unroll(6, x, merge_outputs=True)
    assert out.shape == (2, 6, 3) and [s.shape for s in states] == [(2, 4), (2, 4), (2, 3)]
    # the same as running the two cells one after the other
    first, s1 = stack[0].unroll(6, x)
    second, s2 = stack[1].unroll(6, first, merge_outputs=True)
    np.testing.assert_array_equal(out.asnumpy(), second.asnumpy())
    stack.hybridize()
    stack.unroll(6, x)
    np.testing.assert_array_equal(stack.unroll(6, x, merge_outputs=True)[0].asnumpy(),
                                  out.asnumpy())


def test_bad_input_is_named():
    layer = rnn.LSTM(3, num_layers=2)
    layer.initialize()
    with pytest.raises(ShapeError, match=r"takes inputs of 3 axes \(TNC\), got shape \(4, 5\)"):
        layer(nd.ones((4, 5)))
    with pytest.raises(ShapeError, match=r"states of shapes \[\(1, 2, 3\), \(1, 2, 3\)\] do "
                                         r"not fit; expected \[\(2, 2, 3\), \(2, 2, 3\)\]"):
        layer(nd.ones((4, 2, 5)), [nd.zeros((1, 2, 3)), nd.zeros((1, 2, 3))])
    with pytest.raises(MXNetError, match="layout must be 'TNC' or 'NTC'"):
        rnn.GRU(3, layout="NCT")
    with pytest.raises(MXNetError, match="activation must be 'relu' or 'tanh'"):
        rnn.RNN(3, activation="sigmoid")
    cell = rnn.GRUCell(3)
    cell.initialize()
    with pytest.raises(ShapeError, match=r"states of shapes \[\(5, 3\)\] do not fit a batch "
                                         r"of 2"):
        cell(nd.ones((2, 4)), [nd.zeros((5, 3))])
    with pytest.raises(ShapeError, match="have 4 steps on axis 1 .* but length=3"):
        cell.unroll(3, nd.ones((2, 4, 4)))


def test_an_lstm_learns_to_tell_where_the_marker_is():
    """Each sequence holds one 1 among zeros, in its first or second half; an LSTM reading
    it must carry that through the rest of the sequence."""
    mx.random.seed(0)
    rng = np.random.default_rng(0)
    T, N = 8, 64
    where = rng.integers(0, T, N)
    x = np.zeros((T, N, 1), np.float32)
    x[where, np.arange(N), 0] = 1
    y = (where < T // 2).astype(np.float32)

    class Net(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.lstm = rnn.LSTM(8)
                self.out = gluon.nn.Dense(2, flatten=False)

        def hybrid_forward(self, F, seq):
            last = F.slice_axis(self.lstm(seq), axis=0, begin=-1, end=None)
            return self.out(F.squeeze(last, axis=0))

    net = Net()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.05})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    data, label = nd.array(x), nd.array(y)
    for _ in range(60):
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(N)
    accuracy = (net(data).argmax(axis=1).asnumpy() == y).mean()
    assert accuracy >= 0.95, f"accuracy {accuracy:.3f} after 60 steps"


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_hybridized_layer_without_states_replays_and_drops_only_in_training(kind):
    layer = make_layer(kind, num_layers=2, dropout=0.5)
    x = nd.array(np.random.default_rng(6).standard_normal((4, 2, 5)), dtype="float64")
    plain = layer(x).asnumpy()
    layer.hybridize()
    for _ in range(3):                      # trace, then replays
        np.testing.assert_array_equal(layer(x).asnumpy(), plain)
    mx.random.seed(1)
    with autograd.record():
        trained = layer(x).asnumpy()
    assert not np.array_equal(trained, plain)          # dropout between the layers
