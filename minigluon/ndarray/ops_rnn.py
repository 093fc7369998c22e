"""The fused recurrent operator `RNN` (MXNet's `nd.RNN`): a stack of RNN / LSTM / GRU
layers, maybe bidirectional, over a (T, N, C) sequence, with all weights in one flat
`parameters` vector.

The vector holds, in order: for each layer and direction (l0, r0, l1, ...) the i2h weight
(G*H, in) and the h2h weight (G*H, H); then, in the same order, the i2h and h2h biases
(G*H,). G is 1 (rnn_relu, rnn_tanh), 4 (lstm: gates i, f, g, o) or 3 (gru: r, z, n), as
in gluon.rnn's cells and layers. Each layer and direction runs as the layers' operator
`_rnn_sequence` does (`SequenceRun`: one input matmul, the fused cell kernels, BPTT).

Also here: the fused cell updates of one step, `_rnn_lstm_cell` and `_rnn_gru_cell`
(LSTMCell and GRUCell run them; kernels in rnn_kernels.py). gluon.rnn's layers run
`_rnn_sequence` (ops_rnn_sequence.py) instead.
"""
import numpy as np

from .. import autograd
from ..base import MXNetError, ShapeError
from . import rnn_kernels
from .ops_rnn_sequence import SequenceRun, steps_for
from .random import generator
from .registry import register

GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _slices(mode, num_layers, dirs, width, hidden):
    """(layer, direction) -> (offset, shape) of Wx, Wh, bx, bh in the flat vector."""
    rows, at, out = GATES[mode] * hidden, 0, {}
    for layer in range(num_layers):
        cols = width if layer == 0 else dirs * hidden
        for d in range(dirs):
            out[layer, d] = {"Wx": (at, (rows, cols))}
            at += rows * cols
            out[layer, d]["Wh"] = (at, (rows, hidden))
            at += rows * hidden
    for layer in range(num_layers):
        for d in range(dirs):
            out[layer, d]["bx"] = (at, (rows,))
            out[layer, d]["bh"] = (at + rows, (rows,))
            at += 2 * rows
    return out, at


def _view(flat, spec):
    start, shape = spec
    return flat[start:start + int(np.prod(shape))].reshape(shape)


def _check(data, parameters, state, state_cell, mode, state_size, num_layers, dirs,
           unsupported):
    if mode not in GATES:
        raise MXNetError(f"RNN: mode must be one of {sorted(GATES)}, got {mode!r}")
    if any(unsupported):
        raise MXNetError("RNN: projection_size, use_sequence_length and lstm_state_clip_* "
                         "are not supported by this operator; use "
                         "gluon.rnn.LSTM(projection_size=...) or "
                         "cell.unroll(..., valid_length=...)")
    if data.ndim != 3:
        raise ShapeError(f"RNN: data must be (T, N, C), got shape {data.shape}")
    want = (num_layers * dirs, data.shape[1], state_size)
    if state.shape != want or (mode == "lstm" and (state_cell is None or
                                                   state_cell.shape != want)):
        got = [state.shape] + ([getattr(state_cell, "shape", None)] if mode == "lstm" else [])
        raise ShapeError(f"RNN: states must have shape {want} (num_layers * directions, "
                         f"batch, state_size), got {got}")
    _, size = _slices(mode, num_layers, dirs, data.shape[2], state_size)
    if parameters.size != size:
        raise ShapeError(f"RNN: parameters holds {parameters.size} values; {mode} with "
                         f"{num_layers} layer(s), {dirs} direction(s), input width "
                         f"{data.shape[2]} and state_size {state_size} needs {size}")


@register("RNN", inputs=("data", "parameters", "state", "state_cell", "sequence_length"))
def rnn(xp, data, parameters, state, state_cell=None, sequence_length=None, state_size=None,
        num_layers=1, bidirectional=False, mode="lstm", p=0.0, state_outputs=False,
        projection_size=None, use_sequence_length=False, lstm_state_clip_min=None,
        lstm_state_clip_max=None, lstm_state_clip_nan=False):
    """Fused multi-layer RNN over data (T, N, C): outputs (T, N, dirs * state_size), and
    with state_outputs the final h (and c for lstm), (num_layers * dirs, N, state_size).
    `p` is dropout between layers, in training."""
    dirs = 2 if bidirectional else 1
    _check(data, parameters, state, state_cell, mode, state_size, num_layers, dirs,
           (projection_size, use_sequence_length, lstm_state_clip_min is not None,
            lstm_state_clip_max is not None))
    specs, _ = _slices(mode, num_layers, dirs, data.shape[2], state_size)
    weights = {key: {k: _view(parameters, s) for k, s in spec.items()}
               for key, spec in specs.items()}
    x, tape, hy, cy = data, [], [], []
    steps = data.shape[0]
    for layer in range(num_layers):
        outs, layer_tape = [], []
        for d in range(dirs):
            k, w = layer * dirs + d, weights[layer, d]
            # the layers' own per-direction run (one input matmul, C cell kernels, BPTT)
            run = SequenceRun(xp, steps_for(mode, xp, [x, w["Wx"], w["Wh"]]), x, w["Wx"],
                              w["Wh"], w["bx"], w["bh"], reverse=d == 1)
            c0 = state_cell[k] if mode == "lstm" else state[k]    # ignored but by lstm
            out = run.forward(xp.ascontiguousarray(state[k]), xp.ascontiguousarray(c0))
            outs.append(out[:steps])
            layer_tape.append(run)
            hy.append(out[steps - 1] if d == 0 else out[0])
            cy.append(out[steps] if mode == "lstm" else None)
        y = xp.concatenate(outs, axis=2)
        mask = None
        if p and layer < num_layers - 1 and autograd.is_training():
            keep = generator(xp).uniform(0, 1, y.shape, y.dtype) >= p
            mask = keep.astype(y.dtype) / y.dtype.type(1 - p)
            y = y * mask
        tape.append((layer_tape, mask))
        x = y
    results = [x] + ([xp.stack(hy)] + ([xp.stack(cy)] if mode == "lstm" else [])
                     if state_outputs else [])

    def backward(dout, dhy=None, dcy=None):
        return _rnn_backward(xp, mode, data, parameters, state, state_cell, specs, tape, dirs,
                             state_size, dout, dhy, dcy)
    return (tuple(results) if len(results) > 1 else results[0]), backward


def _rnn_backward(xp, mode, data, parameters, state, state_cell, specs, tape, dirs, hidden,
                  dout, dhy, dcy):
    dparams = xp.zeros_like(parameters)
    dstate = xp.zeros_like(state)
    dcell = xp.zeros_like(state_cell) if mode == "lstm" else None
    for layer in reversed(range(len(tape))):
        layer_tape, mask = tape[layer]
        if mask is not None:
            dout = dout * mask
        dx = 0
        for d, run in enumerate(layer_tape):
            k, steps = layer * dirs + d, data.shape[0]
            # the run's output rows: every step's h, then an lstm's final c
            grad = xp.zeros((steps + (mode == "lstm"),) + state[k].shape, parameters.dtype)
            grad[:steps] = dout[:, :, d * hidden:(d + 1) * hidden]
            if dhy is not None:
                grad[steps - 1 if d == 0 else 0] += dhy[k]
            if mode == "lstm" and dcy is not None:
                grad[steps] = dcy[k]
            dseq, *grads, dh0, dc0 = run.backward(grad)
            dx = dx + dseq
            dstate[k] = dh0
            if mode == "lstm":
                dcell[k] = dc0
            for name, g in zip(("Wx", "Wh", "bx", "bh"), grads):
                start, shape = specs[layer, d][name]
                dparams[start:start + g.size] += g.reshape(-1)
        dout = dx
    return (dout, dparams, dstate, dcell, None)


def _check_gates(op, i2h, h2h, state, gates, what):
    """ShapeError unless i2h and h2h are both (N, gates*H) for `state` (N, H)."""
    if state.ndim != 2 or i2h.shape != (state.shape[0], gates * state.shape[1]) or \
            h2h.shape != i2h.shape:
        raise ShapeError(f"{op}: i2h {i2h.shape} and h2h {h2h.shape} must both be "
                         f"(N, {gates}H) for {what} of shape {state.shape} (N, H)")


@register("_rnn_lstm_cell", inputs=("i2h", "h2h", "c"))
def lstm_cell(xp, i2h, h2h, c):
    """One LSTM cell update, fused: from the gate projections i2h, h2h (N, 4H), gates in
    MXNet's order (input, forget, candidate, output), and the cell state c (N, H), the
    stacked (2, N, H) [h', c'] with c' = f*c + i*g, h' = o*tanh(c').

    LSTMCell runs its steps through it: one operator and one tape node per step instead
    of a dozen. Example: ``h, c = nd._rnn_lstm_cell(i2h, h2h, c)``.
    """
    _check_gates("_rnn_lstm_cell", i2h, h2h, c, 4, "the cell state c")
    kernels = rnn_kernels.kernels_for(xp, i2h, h2h, c)
    i2h, h2h, c = (kernels.contiguous(a) for a in (i2h, h2h, c))
    out, act = kernels.lstm_cell_forward(i2h, h2h, c)

    def backward(dout):
        da, dc = kernels.lstm_cell_backward(kernels.contiguous(dout.astype(c.dtype,
                                                                           copy=False)),
                                            act, c, out)
        # i2h and h2h enter as their sum: both get da (a copy, so neither aliases the other)
        return da, da.copy(), dc
    return out, backward


@register("_rnn_gru_cell", inputs=("i2h", "h2h", "h"))
def gru_cell(xp, i2h, h2h, h):
    """One GRU update, fused: from the gate projections i2h, h2h (N, 3H), gates in MXNet's
    order (reset, update, new) and h2h holding its bias, and the state h (N, H), the new
    state h' = (1 - z)*n + z*h with n = tanh(i2h_n + r*h2h_n).

    GRUCell runs its steps through it. Example: ``h = nd._rnn_gru_cell(i2h, h2h, h)``.
    """
    _check_gates("_rnn_gru_cell", i2h, h2h, h, 3, "the state h")
    kernels = rnn_kernels.kernels_for(xp, i2h, h2h, h)
    i2h, h2h, h = (kernels.contiguous(a) for a in (i2h, h2h, h))
    out, act = kernels.gru_cell_forward(i2h, h2h, h)

    def backward(dout):
        return kernels.gru_cell_backward(kernels.contiguous(dout.astype(h.dtype, copy=False)),
                                         act, h)
    return out, backward
