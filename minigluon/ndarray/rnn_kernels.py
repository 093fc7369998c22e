"""The cell updates of one recurrent step, fused: LSTM and GRU, for the cell operators
(`_rnn_lstm_cell`, `_rnn_gru_cell` in ops_rnn.py) and the whole-sequence operator
(`_rnn_sequence` in ops_rnn_sequence.py).

Host float32/float64 arrays run them in minigluon_ext's C kernels (src/lstm.c, src/gru.c);
any other array (CuPy, float16) runs the same formulas written for its array module.
`kernels_for(xp, *arrays)` picks one of the two; both offer the same methods, each with
an optional `nthreads` (the C kernels' thread count; None: the free cores for big work):

    lstm_cell_forward(i2h, h2h, c) -> (out (2, N, H) = [h', c'], act (N, 4H))
    lstm_cell_backward(dout (2, N, H), act, c, out) -> (da (N, 4H), dc (N, H))
    gru_cell_forward(i2h, h2h, h) -> (out (N, H) = h', act (N, 4H) = [r, z, n, h2h_n])
    gru_cell_backward(dout (N, H), act, h) -> (di2h (N, 3H), dh2h (N, 3H), dh (N, H))
"""
import numpy as np

import minigluon_ext as ext

# host float arrays run the cell updates in minigluon_ext (tests turn this off to check
# the formulas on the host)
HOST_KERNELS = True


def sigmoid(xp, x):
    return 1 / (1 + xp.exp(-x))


def kernels_for(xp, *arrays):
    """The C kernels when every array is a host array of one layer dtype, else formulas."""
    first = arrays[0]
    if HOST_KERNELS and xp is np and first.dtype in ext.LAYER_DTYPES and \
            all(isinstance(a, np.ndarray) and a.dtype == first.dtype for a in arrays):
        return HOST
    return Formulas(xp)


class _Host:
    """The cell updates of host float32/float64 arrays, in minigluon_ext."""

    # methods, not ext's functions bound at import: minigluon_ext imports minigluon first
    contiguous = staticmethod(np.ascontiguousarray)

    def lstm_cell_forward(self, i2h, h2h, c, nthreads=None):
        return ext.lstm_cell_forward(i2h, h2h, c, nthreads)

    def lstm_cell_backward(self, dout, act, c, out, nthreads=None):
        return ext.lstm_cell_backward(dout, act, c, out, nthreads)

    def gru_cell_forward(self, i2h, h2h, h, nthreads=None):
        return ext.gru_cell_forward(i2h, h2h, h, nthreads)

    def gru_cell_backward(self, dout, act, h, nthreads=None):
        return ext.gru_cell_backward(dout, act, h, nthreads)


HOST = _Host()


class Formulas:
    """The cell updates written for any array module (CuPy, float16), as ext computes them."""

    def __init__(self, xp):
        self.xp = xp
        self.contiguous = xp.ascontiguousarray

    def lstm_cell_forward(self, i2h, h2h, c, nthreads=None):
        hd, xp = c.shape[1], self.xp
        pre = i2h + h2h
        act = xp.concatenate([sigmoid(xp, pre[:, :2 * hd]), xp.tanh(pre[:, 2 * hd:3 * hd]),
                              sigmoid(xp, pre[:, 3 * hd:])], axis=1)
        i, f, g, o = (act[:, k * hd:(k + 1) * hd] for k in range(4))
        c_next = f * c + i * g
        return xp.stack([o * xp.tanh(c_next), c_next]), act

    def lstm_cell_backward(self, dout, act, c, out, nthreads=None):
        hd = c.shape[1]
        i, f, g, o = (act[:, k * hd:(k + 1) * hd] for k in range(4))
        t = self.xp.tanh(out[1])
        dct = dout[1] + dout[0] * o * (1 - t * t)
        da = self.xp.concatenate([dct * g * i * (1 - i), dct * c * f * (1 - f),
                                  dct * i * (1 - g * g), dout[0] * t * o * (1 - o)], axis=1)
        return da, dct * f

    def gru_cell_forward(self, i2h, h2h, h, nthreads=None):
        hd, xp = h.shape[1], self.xp
        rz = sigmoid(xp, i2h[:, :2 * hd] + h2h[:, :2 * hd])
        r, z, hn = rz[:, :hd], rz[:, hd:], h2h[:, 2 * hd:]
        n = xp.tanh(i2h[:, 2 * hd:] + r * hn)
        return (1 - z) * n + z * h, xp.concatenate([rz, n, hn], axis=1)

    def gru_cell_backward(self, dout, act, h, nthreads=None):
        hd, xp = h.shape[1], self.xp
        r, z, n, hn = (act[:, k * hd:(k + 1) * hd] for k in range(4))
        dn = dout * (1 - z) * (1 - n * n)
        dr = dn * hn * r * (1 - r)
        dz = dout * (h - n) * z * (1 - z)
        return (xp.concatenate([dr, dz, dn], axis=1), xp.concatenate([dr, dz, dn * r], axis=1),
                dout * z)
