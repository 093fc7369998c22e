"""Recurrent layers over whole sequences: RNN, LSTM and GRU with num_layers, bidirectional
and dropout between layers, as MXNet's gluon.rnn layers.

Each direction of each layer is one operator, `_rnn_sequence` (ndarray/ops_rnn_sequence.py):
one matmul projects the inputs of every step, a loop inside the operator runs the
recurrence with the fused cell update, and its backward runs through time in one node of
the tape. A hybridized layer traces one graph per sequence length. Layers with
projection_size (LSTMP) unroll the steps as operators instead (`_unrolled`).
Parameters are named as MXNet's: l0_i2h_weight, l0_h2h_weight, l0_i2h_bias,
l0_h2h_bias for layer 0 left to right, r0_... for its right-to-left direction.
"""
from ... import ndarray as nd
from ...base import MXNetError, ShapeError
from ...ndarray.ndarray import NDArray
from ..block import HybridBlock
from ..parameter import ParameterDict
from .bidirectional_cell import BidirectionalCell
from .dropout_cell import DropoutCell
from .rnn_cell import (GRUCell, HybridSequentialRNNCell, LSTMCell, RNNCell, gru_step,
                       np_zeros_if_np_mode, rnn_step, unstack)

__all__ = ["RNN", "LSTM", "GRU"]


class _RNNLayer(HybridBlock):
    _shape_dependent = True      # slices by the sequence length: one trace per length
    _gates = 1
    _num_states = 1

    def __init__(self, hidden_size, num_layers=1, layout="TNC", dropout=0,
                 bidirectional=False, input_size=0, i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer="zeros",
                 h2h_bias_initializer="zeros", dtype="float32", projection_size=None,
                 h2r_weight_initializer=None, **kwargs):
        super().__init__(**kwargs)
        if layout not in ("TNC", "NTC"):
            raise MXNetError(f"{type(self).__name__}: layout must be 'TNC' or 'NTC', got "
                             f"{layout!r}")
        if not isinstance(hidden_size, int) or hidden_size < 1 or \
                not isinstance(num_layers, int) or num_layers < 1:
            raise MXNetError(f"{type(self).__name__}: hidden_size and num_layers must be "
                             f"positive ints, got {hidden_size!r} and {num_layers!r}")
        if not 0 <= dropout < 1:
            raise MXNetError(f"{type(self).__name__}: dropout must be in [0, 1), got {dropout}")
        if projection_size is not None and (not isinstance(projection_size, int) or
                                            projection_size < 1):
            raise MXNetError(f"{type(self).__name__}: projection_size must be a positive int "
                             f"or None, got {projection_size!r}")
        self._hidden_size, self._num_layers, self._layout = hidden_size, num_layers, layout
        self._dropout, self._dirs = dropout, 2 if bidirectional else 1
        self._projection_size = projection_size or None
        self._input_size = input_size
        self._initializers = dict(i2h_weight_initializer=i2h_weight_initializer,
                                  h2h_weight_initializer=h2h_weight_initializer,
                                  i2h_bias_initializer=i2h_bias_initializer,
                                  h2h_bias_initializer=h2h_bias_initializer)
        self._directions = [(d, layer) for layer in range(num_layers)
                            for d in ("l", "r")[:self._dirs]]
        with self.name_scope():
            for d, layer in self._directions:
                for name, shape, init in self._param_specs(layer, h2r_weight_initializer):
                    key = f"{d}{layer}_{name}"
                    setattr(self, key, self.params.get(key, shape=shape, init=init,
                                                       dtype=dtype, allow_deferred_init=True))

    @property
    def _output_size(self):
        """Features of one direction's output: the projection's, else the hidden size."""
        return self._projection_size or self._hidden_size

    def _param_specs(self, layer, h2r_weight_initializer):
        """(name, shape, initializer) of each parameter of one direction of `layer`."""
        rows, init = self._gates * self._hidden_size, self._initializers
        width = self._input_size if layer == 0 else self._output_size * self._dirs
        specs = [("i2h_weight", (rows, width), init["i2h_weight_initializer"]),
                 ("h2h_weight", (rows, self._output_size), init["h2h_weight_initializer"]),
                 ("i2h_bias", (rows,), init["i2h_bias_initializer"]),
                 ("h2h_bias", (rows,), init["h2h_bias_initializer"])]
        if self._projection_size:
            specs.append(("h2r_weight", (self._projection_size, self._hidden_size),
                          h2r_weight_initializer))
        return specs

    def _state_widths(self):
        """Features of each state: [h] or [h, c]; h is projected when projection_size is."""
        return [self._output_size, self._hidden_size][:self._num_states]

    def state_info(self, batch_size=0):
        return [{"shape": (self._num_layers * self._dirs, batch_size, width),
                 "__layout__": "LNC"} for width in self._state_widths()]

    def begin_state(self, batch_size=0, func=nd.zeros, **kwargs):
        """Initial states: `func(shape=(num_layers * dirs, N, H), **kwargs)` for each."""
        func = np_zeros_if_np_mode(func)
        return [func(shape=info["shape"], **kwargs) for info in self.state_info(batch_size)]

    def infer_shape(self, x, *args):
        rows = self._gates * self._hidden_size
        for d in ("l", "r")[:self._dirs]:
            getattr(self, f"{d}0_i2h_weight").shape = (rows, x.shape[-1])

    def forward(self, inputs, states=None):
        if isinstance(inputs, NDArray):
            if inputs.ndim != 3:
                raise ShapeError(f"{type(self).__name__} takes inputs of 3 axes ({self._layout})"
                                 f", got shape {inputs.shape}")
            self._steps = inputs.shape[self._layout.find("T")]
        if isinstance(states, NDArray):
            states = [states]
        if states is not None and isinstance(inputs, NDArray):
            self._check_states(inputs, states)
        # hybrid_forward gives the output alone when no states came in, so a traced graph
        # and its replays return what this call returns
        return HybridBlock.forward(self, inputs, states)

    def _check_states(self, inputs, states):
        want = [i["shape"] for i in self.state_info(inputs.shape[self._layout.find("N")])]
        got = [tuple(s.shape) for s in states]
        if got != want:
            raise ShapeError(f"{type(self).__name__}: states of shapes {got} do not fit; "
                             f"expected {want} (num_layers * directions, batch, hidden); use "
                             "layer.begin_state(batch_size)")

    def hybrid_forward(self, F, inputs, states, **params):
        if self._projection_size:
            return self._unrolled(F, inputs, states, params)
        swap = self._layout == "NTC"
        x = F.swapaxes(inputs, dim1=0, dim2=1) if swap else inputs
        given = None if states is None else \
            [unstack(F, s, len(self._directions), 0) for s in states]
        finals = [[] for _ in self._state_widths()]
        for layer in range(self._num_layers):
            outputs = []
            for d in ("l", "r")[:self._dirs]:
                k = self._directions.index((d, layer))
                out, last = self._sequence(F, x, params, f"{d}{layer}_", d == "r",
                                           given and [s[k] for s in given])
                outputs.append(out)
                for kept, s in zip(finals, last):
                    kept.append(s)
            x = outputs[0] if self._dirs == 1 else F.concat(*outputs, dim=2)
            if self._dropout and layer < self._num_layers - 1:
                # the op drops only in training mode, also when replayed from a trace
                x = F.Dropout(x, p=self._dropout)
        out = F.swapaxes(x, dim1=0, dim2=1) if swap else x
        if states is None:
            return out
        return out, [F.concat(*kept, dim=0) for kept in finals]

    def _sequence(self, F, x, params, prefix, reverse, state):
        """One direction of one layer over x (T, N, C): (outputs (T, N, H), the final
        states as (1, N, H) each when `state` was given, else [])."""
        w = [params[prefix + n] for n in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")]
        seq = F._rnn_sequence(x, *w, *(state or []), mode=self._mode, reverse=reverse)
        steps = self._steps
        # an lstm's sequence carries its final cell state as one more row
        out = F.slice_axis(seq, axis=0, begin=0, end=steps) if self._num_states == 2 else seq
        if state is None:
            return out, []
        at = 0 if reverse else steps - 1
        last = [F.slice_axis(seq, axis=0, begin=at, end=at + 1)]
        if self._num_states == 2:
            last.append(F.slice_axis(seq, axis=0, begin=steps, end=steps + 1))
        return out, last

    def _unrolled(self, F, inputs, states, params):
        """The layer as operators per step (for projection_size, which the sequence
        operator does not take)."""
        steps = unstack(F, inputs, self._steps, self._layout.find("T"))
        if states is None:
            # zeros (N, width) built from the input, so a traced graph fits any batch size
            column = F.zeros_like(F.slice_axis(steps[0], axis=1, begin=0, end=1))
            per_state = [[F.broadcast_axis(column, axis=1, size=width)] * len(self._directions)
                         for width in self._state_widths()]
        else:
            per_state = [unstack(F, s, len(self._directions), 0) for s in states]
        new_states = [[] for _ in per_state]
        for layer in range(self._num_layers):
            outputs = []
            for d in ("l", "r")[:self._dirs]:
                k = self._directions.index((d, layer))
                state = [s[k] for s in per_state]
                seq = steps if d == "l" else steps[::-1]
                outs, state = self._run(F, seq, state, params, f"{d}{layer}_")
                outputs.append(outs if d == "l" else outs[::-1])
                for kept, s in zip(new_states, state):
                    kept.append(s)
            steps = outputs[0] if self._dirs == 1 else \
                [F.concat(a, b, dim=1) for a, b in zip(*outputs)]
            if self._dropout and layer < self._num_layers - 1:
                steps = [F.Dropout(s, p=self._dropout) for s in steps]
        out = F.stack(*steps, axis=self._layout.find("T"))
        if states is None:
            return out
        return out, [F.stack(*kept, axis=0) for kept in new_states]

    def _run(self, F, seq, state, params, prefix):
        w = {name: params[prefix + name] for name in
             ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias", "h2r_weight")
             if prefix + name in params}
        rows = self._gates * self._hidden_size
        # one matmul for the input projections of every step, then the recurrence
        stacked = F.stack(*seq, axis=0)
        i2h_all = F.FullyConnected(stacked, w["i2h_weight"], w["i2h_bias"], num_hidden=rows,
                                   flatten=False)
        i2h_steps = unstack(F, i2h_all, len(seq), 0)
        outs = []
        for i2h in i2h_steps:
            h2h = F.FullyConnected(state[0], w["h2h_weight"], w["h2h_bias"], num_hidden=rows)
            state = self._step(F, i2h, h2h, state)
            if self._projection_size:
                state[0] = F.FullyConnected(state[0], w["h2r_weight"], no_bias=True,
                                            num_hidden=self._projection_size)
            outs.append(state[0])
        return outs, state

    def __repr__(self):
        shape = getattr(self, "l0_i2h_weight").shape
        extra = f", num_layers={self._num_layers}" if self._num_layers > 1 else ""
        extra += ", bidirectional" if self._dirs == 2 else ""
        return (f"{type(self).__name__}({shape[1] or None} -> {self._hidden_size}, "
                f"{self._layout}{extra})")

    def _unfuse(self):
        """The same network as a HybridSequentialRNNCell of cells (l<i>_ and r<i>_, in
        BidirectionalCells when bidirectional, DropoutCells between layers) that share
        this layer's parameters; unroll it with this layer's layout."""
        if self._projection_size:
            raise MXNetError(f"{type(self).__name__}._unfuse: layers with projection_size "
                             "have no cell stack; use gluon.contrib.rnn.LSTMPCell cells")
        stack = HybridSequentialRNNCell(prefix=self.prefix, params=self.params)
        width = self._input_size
        for layer in range(self._num_layers):
            cells = [self._cell(f"{d}{layer}_", width) for d in ("l", "r")[:self._dirs]]
            stack.add(cells[0] if self._dirs == 1 else BidirectionalCell(*cells))
            if self._dropout and layer < self._num_layers - 1:
                stack.add(DropoutCell(self._dropout, prefix=f"{self.prefix}dropout{layer}_"))
            width = self._hidden_size * self._dirs
        return stack

    def _cell(self, prefix, input_size):
        """One direction of one layer as a cell whose parameters are this layer's."""
        shared = ParameterDict(self.prefix + prefix, shared=self.params)
        for name in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias"):
            shared.get(name)
        return self._cell_class(self._hidden_size, input_size=input_size,
                                prefix=self.prefix + prefix, params=shared,
                                **self._cell_kwargs(), **self._initializers)

    def _cell_kwargs(self):
        return {}


_INIT_DOC = """
    Parameters
    ----------
    hidden_size : int
    num_layers : int
        Layers stacked; each takes the previous one's outputs.
    layout : 'TNC' (default) or 'NTC'
    dropout : float
        Dropout on the outputs of every layer but the last, in training.
    bidirectional : bool
        Also run each layer right to left and concatenate the two outputs (2 * hidden_size).
    input_size : int
        Features per step; 0 infers it from the first input.
    i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
    h2h_bias_initializer : Initializer or str

    Call: `layer(inputs)` gives outputs (T, N, dirs * H) for 'TNC'; `layer(inputs, states)`
    gives (outputs, new_states), states as from `layer.begin_state(batch_size)`.
"""


class RNN(_RNNLayer):
    __doc__ = "Elman RNN layer: h' = activation(W_i x + b_i + W_h h + b_h).\n" + _INIT_DOC

    def __init__(self, hidden_size, num_layers=1, activation="relu", layout="TNC",
                 dropout=0, bidirectional=False, i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer="zeros",
                 h2h_bias_initializer="zeros", input_size=0, dtype="float32", **kwargs):
        if activation not in ("relu", "tanh"):
            raise MXNetError(f"RNN: activation must be 'relu' or 'tanh', got {activation!r}")
        self._activation = activation
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, dtype, **kwargs)

    _cell_class = RNNCell

    @property
    def _mode(self):
        return "rnn_" + self._activation

    def _cell_kwargs(self):
        return {"activation": self._activation}

    def _step(self, F, i2h, h2h, state):
        return [rnn_step(F, i2h, h2h, self._activation)]


class LSTM(_RNNLayer):
    __doc__ = ("LSTM layer; states [h, c]. projection_size (int) projects h with a "
               "h2r_weight (no bias) as LSTMPCell does; h2r_weight_initializer sets its "
               "initializer.\n" + _INIT_DOC)
    _gates = 4
    _num_states = 2
    _cell_class = LSTMCell
    _mode = "lstm"

    def __init__(self, hidden_size, num_layers=1, layout="TNC", dropout=0,
                 bidirectional=False, input_size=0, i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer="zeros",
                 h2h_bias_initializer="zeros", projection_size=None,
                 h2r_weight_initializer=None, dtype="float32", **kwargs):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, dtype, projection_size, h2r_weight_initializer,
                         **kwargs)

    def _step(self, F, i2h, h2h, state):
        # projection_size only (see _unrolled): the fused cell update, one op per step
        return unstack(F, F._rnn_lstm_cell(i2h, h2h, state[1]), 2, 0)


class GRU(_RNNLayer):
    __doc__ = "GRU layer; states [h].\n" + _INIT_DOC
    _gates = 3
    _cell_class = GRUCell
    _mode = "gru"

    def _step(self, F, i2h, h2h, state):
        return [gru_step(F, i2h, h2h, state[0], self._hidden_size)]
