"""Recurrent cells: one time step of RNN (tanh or relu), LSTM and GRU, and stacks of them.

A cell maps (input (N, C), states) to (output (N, H), new states); `unroll` runs it over
a sequence. The gate layouts follow MXNet's (and cuDNN's), so weights move between these
cells and the fused layers of rnn_layer.py:
  LSTM: i2h/h2h rows [input gate, forget gate, candidate, output gate], states [h, c];
  GRU:  rows [reset, update, new], n = tanh(i2h_n + r * h2h_n), h' = (1 - z) * n + z * h.
"""
from ... import ndarray as nd
from ...base import MXNetError, ShapeError
from ...ndarray.ndarray import NDArray
from ..block import Block, HybridBlock
from ..nn.basic_layers import SequentialMixin

__all__ = ["RecurrentCell", "HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell",
           "SequentialRNNCell", "HybridSequentialRNNCell"]


def np_zeros_if_np_mode(func):
    """Under npx.set_np(), default states are mx.np arrays, like everything else there."""
    from ...numpy.mode import is_np_array
    if func is nd.zeros and is_np_array():
        from ... import numpy as mxnp
        return mxnp.zeros
    return func


def unstack(F, x, n, axis):
    """The n slices of x along `axis`, that axis removed (a list even for n = 1)."""
    parts = F.split(x, num_outputs=n, axis=axis, squeeze_axis=True)
    return [parts] if n == 1 else [parts[i] for i in range(n)]


def lstm_step(F, i2h, h2h, c, hidden):
    """One LSTM update from the two projections (N, 4H) and the cell state c (N, H)."""
    gates = unstack(F, F.reshape(i2h + h2h, (0, 4, hidden)), 4, axis=1)
    in_gate, forget_gate = F.sigmoid(gates[0]), F.sigmoid(gates[1])
    candidate, out_gate = F.tanh(gates[2]), F.sigmoid(gates[3])
    next_c = forget_gate * c + in_gate * candidate
    return out_gate * F.tanh(next_c), next_c


def gru_step(F, i2h, h2h, h, hidden):
    """One GRU update from the two projections (N, 3H) and the hidden state h (N, H)."""
    ri, zi, ni = unstack(F, F.reshape(i2h, (0, 3, hidden)), 3, axis=1)
    rh, zh, nh = unstack(F, F.reshape(h2h, (0, 3, hidden)), 3, axis=1)
    reset, update = F.sigmoid(ri + rh), F.sigmoid(zi + zh)
    new = F.tanh(ni + reset * nh)
    return (1 - update) * new + update * h


def rnn_step(F, i2h, h2h, activation):
    return F.Activation(i2h + h2h, act_type=activation)


class RecurrentCell(Block):
    """Base of the cells: `cell(inputs, states)` gives (output, new_states)."""

    def state_info(self, batch_size=0):
        """Shape and layout of each state, e.g. [{'shape': (N, H), '__layout__': 'NC'}]."""
        raise NotImplementedError

    def begin_state(self, batch_size=0, func=nd.zeros, **kwargs):
        """Initial states for a batch: `func(shape=..., **kwargs)` for each state."""
        func = np_zeros_if_np_mode(func)
        return [func(shape=info["shape"], **kwargs) for info in self.state_info(batch_size)]

    def reset(self):
        """Cells keep no per-sequence state; kept for MXNet compatibility."""

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """Run the cell over `length` steps of `inputs` ((N, T, C) for 'NTC', (T, N, C) for
        'TNC', or a list of T arrays (N, C)). Returns (outputs, states): one array with
        the time axis of `layout` when merge_outputs is True (or None and inputs were one
        array), else a list of T arrays."""
        if valid_length is not None:
            raise MXNetError("unroll: valid_length is not supported; pad the sequences and "
                             "mask the outputs instead")
        if layout not in ("NTC", "TNC"):
            raise MXNetError(f"unroll: layout must be 'NTC' or 'TNC', got {layout!r}")
        axis = layout.find("T")
        if isinstance(inputs, (list, tuple)):
            steps = list(inputs)
            merge = bool(merge_outputs)
        else:
            if inputs.shape[axis] != length:
                raise ShapeError(f"unroll: inputs of shape {inputs.shape} have "
                                 f"{inputs.shape[axis]} steps on axis {axis} ({layout}), "
                                 f"but length={length}")
            steps = unstack(nd, inputs, length, axis)
            merge = merge_outputs is None or merge_outputs
        if len(steps) != length:
            raise ShapeError(f"unroll: got {len(steps)} input steps, but length={length}")
        states = begin_state if begin_state is not None else \
            self.begin_state(steps[0].shape[0], ctx=steps[0].context, dtype=steps[0].dtype)
        outputs = []
        for step in steps:
            out, states = self(step, states)
            outputs.append(out)
        if merge:
            outputs = nd.stack(*outputs, axis=axis)
        return outputs, states


class HybridRecurrentCell(RecurrentCell, HybridBlock):
    """A cell whose step is a hybrid_forward(F, inputs, states, **params)."""

    def forward(self, inputs, states):
        if isinstance(inputs, NDArray):
            self._check_states(inputs, states)
        return HybridBlock.forward(self, inputs, states)

    def _check_states(self, inputs, states):
        if not isinstance(states, (list, tuple)):
            raise MXNetError(f"{type(self).__name__}: states must be a list of arrays (from "
                             f"begin_state), got {type(states).__name__}")
        want = self.state_info(inputs.shape[0])
        got = [tuple(s.shape) for s in states]
        if [w["shape"] for w in want] != got:
            raise ShapeError(f"{type(self).__name__}: states of shapes {got} do not fit a "
                             f"batch of {inputs.shape[0]}; expected "
                             f"{[w['shape'] for w in want]} (use cell.begin_state(batch_size))")


class _GatedCell(HybridRecurrentCell):
    """A cell with i2h and h2h projections of `gates` * hidden_size rows."""

    _gates = 1
    _num_states = 1

    def __init__(self, hidden_size, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", input_size=0,
                 prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        if not isinstance(hidden_size, int) or hidden_size < 1:
            raise MXNetError(f"{type(self).__name__}: hidden_size must be a positive int, got "
                             f"{hidden_size!r}")
        self._hidden_size = hidden_size
        rows = self._gates * hidden_size
        with self.name_scope():
            self.i2h_weight = self.params.get("i2h_weight", shape=(rows, input_size),
                                              init=i2h_weight_initializer,
                                              allow_deferred_init=True)
            self.h2h_weight = self.params.get("h2h_weight", shape=(rows, hidden_size),
                                              init=h2h_weight_initializer,
                                              allow_deferred_init=True)
            self.i2h_bias = self.params.get("i2h_bias", shape=(rows,),
                                            init=i2h_bias_initializer, allow_deferred_init=True)
            self.h2h_bias = self.params.get("h2h_bias", shape=(rows,),
                                            init=h2h_bias_initializer, allow_deferred_init=True)

    def state_info(self, batch_size=0):
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}
                for _ in range(self._num_states)]

    def infer_shape(self, x, *args):
        self.i2h_weight.shape = (self._gates * self._hidden_size, x.shape[-1])

    def _project(self, F, inputs, h, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        rows = self._gates * self._hidden_size
        i2h = F.FullyConnected(inputs, i2h_weight, i2h_bias, num_hidden=rows)
        h2h = F.FullyConnected(h, h2h_weight, h2h_bias, num_hidden=rows)
        return i2h, h2h

    def __repr__(self):
        shape = self.i2h_weight.shape
        return (f"{type(self).__name__}({shape[1] or None} -> "
                f"{shape[0] // self._gates})")


class RNNCell(_GatedCell):
    """Elman cell: h' = activation(W_i x + b_i + W_h h + b_h); output h', states [h'].

    Parameters: hidden_size, activation ('tanh' or 'relu'; any Activation act_type works),
    i2h/h2h weight and bias initializers, input_size (0: from the first input).
    """

    def __init__(self, hidden_size, activation="tanh", i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer="zeros",
                 h2h_bias_initializer="zeros", input_size=0, prefix=None, params=None):
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, prefix,
                         params)
        self._activation = activation

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        i2h, h2h = self._project(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias,
                                 h2h_bias)
        h = rnn_step(F, i2h, h2h, self._activation)
        return h, [h]


class LSTMCell(_GatedCell):
    """Long short-term memory cell (Hochreiter and Schmidhuber, 1997); states [h, c].

    Parameters as RNNCell's, without activation.
    """

    _gates = 4
    _num_states = 2

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        i2h, h2h = self._project(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias,
                                 h2h_bias)
        h, c = lstm_step(F, i2h, h2h, states[1], self._hidden_size)
        return h, [h, c]


class GRUCell(_GatedCell):
    """Gated recurrent unit (Cho et al., 2014); states [h].

    Parameters as RNNCell's, without activation.
    """

    _gates = 3

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        i2h, h2h = self._project(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias,
                                 h2h_bias)
        h = gru_step(F, i2h, h2h, states[0], self._hidden_size)
        return h, [h]


class _StackMixin(SequentialMixin):
    """Cells applied one above the other; the states are the cells' states in order."""

    def state_info(self, batch_size=0):
        return [info for cell in self._children.values()
                for info in cell.state_info(batch_size)]

    def begin_state(self, batch_size=0, func=nd.zeros, **kwargs):
        return [s for cell in self._children.values()
                for s in cell.begin_state(batch_size, func, **kwargs)]

    def _step(self, inputs, states):
        if len(states) != len(self.state_info()):
            raise ShapeError(f"{type(self).__name__}: got {len(states)} states, its cells "
                             f"take {len(self.state_info())}; use begin_state(batch_size)")
        new_states, at = [], 0
        for cell in self._children.values():
            n = len(cell.state_info())
            inputs, cell_states = cell(inputs, list(states[at:at + n]))
            new_states.extend(cell_states)
            at += n
        return inputs, new_states


class SequentialRNNCell(_StackMixin, RecurrentCell):
    """A stack of cells: `add(cell)` in order from the input up."""

    def forward(self, inputs, states):
        return self._step(inputs, states)


class HybridSequentialRNNCell(_StackMixin, HybridRecurrentCell):
    """A stack of hybrid cells; hybridizes as one graph."""

    def forward(self, inputs, states):
        return HybridBlock.forward(self, inputs, states)

    def hybrid_forward(self, F, inputs, states):
        return self._step(inputs, states)
