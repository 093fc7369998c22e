"""The drivers of minigluon_ext's multi-threaded C kernels for host (NumPy) float32/float64
arrays: 2-D convolution a few samples at a time, by Winograd F(4x4, 3x3) or F(2x2, 3x3) for
3x3 stride-1 kernels (`HostWinograd`), else by columns (C*kh*kw, n*P) and one matmul per
chunk of samples, or per sample (`HostConv`); and 2-D max pooling (`host_max_pool`).
`on_host` says when they apply, `host_conv` which path a shape takes.

The module-level switches are knobs for the tests, which compare these kernels with the
NumPy paths of the operators.
"""
import math

import numpy as np

import minigluon_ext as ext

from .. import autograd
from ..threads import compute_threads
from .conv_depthwise import HostDepthwise
from .long_product import long_product, stacked_product
from .one_blas_thread import one_blas_thread

__all__ = ["on_host", "HostConv", "HostWinograd", "host_conv", "host_max_pool"]

# host arrays use the C kernels (tests turn this off to compare with the NumPy path)
_HOST_KERNELS = True
# host convolutions build the columns of this many bytes at a time, so they are still in
# cache when the matmul reads them
_CHUNK_BYTES = 4 << 20
# host weight gradients of fewer elements than this sum per-sample products (HostConv._small)
_SMALL_WEIGHT = 4096
# 3x3 stride-1 host convolutions use Winograd (tests turn this off): F(4x4, 3x3) when the
# output is at least this big on both sides, else F(2x2, 3x3)
_WINOGRAD = True
_WINOGRAD4_MIN = 8
# Winograd only from this many input channels: with fewer its transforms outweigh the
# products they save (d2l's CIFAR stem, 3 -> 64 at 32x32, batch 32, one thread: F(4x4)
# 11.6 ms forward, 23.0 a training pass; columns 6.9 and 11.9; docs/performance.md)
_WINOGRAD_MIN_CHANNELS = 16
# On one compute thread, columns of at most _SAMPLES_MAX_ROWS rows (C*kh*kw) over maps of
# at least _SAMPLES_MIN_POSITIONS outputs go one sample at a time: with so few rows the
# swap of the rows into NCHW costs half a matmul, and a sample's matmul writes its output
# in place (the CIFAR stem: 5.7 ms forward against 6.9). With 576 rows (ResNet's stride-2
# 3x3 layers) the swap is cheap, and per-sample matmuls took 1.0-1.9x the batch's CPU.
_SAMPLES_MAX_ROWS = 64
_SAMPLES_MIN_POSITIONS = 1024
# tests and benchmarks name a path here to force it: "columns", "samples" (the columns one
# sample at a time), "winograd" (tile by size), "winograd2", "winograd4" (None: by shape)
_PATH = None


def on_host(xp, win, *arrays):
    """True for 2-D windows over host arrays (None: absent) of one dtype the C kernels take."""
    arrays = [a for a in arrays if a is not None]
    return (_HOST_KERNELS and xp is np and len(win.kernel) == 2 and
            all(isinstance(a, np.ndarray) and a.dtype == arrays[0].dtype for a in arrays)
            and arrays[0].dtype in ext.LAYER_DTYPES)


class HostConv:
    """2-D convolution of host arrays with minigluon_ext's kernels, a chunk of samples at a time.

    A chunk of n samples has columns (C*kh*kw, n*P) (`ext.im2col`) and matmul rows
    (F, n*P); `ext.swap01` turns rows into the NCHW output and dy into rows, `ext.col2im`
    sums columns back onto the data gradient. The weight gradient adds the chunks' products.
    """

    def __init__(self, win, groups, channels, dtype, per_sample=False):
        self.win, self.groups, self.channels = win, groups, channels
        self.geometry = dict(kernel=win.kernel, stride=win.stride, pad=win.pad,
                             dilate=win.dilate)
        self.p = math.prod(win.out)
        per_sample_bytes = channels * math.prod(win.kernel) * self.p * np.dtype(dtype).itemsize
        self.step = 1 if per_sample else max(1, _CHUNK_BYTES // per_sample_bytes)

    def forward(self, x, w, bias=None):
        """The convolution of x (N, C, H, W) with w: (N, F, *out), plus bias."""
        x, f = np.ascontiguousarray(x), w.shape[0]
        out = np.empty((x.shape[0], f) + self.win.out, x.dtype)
        w3 = self._weights(w)
        # the weight gradient needs these columns again: keep them if a backward is coming
        # (building them twice cost a fifth of a LeNet step)
        self.cols = [] if autograd.is_recording() else None
        for a, b in self._chunks(x.shape[0]):
            cols = self._im2col(x[a:b])
            if self.cols is not None:
                self.cols.append((x, cols))
            if self._in_place(a, b):
                # one sample's rows are its NCHW output already: no swap
                rows = np.matmul(w3, cols, out=out[a].reshape(f, self.p))
                if bias is not None:
                    rows += bias[:, None]
                continue
            rows = w3 @ cols
            ext.swap01(rows.reshape(f, b - a, self.p), bias,
                       out=out[a:b].reshape(b - a, f, self.p))
        return out

    def backward(self, dy, x, w, need_x=True, need_w=True):
        """(gradient for x, gradient for w) of sum(dy * forward(x, w)); None where not needed."""
        dy = np.ascontiguousarray(dy, dtype=w.dtype)
        dx = np.empty((dy.shape[0], self.channels) + self.win.size, w.dtype) if need_x else None
        dw, w3, kept = None, self._weights(w), getattr(self, "cols", None)
        for k, (a, b) in enumerate(self._chunks(dy.shape[0])):
            rows = self._dy_rows(dy, a, b) if need_x or not self._small(w) else None
            if need_x:
                dcols = w3.swapaxes(-1, -2) @ rows
                ext.col2im(dcols.reshape(-1, dcols.shape[-1]), dx[a:b].shape, **self.geometry,
                           out=dx[a:b])
            if need_w:
                cols = kept[k][1] if kept and kept[k][0] is x else \
                    self._im2col(np.ascontiguousarray(x[a:b]))
                part = self._weight_part(dy[a:b], rows, cols)
                dw = part if dw is None else np.add(dw, part, out=dw)
        self.cols = None
        return dx, (dw.reshape(w.shape) if need_w else None)

    def _in_place(self, a, b):
        """True when the chunk [a, b) is one sample, whose output the matmul can write."""
        return b - a == 1 and self.groups == 1

    def _dy_rows(self, dy, a, b):
        """dy of the chunk [a, b) as matmul rows (F, n*P); one sample's dy already is."""
        if self._in_place(a, b):
            return dy[a].reshape(dy.shape[1], self.p)
        return self._rows(dy[a:b])

    def _small(self, w):
        # a tiny weight (LeNet's first layer): one matmul (F, n*P) @ (n*P, K) would run on
        # one core, as BLAS splits the output, not the sum; per-sample matmuls are faster
        return self.groups == 1 and w.size < _SMALL_WEIGHT

    def _weight_part(self, dy, rows, cols):
        """This chunk's weight gradient: rows @ columns^T."""
        if rows is not None and all(k == 1 for k in self.win.kernel):
            # a 1x1 layer's sum over positions is long and its result small: split the sum
            # over the threads (long_product.py); other windows are left as they were
            return long_product(rows, cols.swapaxes(-1, -2))
        if rows is not None:
            return rows @ cols.swapaxes(-1, -2)
        per_sample = cols.reshape(cols.shape[0], dy.shape[0], self.p).transpose(1, 2, 0)
        return (dy.reshape(dy.shape[0], dy.shape[1], self.p) @ per_sample).sum(axis=0)

    def _im2col(self, x):
        cols = ext.im2col(x, **self.geometry)
        return cols.reshape(self.groups, -1, cols.shape[1]) if self.groups > 1 else cols

    def _rows(self, y):
        rows = ext.swap01(y.reshape(y.shape[0], y.shape[1], -1))
        rows = rows.reshape(rows.shape[0], -1)
        return rows.reshape(self.groups, -1, rows.shape[1]) if self.groups > 1 else rows

    def _weights(self, w):
        w = np.ascontiguousarray(w)
        return w.reshape(self.groups, w.shape[0] // self.groups, -1) if self.groups > 1 \
            else w.reshape(w.shape[0], -1)

    def _chunks(self, n):
        return ((a, min(a + self.step, n)) for a in range(0, n, self.step))


# Winograd F(MxM, 3x3) weight transforms U = G g G^T, as kron(G, G) on flattened kernels
_WINOGRAD_G = {2: np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]]),
               4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                            [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])}
_WINOGRAD_GG = {m: np.kron(g, g) for m, g in _WINOGRAD_G.items()}


class HostWinograd(HostConv):
    """3x3 stride-1 convolution of host arrays by Winograd F(MxM, 3x3).

    M = 4 (4x fewer products than im2col) on outputs of at least _WINOGRAD4_MIN per side,
    else M = 2 (2.25x fewer). With P = (M+2)^2, per chunk of samples: input tiles V =
    ext.winograd_input (P, C, T), P matmuls M = U @ V with the transformed weight U
    (P, F, C), output ext.winograd_output. Backward takes dM = ext.winograd_output_adjoint(dy),
    dV = U^T @ dM back through ext.winograd_input_adjoint, and dU = dM @ V^T back through the
    weight transform.
    """

    def __init__(self, win, channels, dtype, tile=None):
        super().__init__(win, 1, channels, dtype)
        self.tile = tile or (4 if min(win.out) >= _WINOGRAD4_MIN else 2)
        th, tw = ext.winograd_tiles(*win.out, self.tile)
        planes = (self.tile + 2) ** 2 * channels * th * tw * np.dtype(dtype).itemsize
        self.step = max(1, _CHUNK_BYTES // planes)

    @staticmethod
    def applies(win, groups):
        return (win.kernel == (3, 3) and win.stride == (1, 1) and win.dilate == (1, 1) and
                groups == 1)

    def forward(self, x, w, bias=None):
        x, u = np.ascontiguousarray(x), self._transform(w)
        # backward reuses U, and the input tiles if a backward is coming (recomputing them
        # from x costs more than reading them back)
        self.u, self.tiles = (w, u), ([] if autograd.is_recording() else None)
        out = np.empty((x.shape[0], w.shape[0]) + self.win.out, x.dtype)
        for a, b in self._chunks(x.shape[0]):
            v = ext.winograd_input(x[a:b], self.win.pad, self.tile)
            if self.tiles is not None:
                self.tiles.append((x, v))
            ext.winograd_output(stacked_product(u, v), out[a:b].shape, bias, self.tile,
                                out=out[a:b])
        return out

    def backward(self, dy, x, w, need_x=True, need_w=True):
        kept = getattr(self, "u", None)
        u = kept[1] if kept is not None and kept[0] is w else self._transform(w)
        dy = np.ascontiguousarray(dy, dtype=w.dtype)
        dx = np.empty((dy.shape[0], self.channels) + self.win.size, w.dtype) if need_x else None
        du, kept = None, getattr(self, "tiles", None)
        for k, (a, b) in enumerate(self._chunks(dy.shape[0])):
            dm = ext.winograd_output_adjoint(dy[a:b], self.tile)
            if need_x:
                ext.winograd_input_adjoint(stacked_product(u.swapaxes(1, 2), dm), dx[a:b].shape,
                                           self.win.pad, self.tile, out=dx[a:b])
            if need_w:
                v = kept[k][1] if kept and kept[k][0] is x else \
                    ext.winograd_input(np.ascontiguousarray(x[a:b]), self.win.pad, self.tile)
                part = stacked_product(dm, v.swapaxes(1, 2))
                du = part if du is None else np.add(du, part, out=du)
        self.tiles = None
        return dx, (self._transform_grad(du) if need_w else None)

    def _transform(self, w):
        """U (P, F, C): U[(M+2)i + j, f, c] = (G w[f, c] G^T)[i, j], as one matmul."""
        f, c = w.shape[:2]
        w2 = np.ascontiguousarray(w).reshape(f * c, 9)
        # a 9-long sum: split over two BLAS threads it took 16x its one-thread time
        with one_blas_thread():
            return (_WINOGRAD_GG[self.tile].astype(w.dtype) @ w2.T).reshape(-1, f, c)

    def _transform_grad(self, du):
        """The gradient for w of sum(du * U(w)): G^T du[f, c] G, (F, C, 3, 3)."""
        p, f, c = du.shape
        gg = _WINOGRAD_GG[self.tile].astype(du.dtype)
        with one_blas_thread():
            return (du.reshape(p, f * c).T @ gg).reshape(f, c, 3, 3)


def host_conv(win, groups, channels, dtype):
    """The host convolution for this window: direct depthwise kernels where each channel is
    its own group, Winograd for 3x3 stride 1 from _WINOGRAD_MIN_CHANNELS channels, else
    columns (one sample at a time for few rows on one thread)."""
    if HostDepthwise.applies(win, groups, channels):
        return HostDepthwise(win)
    path = _PATH or _choose(win, groups, channels)
    if path == "samples":
        return HostConv(win, groups, channels, dtype, per_sample=True)
    if path.startswith("winograd") and HostWinograd.applies(win, groups):
        return HostWinograd(win, channels, dtype, tile=int(path[8:] or 0))
    if path != "columns":
        raise ValueError(f"conv_host._PATH={_PATH!r} does not apply to kernel {win.kernel} "
                         f"stride {win.stride} groups {groups}; help: set it to 'columns', "
                         "'samples' or None for this shape")
    return HostConv(win, groups, channels, dtype)


def _choose(win, groups, channels):
    """The path name for a shape, by the measurements quoted at the knobs above."""
    if _WINOGRAD and channels >= _WINOGRAD_MIN_CHANNELS and HostWinograd.applies(win, groups):
        return "winograd"
    rows = channels // groups * math.prod(win.kernel)
    if (groups == 1 and rows <= _SAMPLES_MAX_ROWS and compute_threads() == 1 and
            math.prod(win.out) >= _SAMPLES_MIN_POSITIONS):
        return "samples"
    return "columns"


def host_max_pool(data, win, convention):
    """2-D max pooling of a host array with minigluon_ext's kernels; argmax kept for backward."""
    x = np.ascontiguousarray(data)
    out, argmax = ext.max_pool2d(x, win.kernel, win.stride, win.pad, convention)
    return out, lambda dy: (ext.max_pool2d_backward(np.ascontiguousarray(dy, dtype=x.dtype),
                                                    argmax, x.shape[2:]),)
