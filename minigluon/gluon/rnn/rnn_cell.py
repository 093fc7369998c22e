"""Recurrent cells: one time step of RNN (tanh or relu), LSTM and GRU, and stacks of them.

A cell maps (input (N, C), states) to (output (N, H), new states); `unroll` runs it over
a sequence. The gate layouts follow MXNet's (and cuDNN's), so weights move between these
cells and the fused layers of rnn_layer.py:
  LSTM: i2h/h2h rows [input gate, forget gate, candidate, output gate], states [h, c];
  GRU:  rows [reset, update, new], n = tanh(i2h_n + r * h2h_n), h' = (1 - z) * n + z * h.
"""
from ... import ndarray as nd
from ... import symbol as sym
from ...base import MXNetError, ShapeError
from ...ndarray.ndarray import NDArray
from ..block import Block, HybridBlock
from ..nn.activations import LeakyReLU
from ..nn.basic_layers import SequentialMixin
from .sequence import format_sequence, last_valid, mask_padded, start_states

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


def lstm_step(F, i2h, h2h, c, hidden, name=None):
    """One LSTM update from the two projections (N, 4H) and the cell state c (N, H);
    returns (h, c). `name` names the node of h in a symbolic graph. LSTMCell runs the
    fused `_rnn_lstm_cell` instead; this is the plain path (LSTMPCell, tests)."""
    gates = unstack(F, F.reshape(i2h + h2h, (0, 4, hidden)), 4, axis=1)
    in_gate, forget_gate = F.sigmoid(gates[0]), F.sigmoid(gates[1])
    candidate, out_gate = F.tanh(gates[2]), F.sigmoid(gates[3])
    next_c = forget_gate * c + in_gate * candidate
    return F.elemwise_mul(out_gate, F.tanh(next_c), name=name), next_c


def gru_step(F, i2h, h2h, h, hidden, name=None):
    """One GRU update from the two projections (N, 3H) and the hidden state h (N, H).
    GRUCell runs the fused `_rnn_gru_cell` instead; this is the plain path (tests)."""
    ri, zi, ni = unstack(F, F.reshape(i2h, (0, 3, hidden)), 3, axis=1)
    rh, zh, nh = unstack(F, F.reshape(h2h, (0, 3, hidden)), 3, axis=1)
    reset, update = F.sigmoid(ri + rh), F.sigmoid(zi + zh)
    new = F.tanh(ni + reset * nh)
    return F.elemwise_add((1 - update) * new, update * h, name=name)


def rnn_step(F, i2h, h2h, activation, name=None):
    """activation(i2h + h2h); `activation` is an Activation act_type, a LeakyReLU block or
    a function of (F-array, name=...)."""
    total = i2h + h2h
    if isinstance(activation, str):
        return F.Activation(total, act_type=activation, name=name)
    if isinstance(activation, LeakyReLU):
        return F.LeakyReLU(total, act_type="leaky", slope=activation._alpha, name=name)
    return activation(total, name=name)


class RecurrentCell(Block):
    """Base of the cells: `cell(inputs, states)` gives (output, new_states) for one step;
    `unroll` runs it over a sequence.

    Each call counts a step (`t0_`, `t1_`, ... in the names of a symbolic graph's
    outputs); `reset()` starts the count again, as `unroll` does.
    """

    _can_step = True    # False for cells that only unroll (BidirectionalCell)

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._modified = False
        self.reset()

    def reset(self):
        """Start a new sequence: restart the step count (of this cell and its children)."""
        self._init_counter = -1
        self._counter = -1
        for cell in self._children.values():
            cell.reset()

    def state_info(self, batch_size=0):
        """Shape and layout of each state, e.g. [{'shape': (N, H), '__layout__': 'NC'}]."""
        raise NotImplementedError

    def begin_state(self, batch_size=0, func=nd.zeros, **kwargs):
        """Initial states for a batch: `func(shape=..., **kwargs)` for each state.

        With a symbol function (`mx.sym.var`, `mx.sym.zeros`) each state is named
        `<prefix>begin_state_<i>`.
        """
        check_unmodified(self)
        func = np_zeros_if_np_mode(func)
        states = []
        for info in self.state_info(batch_size):
            self._init_counter += 1
            args = dict(kwargs, shape=info["shape"])
            if getattr(func, "__module__", "").startswith(sym.__name__):
                args.setdefault("name", f"{self.prefix}begin_state_{self._init_counter}")
            states.append(func(**args))
        return states

    def __call__(self, inputs, states):
        self._counter += 1
        return super().__call__(inputs, states)

    def _op_name(self, what):
        """The name of this step's `what` node in a symbolic graph, t<step>_<what>; the
        cell's forward runs under `mx.name.Prefix(self.prefix)`, which puts the prefix
        before it (<prefix>t<step>_<what>)."""
        return f"t{self._counter}_{what}"

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """Run the cell over `length` steps.

        Parameters
        ----------
        length : int
        inputs : NDArray or Symbol (N, T, ...) for 'NTC', (T, N, ...) for 'TNC'; or a list of
            `length` steps (N, ...)
        begin_state : list of states, default zeros (`begin_state(batch_size)`)
        layout : 'NTC' or 'TNC'
        merge_outputs : True gives one array with the time axis of `layout`, False a list
            of steps; None: a list (one array when valid_length is given), as in MXNet
        valid_length : (N,) array or Symbol, optional
            Steps of each sequence that are real; outputs past them are 0 and the states
            returned are those of each sequence's last valid step.

        Returns (outputs, states).
        """
        self.reset()
        steps, axis, F, batch_size = format_sequence(length, inputs, layout, False)
        states = begin_state if begin_state is not None else \
            start_states(self, F, steps, batch_size, axis)
        outputs, history = [], []
        for step in steps:
            out, states = self(step, states)
            outputs.append(out)
            history.append(states)
        if valid_length is not None:
            states = [last_valid(F, per_step, valid_length) for per_step in zip(*history)]
            outputs = mask_padded(F, outputs, length, valid_length, axis, True)
        outputs, _, _, _ = format_sequence(length, outputs, layout, merge_outputs)
        return outputs, states


def check_unmodified(cell):
    if cell._modified:
        raise MXNetError(f"{cell.name} is wrapped by a modifier cell (ZoneoutCell, "
                         "ResidualCell, ...); call the modifier cell instead of this one")


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
        i2h = F.FullyConnected(inputs, i2h_weight, i2h_bias, num_hidden=rows,
                               name=self._op_name("i2h"))
        h2h = F.FullyConnected(h, h2h_weight, h2h_bias, num_hidden=rows,
                               name=self._op_name("h2h"))
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

    def _alias(self):
        return "rnn"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        i2h, h2h = self._project(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias,
                                 h2h_bias)
        h = rnn_step(F, i2h, h2h, self._activation, name=self._op_name("out"))
        return h, [h]


class LSTMCell(_GatedCell):
    """Long short-term memory cell (Hochreiter and Schmidhuber, 1997); states [h, c].

    Parameters as RNNCell's, without activation.
    """

    _gates = 4
    _num_states = 2

    def _alias(self):
        return "lstm"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        i2h, h2h = self._project(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias,
                                 h2h_bias)
        # the fused cell update (one operator, C kernels on the host) gives [h', c'];
        # identity names h' as lstm_step's last operator named it
        h, c = unstack(F, F._rnn_lstm_cell(i2h, h2h, states[1]), 2, 0)
        h = F.identity(h, name=self._op_name("out"))
        return h, [h, c]


class GRUCell(_GatedCell):
    """Gated recurrent unit (Cho et al., 2014); states [h].

    Parameters as RNNCell's, without activation.
    """

    _gates = 3

    def _alias(self):
        return "gru"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        i2h, h2h = self._project(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias,
                                 h2h_bias)
        h = F._rnn_gru_cell(i2h, h2h, states[0], name=self._op_name("out"))
        return h, [h]


class ChildStatesMixin:
    """For a cell made of child cells: its states are the children's, in child order."""

    def state_info(self, batch_size=0):
        return [info for cell in self._children.values()
                for info in cell.state_info(batch_size)]

    def begin_state(self, batch_size=0, func=nd.zeros, **kwargs):
        check_unmodified(self)
        return [s for cell in self._children.values()
                for s in cell.begin_state(batch_size, func, **kwargs)]


class _StackMixin(ChildStatesMixin, SequentialMixin):
    """Cells applied one above the other; the states are the cells' states in order.

    A step runs each cell once; `unroll` runs each cell over the whole sequence in turn,
    so a stack may hold BidirectionalCells (which cannot step).
    """

    @property
    def _can_step(self):
        return all(cell._can_step for cell in self._children.values())

    def _split_states(self, states):
        if len(states) != len(self.state_info()):
            raise ShapeError(f"{type(self).__name__}: got {len(states)} states, its cells "
                             f"take {len(self.state_info())}; use begin_state(batch_size)")
        at = 0
        for cell in self._children.values():
            n = len(cell.state_info())
            yield cell, list(states[at:at + n])
            at += n

    def _step(self, inputs, states):
        new_states = []
        for cell, cell_states in self._split_states(states):
            inputs, cell_states = cell(inputs, cell_states)
            new_states.extend(cell_states)
        return inputs, new_states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """Unroll each cell over the sequence, bottom up (see RecurrentCell.unroll)."""
        self.reset()
        inputs, axis, F, batch_size = format_sequence(length, inputs, layout, None)
        states = begin_state if begin_state is not None else \
            start_states(self, F, inputs, batch_size, axis)
        last = len(self._children) - 1
        new_states = []
        for i, (cell, cell_states) in enumerate(self._split_states(states)):
            inputs, cell_states = cell.unroll(length, inputs, cell_states, layout,
                                              merge_outputs if i == last else None,
                                              valid_length)
            new_states.extend(cell_states)
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
