"""LSTMPCell: an LSTM cell whose output (and recurrent state) is a linear projection of
its hidden state (Sak et al., 2014)."""
from ....base import MXNetError
from ...rnn.rnn_cell import HybridRecurrentCell, lstm_step

__all__ = ["LSTMPCell"]


class LSTMPCell(HybridRecurrentCell):
    r"""LSTM with projection: the gates read the input and the projected state r,

        i, f, g, o = split(W_i x + b_i + W_h r + b_h)     (gate order as LSTMCell's)
        c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
        h' = sigmoid(o) * tanh(c')
        r' = W_r h'                                       (no bias)

    and the output is r'. States [r (N, projection_size), c (N, hidden_size)].

    Parameters
    ----------
    hidden_size : int
        Width of the cell state c.
    projection_size : int
        Width of the output r.
    i2h_weight_initializer, h2h_weight_initializer, h2r_weight_initializer,
    i2h_bias_initializer, h2h_bias_initializer : Initializer or str
    input_size : int, default 0 (inferred from the first input)

    Parameters are i2h_weight (4H, C), h2h_weight (4H, P), h2r_weight (P, H), i2h_bias and
    h2h_bias (4H,), as in the projected fused LSTM layer (gluon.rnn.LSTM(projection_size=)).
    """

    def __init__(self, hidden_size, projection_size, i2h_weight_initializer=None,
                 h2h_weight_initializer=None, h2r_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", input_size=0,
                 prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        for name, size in (("hidden_size", hidden_size), ("projection_size", projection_size)):
            if not isinstance(size, int) or size < 1:
                raise MXNetError(f"LSTMPCell: {name} must be a positive int, got {size!r}")
        self._hidden_size, self._projection_size = hidden_size, projection_size
        rows = 4 * hidden_size
        for name, shape, init in (
                ("i2h_weight", (rows, input_size), i2h_weight_initializer),
                ("h2h_weight", (rows, projection_size), h2h_weight_initializer),
                ("h2r_weight", (projection_size, hidden_size), h2r_weight_initializer),
                ("i2h_bias", (rows,), i2h_bias_initializer),
                ("h2h_bias", (rows,), h2h_bias_initializer)):
            setattr(self, name, self.params.get(name, shape=shape, init=init,
                                                allow_deferred_init=True))

    def state_info(self, batch_size=0):
        return [{"shape": (batch_size, self._projection_size), "__layout__": "NC"},
                {"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def _alias(self):
        return "lstmp"

    def infer_shape(self, x, *args):
        self.i2h_weight.shape = (4 * self._hidden_size, x.shape[-1])

    def __repr__(self):
        width = self.i2h_weight.shape[1] or None
        return f"LSTMPCell({width} -> {self._hidden_size} -> {self._projection_size})"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, h2r_weight, i2h_bias,
                       h2h_bias):
        rows = 4 * self._hidden_size
        i2h = F.FullyConnected(inputs, i2h_weight, i2h_bias, num_hidden=rows)
        h2h = F.FullyConnected(states[0], h2h_weight, h2h_bias, num_hidden=rows)
        hidden, next_c = lstm_step(F, i2h, h2h, states[1], self._hidden_size)
        next_r = F.FullyConnected(hidden, h2r_weight, num_hidden=self._projection_size,
                                  no_bias=True, name=self._op_name("out"))
        return next_r, [next_r, next_c]
