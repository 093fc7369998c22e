"""gluon.rnn's wrapper and sequence cells (BidirectionalCell, ResidualCell, ZoneoutCell,
DropoutCell), unroll with valid_length and on Symbols, and the fused layers' _unfuse /
projection_size: against NumPy recurrences in float64, finite differences, and errors."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import MXNetError
from minigluon.gluon import rnn

from test_rnn import np_step

RNG = np.random.default_rng(7)


def weights(cell):
    return [getattr(cell, n).data().asnumpy() for n in
            ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")]


def np_unroll(kind, cell, steps, hidden):
    """Outputs (list) and final states of a reference recurrence over `steps` (N, C)."""
    w = weights(cell)
    state = [np.zeros((steps[0].shape[0], hidden)) for _ in cell.state_info()]
    outs = []
    for x in steps:
        state = np_step(kind, x, state, w, hidden)
        outs.append(state[0])
    return outs, state


def ready(cell, width=4):
    cell.cast("float64")
    cell.initialize(mx.init.Uniform(0.5))
    cell.unroll(1, nd.zeros((1, 1, width), dtype="float64"))   # finish deferred shapes
    return cell


def seq(n=2, t=5, c=4):
    return RNG.standard_normal((n, t, c))


def test_bidirectional_cell_reads_both_ways():
    cell = ready(rnn.BidirectionalCell(rnn.LSTMCell(3), rnn.GRUCell(2)))
    x = seq()
    out, states = cell.unroll(5, nd.array(x, dtype="float64"), merge_outputs=True)
    steps = [x[:, t] for t in range(5)]
    l_out, l_state = np_unroll("lstm", cell._children["l_cell"], steps, 3)
    r_out, r_state = np_unroll("gru", cell._children["r_cell"], steps[::-1], 2)
    want = np.concatenate([np.stack(l_out, 1), np.stack(r_out[::-1], 1)], axis=2)
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-12)
    for got, ref in zip(states, l_state + r_state):
        np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-12)
    listed, _ = cell.unroll(5, nd.array(x, dtype="float64"), merge_outputs=False)
    np.testing.assert_allclose(listed[1].asnumpy(), want[:, 1], rtol=1e-12)
    assert [i["shape"] for i in cell.state_info(2)] == [(2, 3), (2, 3), (2, 2)]
    with pytest.raises(MXNetError, match="cannot be stepped; call unroll"):
        cell(nd.ones((2, 4)), cell.begin_state(2))


def test_unroll_with_valid_length_equals_each_sequence_alone():
    x = seq(3, 6, 4)
    lengths = [2, 6, 4]
    for cell in (rnn.LSTMCell(3), rnn.BidirectionalCell(rnn.GRUCell(3), rnn.GRUCell(3)),
                 rnn.ResidualCell(rnn.RNNCell(4))):
        ready(cell)
        out, states = cell.unroll(6, nd.array(x, dtype="float64"), merge_outputs=True,
                                  valid_length=nd.array(lengths, dtype="float64"))
        for n, k in enumerate(lengths):
            alone, alone_states = cell.unroll(k, nd.array(x[n:n + 1, :k], dtype="float64"),
                                              merge_outputs=True)
            np.testing.assert_allclose(out.asnumpy()[n:n + 1, :k], alone.asnumpy(), rtol=1e-10)
            assert not out.asnumpy()[n, k:].any()                # padding is zero
            for got, want in zip(states, alone_states):
                np.testing.assert_allclose(got.asnumpy()[n:n + 1], want.asnumpy(), rtol=1e-10)


def test_valid_length_unroll_gradient_matches_finite_differences():
    cell = ready(rnn.BidirectionalCell(rnn.GRUCell(2), rnn.GRUCell(2)), width=3)
    lengths = nd.array([1, 3], dtype="float64")
    x = RNG.standard_normal((2, 3, 3))
    heads = [RNG.standard_normal(s) for s in ((2, 3, 4), (2, 2), (2, 2))]

    def objective(a):
        out, states = cell.unroll(3, a, merge_outputs=True, valid_length=lengths)
        return sum((o * nd.array(h, dtype="float64")).sum() for o, h in
                   zip([out] + states, heads))
    var = nd.array(x, dtype="float64")
    var.attach_grad()
    with autograd.record():
        total = objective(var)
    total.backward()
    numeric = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        moved = [x.copy(), x.copy()]
        moved[0][idx] += 1e-6
        moved[1][idx] -= 1e-6
        up, down = (objective(nd.array(m, dtype="float64")).asscalar() for m in moved)
        numeric[idx] = (up - down) / 2e-6
    np.testing.assert_allclose(var.grad.asnumpy(), numeric, rtol=1e-5, atol=1e-7)


def test_residual_cell_adds_the_input():
    base = rnn.GRUCell(4)
    cell = ready(rnn.ResidualCell(base))
    x = seq()
    out, _ = cell.unroll(5, nd.array(x, dtype="float64"), merge_outputs=True)
    ref, _ = np_unroll("gru", base, [x[:, t] for t in range(5)], 4)
    np.testing.assert_allclose(out.asnumpy(), np.stack(ref, 1) + x, rtol=1e-12)
    stepped, _ = cell(nd.array(x[:, 0], dtype="float64"), cell.begin_state(2, dtype="float64"))
    np.testing.assert_allclose(stepped.asnumpy(), ref[0] + x[:, 0], rtol=1e-12)
    assert list(cell.collect_params()) == list(base.collect_params())
    with pytest.raises(MXNetError, match="wrapped by a modifier cell"):
        base.begin_state(2)
    with pytest.raises(MXNetError, match="already wrapped"):
        rnn.ZoneoutCell(base)


def test_zoneout_cell_keeps_old_or_takes_new_values():
    base = rnn.RNNCell(3)
    cell = ready(rnn.ZoneoutCell(base, zoneout_outputs=0.5, zoneout_states=0.5))
    x = seq(8, 4, 4)
    plain, _ = np_unroll("tanh", base, [x[:, t] for t in range(4)], 3)
    out, _ = cell.unroll(4, nd.array(x, dtype="float64"), merge_outputs=True)
    np.testing.assert_allclose(out.asnumpy(), np.stack(plain, 1), rtol=1e-12)   # inference
    mx.random.seed(3)
    with autograd.train_mode():
        out, _ = cell.unroll(4, nd.array(x, dtype="float64"), merge_outputs=True)
    out = out.asnumpy()
    first = out[:, 0]
    assert np.all((first == 0) | np.isclose(first, plain[0]))
    assert (first == 0).any() and (first != 0).any()
    with pytest.raises(MXNetError, match="cannot step"):
        rnn.ZoneoutCell(rnn.BidirectionalCell(rnn.RNNCell(2), rnn.RNNCell(2)))
    with pytest.raises(MXNetError, match=r"zoneout_states must be in \[0, 1\), got 1.5"):
        rnn.ZoneoutCell(rnn.RNNCell(2), zoneout_states=1.5)


def test_dropout_cell_drops_only_in_training():
    cell = rnn.DropoutCell(0.5)
    x = nd.array(seq(), dtype="float64")
    out, states = cell.unroll(5, x, merge_outputs=True)
    np.testing.assert_array_equal(out.asnumpy(), x.asnumpy())
    assert states == []
    with autograd.train_mode():
        out, _ = cell.unroll(5, x, merge_outputs=True)
        steps, _ = cell.unroll(5, x, merge_outputs=False)
    got, want = out.asnumpy(), x.asnumpy()
    assert np.all((got == 0) | np.isclose(got, 2 * want))
    assert len(steps) == 5 and steps[0].shape == (2, 4)
    with pytest.raises(MXNetError, match=r"rate must be a number in \[0, 1\), got 'a'"):
        rnn.DropoutCell("a")


def test_unroll_on_symbols_names_the_steps_and_evaluates_like_arrays():
    cell = ready(rnn.LSTMCell(3, prefix="lstm_"))
    steps = [mx.sym.var(f"x{t}") for t in range(3)]
    outs, states = cell.unroll(3, steps)
    group = mx.sym.Group(outs)
    assert group.list_outputs() == ["lstm_t0_out_output", "lstm_t1_out_output",
                                    "lstm_t2_out_output"]
    x = seq(2, 3, 4)
    feed = {f"x{t}": nd.array(x[:, t], dtype="float64") for t in range(3)}
    feed.update({p.name: p.data() for p in cell.collect_params().values()})
    got = group.eval(**feed)
    want, _ = cell.unroll(3, nd.array(x, dtype="float64"))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-12)
    bi = rnn.BidirectionalCell(rnn.RNNCell(2, prefix="l_"), rnn.RNNCell(2, prefix="r_"),
                               output_prefix="bi_")
    outs, _ = bi.unroll(3, mx.sym.var("data"), layout="NTC", merge_outputs=False)
    assert mx.sym.Group(outs).list_outputs() == ["bi_t0_output", "bi_t1_output",
                                                 "bi_t2_output"]


def test_a_hybridized_block_unrolls_a_stack_of_bidirectional_cells():
    class Net(mx.gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.cells = rnn.HybridSequentialRNNCell()
                self.cells.add(rnn.BidirectionalCell(rnn.LSTMCell(3), rnn.LSTMCell(3)))
                self.cells.add(rnn.GRUCell(2))

        def hybrid_forward(self, F, x):
            return self.cells.unroll(4, x, layout="NTC", merge_outputs=True)[0]

    net = Net()
    net.initialize()
    x = nd.array(seq(2, 4, 5))
    want = net(x)
    net.hybridize()
    net(x)
    np.testing.assert_allclose(net(x).asnumpy(), want.asnumpy(), rtol=1e-6)
    assert want.shape == (2, 4, 2)


@pytest.mark.parametrize("make", [lambda: rnn.LSTM(3, num_layers=2, bidirectional=True),
                                  lambda: rnn.GRU(3, num_layers=2, dropout=0.3),
                                  lambda: rnn.RNN(3, activation="tanh")])
def test_unfuse_gives_cells_that_share_the_layers_parameters(make):
    layer = make()
    cells = layer._unfuse()
    layer.initialize(mx.init.Uniform(0.5))
    x = nd.array(RNG.standard_normal((5, 2, 4)))                  # TNC
    want = layer(x)
    got, _ = cells.unroll(5, x, layout="TNC", merge_outputs=True)
    np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-6)
    assert set(cells.collect_params()) == set(layer.collect_params())


def test_lstm_projection_matches_a_numpy_lstmp():
    layer = rnn.LSTM(4, projection_size=2, layout="NTC", prefix="p_")
    layer.cast("float64")
    layer.initialize(mx.init.Uniform(0.5))
    x = seq(2, 3, 3)
    out, states = layer(nd.array(x, dtype="float64"), layer.begin_state(2, dtype="float64"))
    p = {k[len("p_l0_"):]: v.data().asnumpy() for k, v in layer.collect_params().items()}
    r, c = np.zeros((2, 2)), np.zeros((2, 4))
    outs = []
    for t in range(3):
        h, c = np_step("lstm", x[:, t], [r, c], [p["i2h_weight"], p["h2h_weight"],
                                                 p["i2h_bias"], p["h2h_bias"]], 4)
        r = h @ p["h2r_weight"].T
        outs.append(r)
    np.testing.assert_allclose(out.asnumpy(), np.stack(outs, 1), rtol=1e-12)
    assert [s.shape for s in states] == [(1, 2, 2), (1, 2, 4)]
    with pytest.raises(MXNetError, match="projection_size have no cell stack"):
        layer._unfuse()
    with pytest.raises(MXNetError, match="projection_size must be a positive int"):
        rnn.LSTM(4, projection_size=-1)
