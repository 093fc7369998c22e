"""2-D convolution of device (CuPy) arrays on minigluon_ext's CUDA kernels (`DeviceConv`);
Deconvolution runs it the other way (its forward is the data gradient, its backward the
forward and the weight gradient).

Per chunk of samples: columns (C*kh*kw, n*P) by `kernels.im2col`, one matmul with the
weight (cuBLAS through the array module's matmul; groups as a batched matmul over the
groups' row blocks), and one transposing copy of the (F, n, P) rows into the NCHW output
(+ bias). Backward: dy to rows by one transposing copy, W^T @ rows summed back onto the
image by `kernels.col2im` (a gather per image element, no atomics), and rows @ columns^T
for the weight, the columns rebuilt rather than kept from the forward pass: next to the
matmul, im2col costs little on a GPU, and a deep net's columns would not fit in its memory.

Chunks bound the column buffer (CHUNK_BYTES; one buffer per call, reused by every chunk)
and the kernels' int indices; a batch that fits runs as one chunk, so the Python loop runs
once per layer, not once per sample. The functions take the kernels and the array module,
so tests run this very path on NumPy arrays (device_kernels._STAND_IN).
"""
import math

import numpy as np

__all__ = ["DeviceConv", "CHUNK_BYTES"]

# the columns of one chunk of samples take at most this many bytes (a bigger sample runs
# alone); cuBLAS is as fast on a 256 MiB operand as on the whole batch
CHUNK_BYTES = 256 << 20
# the kernels index a row of columns (n*P values) with a C int
_INT_MAX = np.iinfo(np.int32).max


class DeviceConv:
    """2-D convolution with one window and group count, on `kernels` over arrays of `xp`."""

    def __init__(self, kernels, xp, win, groups, channels, dtype):
        self.kernels, self.xp, self.win, self.groups = kernels, xp, win, groups
        self.channels = channels
        self.geometry = dict(kernel=win.kernel, stride=win.stride, pad=win.pad,
                             dilate=win.dilate)
        self.p, self.k = math.prod(win.out), channels * math.prod(win.kernel)
        per_sample = self.k * self.p * np.dtype(dtype).itemsize
        self.step = max(1, min(CHUNK_BYTES // per_sample, _INT_MAX // self.p))

    def forward(self, x, w, bias=None):
        """The convolution of x (N, C, H, W) with w (F, C/groups, kh, kw): (N, F, *out)."""
        xp, x = self.xp, self.xp.ascontiguousarray(x)
        n, f = x.shape[0], w.shape[0]
        out = xp.empty((n, f) + self.win.out, x.dtype)
        w3, buf = self._weights(w), self._buffer(n, x.dtype)
        for a, b in self._chunks(n):
            rows = xp.matmul(w3, self._im2col(x[a:b], buf))           # (g, F/g, m*P)
            self._to_output(rows.reshape(f, b - a, self.p), bias, out[a:b])
        return out

    def backward(self, dy, x, w, need_x=True, need_w=True):
        """(gradient for x, gradient for w) of sum(dy * forward(x, w)); None where not needed
        (x may then be None: Deconvolution's forward is this gradient for x)."""
        xp = self.xp
        dy, n = xp.ascontiguousarray(dy, dtype=w.dtype), dy.shape[0]
        x = xp.ascontiguousarray(x) if need_w else None
        dx = xp.empty((n, self.channels) + self.win.size, w.dtype) if need_x else None
        dw, w3, buf = None, self._weights(w), self._buffer(n, w.dtype)
        for a, b in self._chunks(n):
            rows = self._rows(dy[a:b])
            if need_x:
                dcols = xp.matmul(w3.swapaxes(-1, -2), rows, out=self._view(buf, b - a))
                self.kernels.col2im(dcols.reshape(self.k, -1), dx[a:b].shape, **self.geometry,
                                    out=dx[a:b])
            if need_w:
                part = xp.matmul(rows, self._im2col(x[a:b], buf).swapaxes(-1, -2))
                dw = part if dw is None else xp.add(dw, part, out=dw)
        return dx, (dw.reshape(w.shape) if need_w else None)

    def _im2col(self, x, buf):
        """Columns of a chunk in the buffer, as (groups, K/groups, m*P)."""
        cols = self.kernels.im2col(x, **self.geometry,
                                   out=self._view(buf, x.shape[0]).reshape(self.k, -1))
        return cols.reshape(self.groups, self.k // self.groups, -1)

    def _to_output(self, rows, bias, out):
        """rows (F, m, P) into out (m, F, *out) + bias: one transposing copy."""
        dst, src = out.reshape(out.shape[0], out.shape[1], self.p), rows.swapaxes(0, 1)
        if bias is None:
            dst[...] = src
        else:
            self.xp.add(src, bias.reshape(1, -1, 1), out=dst)

    def _rows(self, dy):
        """dy (m, F, *out) as matmul rows (groups, F/groups, m*P): one transposing copy."""
        m, f = dy.shape[:2]
        rows = self.xp.ascontiguousarray(dy.reshape(m, f, self.p).swapaxes(0, 1))
        return rows.reshape(self.groups, f // self.groups, m * self.p)

    def _weights(self, w):
        w = self.xp.ascontiguousarray(w)
        return w.reshape(self.groups, w.shape[0] // self.groups, -1)

    def _buffer(self, n, dtype):
        """One flat column buffer for the biggest chunk, reused by every chunk."""
        return self.xp.empty(self.k * min(n, self.step) * self.p, dtype)

    def _view(self, buf, m):
        """The buffer's first m samples' worth as (groups, K/groups, m*P), contiguous."""
        return buf[:self.k * m * self.p].reshape(self.groups, self.k // self.groups, m * self.p)

    def _chunks(self, n):
        return ((a, min(a + self.step, n)) for a in range(0, n, self.step))
