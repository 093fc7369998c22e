"""`_rnn_sequence`: one direction of one recurrent layer over a whole sequence, as ONE
operator, so that the tape holds one node per layer and direction instead of a dozen per
time step (gluon.rnn.RNN, LSTM and GRU run through it, hybridized or not).

Forward: the input projections of all T steps are one matmul (T*N, C) x (C, G*H); then
per step one matmul of the previous state by the recurrent weight and the fused cell
update (rnn_kernels: C kernels for host float32/float64). Backward runs the steps in
reverse, one matmul per step for the state's gradient, and gets the weights' gradients
with one matmul each over all steps at the end. The per-step loops run the batch rows in
parts, one thread each (rnn_row_parts.py); the products over all steps use every thread.
An LSTM on host floats runs a part's whole loop in one C call (minigluon_ext's
lstm_sequence_*, see NATIVE_LOOP); the Python loop below serves the other cases.

Gates as in MXNet's cells (G = 4 for lstm: input, forget, candidate, output; 3 for gru:
reset, update, new; 1 for rnn_tanh, rnn_relu).
"""
import contextlib

import numpy as np

import minigluon_ext as ext

from ..base import DTypeError, MXNetError, ShapeError
from . import rnn_kernels, rnn_row_parts
from .one_blas_thread import one_blas_thread
from .registry import register

MODES = ("lstm", "gru", "rnn_tanh", "rnn_relu")

# an LSTM on host float32/float64 runs each row part's whole recurrence in C
# (ext.lstm_sequence_forward/backward) where the loaded BLAS's gemm was found; tests turn
# this off to compare with the per-step loop below
NATIVE_LOOP = True


class _LSTMSteps:
    """LSTM: h2h's bias joins the input projection; the cell state rides along."""

    gates, carries_cell, bias_per_step, own_h2h_grad = 4, True, False, False

    def __init__(self, kernels, xp):
        self.k, self.xp = kernels, xp

    def step(self, px, ph, h, c, nthreads=None):
        out, act = self.k.lstm_cell_forward(px, ph, c, nthreads)
        return out[0], out[1], (act, c, out)

    def step_backward(self, dh, dc, cache, nthreads=None):
        act, c, out = cache
        da, dc_prev = self.k.lstm_cell_backward(self.xp.stack([dh, dc]), act, c, out,
                                                nthreads)
        return da, da, None, dc_prev


class _GRUSteps:
    """GRU: h2h's bias stays in the recurrent projection (the reset gate scales it)."""

    gates, carries_cell, bias_per_step, own_h2h_grad = 3, False, True, True

    def __init__(self, kernels, xp):
        self.k = kernels

    def step(self, px, ph, h, c, nthreads=None):
        out, act = self.k.gru_cell_forward(px, ph, h, nthreads)
        return out, None, (act, h)

    def step_backward(self, dh, dc, cache, nthreads=None):
        act, h = cache
        dpx, dph, dh_direct = self.k.gru_cell_backward(dh, act, h, nthreads)
        return dpx, dph, dh_direct, None


class _ElmanSteps:
    """rnn_tanh / rnn_relu: h' = activation(px + ph), two array operations a step."""

    gates, carries_cell, bias_per_step, own_h2h_grad = 1, False, False, False

    def __init__(self, xp, relu):
        self.xp, self.relu = xp, relu

    def step(self, px, ph, h, c, nthreads=None):
        a = px + ph
        h_new = self.xp.maximum(a, 0) if self.relu else self.xp.tanh(a)
        return h_new, None, h_new

    def step_backward(self, dh, dc, h_new, nthreads=None):
        da = dh * (h_new > 0) if self.relu else dh * (1 - h_new * h_new)
        return da, da, None, None


def steps_for(mode, xp, arrays):
    """The per-step cell of `mode`, on the C kernels when `arrays` are host floats."""
    if mode == "lstm":
        return _LSTMSteps(rnn_kernels.kernels_for(xp, *arrays), xp)
    if mode == "gru":
        return _GRUSteps(rnn_kernels.kernels_for(xp, *arrays), xp)
    return _ElmanSteps(xp, mode == "rnn_relu")


def _check(mode, data, wx, wh, bx, bh, h0, c0):
    fn = "_rnn_sequence"
    if mode not in MODES:
        raise MXNetError(f"{fn}: mode must be one of {MODES}, got {mode!r}")
    if data.ndim != 3 or data.shape[0] < 1:
        raise ShapeError(f"{fn}: data must be (T, N, C) with T >= 1, got shape {data.shape}")
    gates = {"lstm": 4, "gru": 3}.get(mode, 1)
    if wh.ndim != 2 or wh.shape[0] != gates * wh.shape[1]:
        raise ShapeError(f"{fn}: h2h_weight has shape {tuple(wh.shape)}; {mode} needs "
                         f"({gates} * H, H) for hidden size H")
    (_, n, width), hidden = data.shape, wh.shape[1]
    rows = gates * hidden
    want = {"i2h_weight": (rows, width), "h2h_weight": (rows, hidden), "i2h_bias": (rows,),
            "h2h_bias": (rows,), "h0": (n, hidden), "c0": (n, hidden)}
    got = {"i2h_weight": wx, "h2h_weight": wh, "i2h_bias": bx, "h2h_bias": bh, "h0": h0,
           "c0": c0}
    for name, a in got.items():
        if a is not None and tuple(a.shape) != want[name]:
            raise ShapeError(f"{fn}: {name} has shape {tuple(a.shape)}; {mode} with hidden "
                             f"size {hidden} over data {data.shape} (T, N, C) needs "
                             f"{want[name]}")
        if a is not None and a.dtype != data.dtype:
            raise DTypeError(f"{fn}: {name} has dtype {a.dtype} but data has {data.dtype}; "
                             "cast the layer (layer.cast) or the data to one dtype")
    if c0 is not None and mode != "lstm":
        raise MXNetError(f"{fn}: c0 is an LSTM's cell state; {mode} takes h0 only")


@register("_rnn_sequence", inputs=("data", "i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias",
                                   "h0", "c0"))
def rnn_sequence(xp, data, i2h_weight, h2h_weight, i2h_bias, h2h_bias, h0=None, c0=None,
                 mode="lstm", reverse=False):
    """One direction of one recurrent layer over data (T, N, C), from the states h0 (and
    c0 for lstm), (N, H), zeros when left out. `reverse` reads the sequence from its last
    step to its first (a bidirectional layer's right-to-left half); outputs keep the
    data's time order.

    Returns (T, N, H): the output of every step; for lstm (T + 1, N, H), the last row
    being the final cell state. The final h is the output of the last step read (row
    T - 1, or 0 when reversed).

    Example: ``y = nd._rnn_sequence(x, wx, wh, bx, bh, h0, c0, mode='lstm')[:-1]``.
    """
    _check(mode, data, i2h_weight, h2h_weight, i2h_bias, h2h_bias, h0, c0)
    steps = steps_for(mode, xp, [data, i2h_weight, h2h_weight])
    hidden = h2h_weight.shape[1]
    shape = (data.shape[1], hidden)
    h0_, c0_ = (a if a is not None else xp.zeros(shape, data.dtype) for a in (h0, c0))
    run = SequenceRun(xp, steps, data, i2h_weight, h2h_weight, i2h_bias, h2h_bias, reverse)
    out = run.forward(xp.ascontiguousarray(h0_), xp.ascontiguousarray(c0_))

    def backward(dout):
        dx, dwx, dwh, dbx, dbh, dh0, dc0 = run.backward(dout.astype(data.dtype, copy=False))
        return (dx, dwx, dwh, dbx, dbh, dh0 if h0 is not None else None,
                dc0 if c0 is not None else None)
    return out, backward


class SequenceRun:
    """One direction of one layer: the forward of one call and what its backward needs
    (nd.RNN runs its layers through it too). `steps` is `steps_for(mode, xp, arrays)`."""

    def __init__(self, xp, steps, x, wx, wh, bx, bh, reverse):
        self.xp, self.steps, self.x, self.wx, self.wh, self.bh = xp, steps, x, wx, wh, bh
        t = x.shape[0]
        self.order = range(t - 1, -1, -1) if reverse else range(t)
        self.reverse = reverse
        flat = x.reshape(-1, x.shape[2]) @ wx.T
        flat += bx if steps.bias_per_step else bx + bh
        self.px = flat.reshape(t, x.shape[1], -1)

    def forward(self, h0, c0):
        xp, steps, t = self.xp, self.steps, self.x.shape[0]
        self.h0 = h0
        self.out = xp.empty((t + steps.carries_cell,) + h0.shape, h0.dtype)
        self.parts = rnn_row_parts.row_parts(xp, h0.shape[0], h0.shape[1], steps.gates)
        self.native = self._runs_native()
        if self.native:
            return self._forward_native(c0)
        with self._step_threads():
            self.caches = rnn_row_parts.run_parts(
                lambda k, lo, hi: self._forward_rows(lo, hi, h0[lo:hi], c0[lo:hi]),
                self.parts)
        return self.out

    def _forward_rows(self, lo, hi, h, c):
        """Rows lo:hi through every step; their cell state's last value goes to out[T]."""
        steps, threads = self.steps, self._cell_threads()
        caches = [None] * self.x.shape[0]
        for i in self.order:
            ph = self._h2h(h)
            if steps.bias_per_step:
                ph += self.bh
            h, c, caches[i] = steps.step(self.px[i, lo:hi], ph, h, c, threads)
            self.out[i, lo:hi] = h
        if steps.carries_cell:
            self.out[-1, lo:hi] = c
        return caches

    def _runs_native(self):
        """True where the LSTM's whole recurrence runs in C, a row part per call."""
        return NATIVE_LOOP and isinstance(self.steps, _LSTMSteps) and \
            self.steps.k is rnn_kernels.HOST and ext.lstm_sequence_native(self.h0.dtype)

    def _forward_native(self, c0):
        xp = self.xp
        self.c0, self.wh = c0, xp.ascontiguousarray(self.wh)
        self.act = xp.empty_like(self.px)
        self.cseq = xp.empty((self.x.shape[0],) + c0.shape, c0.dtype)
        with self._step_threads():
            rnn_row_parts.run_parts(lambda k, lo, hi: ext.lstm_sequence_forward(
                self.px, self.wh, self.h0, c0, self.out, self.act, self.cseq, (lo, hi),
                self.reverse), self.parts)
        return self.out

    def _backward_native(self, dout):
        xp = self.xp
        dpx, dh0, dc0 = xp.empty_like(self.px), xp.empty_like(self.h0), xp.empty_like(self.c0)
        dout = xp.ascontiguousarray(dout)
        with self._step_threads():
            rnn_row_parts.run_parts(lambda k, lo, hi: ext.lstm_sequence_backward(
                self.act, self.wh, self.c0, self.cseq, dout, dpx, dh0, dc0, (lo, hi),
                self.reverse), self.parts)
        return self._weight_grads(dpx, dpx) + (dh0, dc0)

    def backward(self, dout):
        if self.native:
            return self._backward_native(dout)
        xp, steps = self.xp, self.steps
        dpx = xp.empty_like(self.px)
        # a GRU's reset gate scales h2h's new part: its gradient differs from i2h's
        dph = xp.empty_like(self.px) if steps.own_h2h_grad else dpx
        dh0 = xp.empty_like(self.h0)
        dc0 = xp.empty_like(self.h0) if steps.carries_cell else None
        self.whT = np.ascontiguousarray(self.wh.T) if xp is np else None
        with self._step_threads():
            rnn_row_parts.run_parts(
                lambda k, lo, hi: self._backward_rows(k, lo, hi, dout, dpx, dph, dh0, dc0),
                self.parts)
        return self._weight_grads(dpx, dph) + (dh0, dc0)

    def _backward_rows(self, part, lo, hi, dout, dpx, dph, dh0, dc0):
        """Rows lo:hi back through every step: their rows of dpx (and dph), dh0, dc0."""
        xp, steps, threads, caches = self.xp, self.steps, self._cell_threads(), self.caches[part]
        dh = xp.zeros_like(self.h0[lo:hi])
        dc = xp.ascontiguousarray(dout[-1, lo:hi]) if steps.carries_cell else None
        for i in reversed(self.order):
            dpx_i, dph_i, dh_direct, dc = steps.step_backward(dout[i, lo:hi] + dh, dc,
                                                              caches[i], threads)
            dpx[i, lo:hi] = dpx_i
            if dph is not dpx:
                dph[i, lo:hi] = dph_i
            dh = self._h2h_grad(dph_i)
            if dh_direct is not None:
                dh += dh_direct
        dh0[lo:hi] = dh
        if dc0 is not None:
            dc0[lo:hi] = dc

    def _h2h(self, h):
        """h @ wh.T, (rows, G*H). On the host as (wh @ h.T).T: OpenBLAS (SkylakeX kernels,
        one thread) took 262 us for the language model's 32 rows that way, copy included,
        against 416 us for h @ wh.T (CPU time, 16 rows: 166 against 313)."""
        if self.xp is not np:
            return h @ self.wh.T
        return np.ascontiguousarray((self.wh @ h.T).T)

    def _h2h_grad(self, dph):
        """dph @ wh, (rows, H). On the host as (wh.T @ dph.T).T with wh.T made contiguous
        once: 252 us against 301 for 32 rows (16 rows: 163 against 202), as for _h2h."""
        if self.xp is not np:
            return dph @ self.wh
        return np.ascontiguousarray((self.whT @ dph.T).T)

    def _cell_threads(self):
        """The cell kernels' threads: one where the rows run in parts (each part has its
        thread already), else the kernels' own choice."""
        return 1 if len(self.parts) > 1 else None

    def _step_threads(self):
        """The per-step products on one BLAS thread (see one_blas_thread.py); the
        projections of all steps at once keep every thread."""
        return one_blas_thread() if self.xp is np else contextlib.nullcontext()

    def _weight_grads(self, dpx, dph):
        """(dx, dwx, dwh, dbx, dbh): one matmul each over all steps."""
        xp, x, ys = self.xp, self.x, self.out[:self.x.shape[0]]
        # the state each step read: h0, then the outputs before it in reading order
        parts = [ys[1:], self.h0[None]] if self.reverse else [self.h0[None], ys[:-1]]
        prev = xp.concatenate(parts, axis=0).reshape(-1, self.h0.shape[1])
        gx, gh = dpx.reshape(-1, dpx.shape[2]), dph.reshape(-1, dph.shape[2])
        dx = (gx @ self.wx).reshape(x.shape)
        dbx = gx.sum(axis=0)
        # lstm and rnn_*: h2h's bias joined the input projection, its gradient is i2h's
        dbh = gh.sum(axis=0) if dph is not dpx else dbx.copy()
        return dx, gx.T @ x.reshape(-1, x.shape[2]), gh.T @ prev, dbx, dbh
