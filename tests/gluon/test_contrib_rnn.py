"""gluon.contrib.rnn: LSTMPCell against a NumPy LSTM with projection (float64, with a
finite-difference gradient), its match with the projected fused LSTM, and
VariationalDropoutCell's one-mask-per-sequence dropout."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon, nd
from minigluon.base import MXNetError
from minigluon.gluon import rnn
from minigluon.gluon.contrib.rnn import LSTMPCell, VariationalDropoutCell

from test_rnn import np_step

RNG = np.random.default_rng(11)


def np_lstmp(cell, x):
    p = {n: getattr(cell, n).data().asnumpy() for n in
         ("i2h_weight", "h2h_weight", "h2r_weight", "i2h_bias", "h2h_bias")}
    r, c = np.zeros((x.shape[0], 2)), np.zeros((x.shape[0], 5))
    outs = []
    for t in range(x.shape[1]):
        h, c = np_step("lstm", x[:, t], [r, c], [p["i2h_weight"], p["h2h_weight"],
                                                 p["i2h_bias"], p["h2h_bias"]], 5)
        r = h @ p["h2r_weight"].T
        outs.append(r)
    return np.stack(outs, 1), [r, c]


def float64_cell(cell, width=3):
    cell.cast("float64")
    cell.initialize(mx.init.Uniform(0.5))
    cell.unroll(1, nd.zeros((1, 1, width), dtype="float64"))
    return cell


def test_lstmp_cell_matches_numpy_and_finite_differences():
    cell = float64_cell(LSTMPCell(5, 2))
    x = RNG.standard_normal((2, 4, 3))
    out, states = cell.unroll(4, nd.array(x, dtype="float64"), merge_outputs=True)
    want, want_states = np_lstmp(cell, x)
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-12)
    for got, ref in zip(states, want_states):
        np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-12)
    assert [i["shape"] for i in cell.state_info(2)] == [(2, 2), (2, 5)]
    assert repr(cell) == "LSTMPCell(3 -> 5 -> 2)"

    heads = RNG.standard_normal((2, 2, 2))
    w = cell.h2r_weight.data()

    def forward():
        out, _ = cell.unroll(2, nd.array(x[:, :2], dtype="float64"), merge_outputs=True)
        return (out * nd.array(heads, dtype="float64")).sum()

    def loss(h2r):      # set_data outside record(): an in-place write to a weight that
        cell.h2r_weight.set_data(h2r)   # needs a gradient is an error while recording
        return forward()
    with autograd.record():
        total = forward()
    total.backward()
    grad = cell.h2r_weight.grad().asnumpy()
    base = w.asnumpy()
    numeric = np.zeros_like(base)
    for idx in np.ndindex(*base.shape):
        moved = [base.copy(), base.copy()]
        moved[0][idx] += 1e-6
        moved[1][idx] -= 1e-6
        up, down = (loss(nd.array(m, dtype="float64")).asscalar() for m in moved)
        numeric[idx] = (up - down) / 2e-6
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


def test_lstmp_cells_stack_like_the_projected_lstm_layer():
    layer = rnn.LSTM(5, projection_size=2, num_layers=2, bidirectional=True, prefix="m_")
    stack = rnn.HybridSequentialRNNCell(prefix="m_")
    with stack.name_scope():
        for i in range(2):
            stack.add(rnn.BidirectionalCell(LSTMPCell(5, 2, prefix=f"l{i}_"),
                                            LSTMPCell(5, 2, prefix=f"r{i}_")))
    layer.initialize(mx.init.Uniform(0.5))
    stack.initialize()
    x = nd.array(RNG.standard_normal((4, 3, 3)))                 # TNC
    want = layer(x)
    stack.unroll(4, x, layout="TNC")                              # finish deferred shapes
    params = stack.collect_params()
    for name, p in layer.collect_params().items():
        params[name].set_data(p.data())
    got, _ = stack.unroll(4, x, layout="TNC", merge_outputs=True)
    np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-6)


def test_lstmp_cell_bad_sizes_are_named():
    with pytest.raises(MXNetError, match="projection_size must be a positive int, got 0"):
        LSTMPCell(5, 0)


def test_variational_dropout_uses_one_mask_per_sequence():
    base = rnn.RNNCell(4, activation="relu")
    cell = VariationalDropoutCell(base, drop_inputs=0.5, drop_states=0.5, drop_outputs=0.5)
    cell.initialize(mx.init.One())
    x = nd.ones((6, 3, 4))
    plain, _ = cell.unroll(3, x, merge_outputs=True)              # inference: no dropout
    with cell_unlocked(base):
        want, _ = base.unroll(3, x, merge_outputs=True)
    np.testing.assert_allclose(plain.asnumpy(), want.asnumpy())
    mx.random.seed(5)
    with autograd.train_mode():
        out, _ = cell.unroll(3, x, merge_outputs=True)
    dropped = out.asnumpy() == 0
    assert dropped.any() and (~dropped).any()
    # the output mask is the same at every step (relu of ones stays positive)
    assert (dropped[:, 0] == dropped[:, 1]).all() and (dropped[:, 1] == dropped[:, 2]).all()


def test_variational_dropout_without_state_dropout_masks_the_whole_sequence():
    cell = VariationalDropoutCell(gluon.rnn.GRUCell(3), drop_inputs=0.5, drop_outputs=0.5)
    cell.initialize()
    x = nd.ones((4, 5, 2))
    with autograd.train_mode():
        out, states = cell.unroll(5, x, merge_outputs=False)
    assert len(out) == 5 and out[0].shape == (4, 3) and states[0].shape == (4, 3)
    with pytest.raises(MXNetError, match=r"drop_outputs must be in \[0, 1\), got 2"):
        VariationalDropoutCell(gluon.rnn.GRUCell(3), drop_outputs=2)
    with pytest.raises(MXNetError, match="state dropout needs a cell that steps"):
        VariationalDropoutCell(rnn.BidirectionalCell(rnn.GRUCell(2), rnn.GRUCell(2)),
                               drop_states=0.3)


def cell_unlocked(cell):
    from minigluon.gluon.rnn.modifier_cell import unlocked
    return unlocked(cell)
