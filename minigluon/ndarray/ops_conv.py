"""Convolution, Deconvolution and Pooling on channel-first data: NCW, NCHW and NCDHW.

Convolution is im2col plus one batched matmul. On host (NumPy) float32/float64 arrays, 2-D
convolution and max pooling run on minigluon_ext's multi-threaded C kernels, a few samples
at a time: Winograd F(4x4, 3x3) or F(2x2, 3x3) for 3x3 stride-1 kernels (`_HostWinograd`),
else columns (C*kh*kw, n*P) and one matmul per chunk (`_HostConv`); `_host_max_pool`.
Elsewhere (CuPy, 1-D and 3-D, float16) the column matrix comes in one of two layouts
(`_Columns`): batch-outer columns (N, K, P) give NCHW outputs straight from the matmul;
batch-inner columns (K, P*N) keep rows long and contiguous, which makes im2col and col2im
fast on small feature maps at the price of transposing inputs and outputs. Deconvolution is
the adjoint of Convolution and reuses the same pieces. Pooling is separable: it pools one
spatial axis at a time (`_AxisPool`).

Out of scope: channel-last layouts (transpose to channel-first first), 'lp' pooling and the
'same' pooling convention.
"""
import math

import numpy as np

import minigluon_ext as ext

from .. import autograd
from ..base import MXNetError, ShapeError
from .registry import register

_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
# below this output row length, batch-inner columns win (measured on LeNet-sized layers)
_SHORT_ROW = 16
# host arrays use the C kernels (tests turn this off to compare with the NumPy path)
_HOST_KERNELS = True
# host convolutions build the columns of this many bytes at a time, so they are still in
# cache when the matmul reads them
_CHUNK_BYTES = 4 << 20
# host weight gradients of fewer elements than this sum per-sample products (_HostConv._small)
_SMALL_WEIGHT = 4096
# 3x3 stride-1 host convolutions use Winograd (tests turn this off): F(4x4, 3x3) when the
# output is at least this big on both sides, else F(2x2, 3x3)
_WINOGRAD = True
_WINOGRAD4_MIN = 8


# ---- attributes and geometry -------------------------------------------------------------
def _per_axis(op, name, value, n, default):
    """Expand an MXNet shape attribute (tuple, int or empty) to one int per spatial axis."""
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0):
        return (default,) * n
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ShapeError(f"{op}: {name}={value} has {len(value)} entries but the operator "
                         f"works on {n} spatial axes; give one per axis")
    return value


def _kernel(op, kernel):
    kernel = (kernel,) if isinstance(kernel, (int, np.integer)) else tuple(kernel or ())
    if not kernel or min(kernel) < 1:
        raise ShapeError(f"{op}: kernel must be a tuple of positive sizes, one per spatial "
                         f"axis, got {kernel!r}")
    return tuple(int(k) for k in kernel)


def _check_layout(op, layout, data, n):
    if n not in _LAYOUTS:
        raise ShapeError(f"{op}: kernel must have 1, 2 or 3 entries, got {n}")
    if data.ndim != n + 2:
        raise ShapeError(f"{op}: a {n}-D kernel needs {_LAYOUTS[n]} data with {n + 2} axes, "
                         f"got data of shape {data.shape}")
    if layout not in (None, _LAYOUTS[n]):
        raise MXNetError(f"{op}: layout {layout!r} is not supported, only {_LAYOUTS[n]}; "
                         "help: transpose the data to channel-first with nd.transpose")


class _Window:
    """A sliding window over a padded grid: kernel, stride, dilation and padding per axis.

    `size` is the unpadded grid, `out` the number of window positions along each axis.
    """

    def __init__(self, kernel, stride, dilate, pad, size, out):
        self.kernel, self.stride, self.dilate = kernel, stride, dilate
        self.pad, self.size, self.out = pad, size, out
        self.padded = tuple(n + 2 * p for n, p in zip(size, pad))

    @classmethod
    def sliding(cls, op, kernel, stride, dilate, pad, size):
        """The window of a convolution over `size`; raises if the kernel does not fit."""
        if min(stride) < 1 or min(dilate) < 1 or min(pad) < 0:
            raise ShapeError(f"{op}: stride {stride} and dilate {dilate} must be positive and "
                             f"pad {pad} non-negative")
        out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                    for n, k, s, d, p in zip(size, kernel, stride, dilate, pad))
        if min(out) < 1:
            raise ShapeError(f"{op}: kernel {kernel} (dilate {dilate}) does not fit input of "
                             f"spatial shape {size} padded by {pad}")
        return cls(kernel, stride, dilate, pad, size, out)

    def slices(self, offset):
        """Per-axis slices of the padded grid that kernel tap `offset` reads."""
        return tuple(slice(t * d, t * d + s * (o - 1) + 1, s) for t, d, s, o in
                     zip(offset, self.dilate, self.stride, self.out))

    def taps(self):
        return np.ndindex(*self.kernel)

    def crop(self):
        return tuple(slice(p, p + n) for p, n in zip(self.pad, self.size))


# ---- im2col / col2im -----------------------------------------------------------------------
class _Columns:
    """im2col and col2im for one window and group count, batch axis outermost or innermost.

    The "grid" is the padded input: (N, C, *padded) batch-outer, (C, *padded, N) inner.
    Matmul operands ("rows") are (N, g, Fg, P) batch-outer and (g, Fg, P*N) batch-inner.
    """

    def __init__(self, xp, win, groups, batch, channels, inner):
        self.xp, self.win, self.groups, self.batch, self.inner = xp, win, groups, batch, inner
        self.channels, self.nsp = channels, len(win.kernel)

    def to_grid(self, x):
        """Pad (and for batch-inner, transpose) NC* data into a fresh contiguous grid."""
        xp, win = self.xp, self.win
        src = xp.moveaxis(x, 0, -1) if self.inner else x
        if not any(win.pad):
            return xp.ascontiguousarray(src)
        grid = xp.zeros(self._grid_shape(x.shape[1]), dtype=x.dtype)
        grid[self._spatial(win.crop())] = src
        return grid

    def from_grid(self, grid):
        """The unpadded NC* array of a grid (a contiguous copy)."""
        inner = grid[self._spatial(self.win.crop())]
        if self.inner:
            inner = self.xp.moveaxis(inner, -1, 0)
        return self.xp.ascontiguousarray(inner)

    def correlate(self, grid, w):
        """W @ im2col(grid) in the rows layout, for a weight (F, C/g, *kernel)."""
        return self._weights(w) @ self.im2col(grid)

    def correlate_transposed(self, rows, w, dtype):
        """col2im(W^T @ rows): the adjoint of `correlate`, as a fresh grid."""
        return self.col2im(self._weights(w).swapaxes(-1, -2) @ rows, dtype)

    def weight_grad(self, rows, grid, w):
        """The gradient for w of sum(rows * correlate(grid, w)).

        The columns are rebuilt here rather than kept from the forward pass: that is cheap,
        and holding megabytes per layer until backward costs more (in page faults) than it
        saves.
        """
        cols = self.im2col(grid)
        prod = rows @ cols.swapaxes(-1, -2)
        return (prod if self.inner else prod.sum(axis=0)).reshape(w.shape)

    def im2col(self, grid):
        """Columns (N, g, Kg, P) or (g, Kg, P*N): one row per input channel and kernel tap."""
        win, item, kernel = self.win, grid.strides, self.win.kernel
        sp = item[-self.nsp - 1:-1] if self.inner else item[2:]
        taps = tuple(d * s for d, s in zip(win.dilate, sp))
        steps = tuple(st * s for st, s in zip(win.stride, sp))
        if self.inner:
            shape = grid.shape[:1] + kernel + win.out + grid.shape[-1:]
            strides = item[:1] + taps + steps + item[-1:]
        else:
            shape = grid.shape[:2] + kernel + win.out
            strides = item[:2] + taps + steps
        view = self.xp.lib.stride_tricks.as_strided(grid, shape, strides)
        k = self.channels // self.groups * math.prod(kernel)
        if self.inner:
            return view.reshape(self.groups, k, -1)
        return view.reshape(self.batch, self.groups, k, math.prod(win.out))

    def col2im(self, cols, dtype):
        """Sum columns onto a zero grid: the adjoint of im2col."""
        win = self.win
        lead = (self.channels,) if self.inner else (self.batch, self.channels)
        cols = cols.reshape(lead + win.kernel + win.out + ((self.batch,) if self.inner else ()))
        grid = self.xp.zeros(self._grid_shape(self.channels), dtype=dtype)
        for t in win.taps():
            grid[self._spatial(win.slices(t))] += cols[(slice(None),) * len(lead) + t]
        return grid

    def to_rows(self, y):
        """NC* array (N, F, *out) to the matmul layout."""
        g, f = self.groups, y.shape[1]
        if self.inner:
            y = self.xp.ascontiguousarray(self.xp.moveaxis(y, 0, -1))
            return y.reshape(g, f // g, -1)
        return y.reshape(self.batch, g, f // g, -1)

    def from_rows(self, r):
        """Matmul result to an NC* array (N, F, *out)."""
        if self.inner:
            r = r.reshape((-1,) + self.win.out + (self.batch,))
            return self.xp.ascontiguousarray(self.xp.moveaxis(r, -1, 0))
        return r.reshape((self.batch, -1) + self.win.out)

    def _weights(self, w):
        return w.reshape(self.groups, w.shape[0] // self.groups, -1)

    def _grid_shape(self, channels):
        if self.inner:
            return (channels,) + self.win.padded + (self.batch,)
        return (self.batch, channels) + self.win.padded

    def _spatial(self, per_axis):
        return (slice(None),) + per_axis + (slice(None),) if self.inner else \
            (slice(None), slice(None)) + per_axis


def _on_host(xp, win, *arrays):
    """True for 2-D windows over host arrays (None: absent) of one dtype the C kernels take."""
    arrays = [a for a in arrays if a is not None]
    return (_HOST_KERNELS and xp is np and len(win.kernel) == 2 and
            all(isinstance(a, np.ndarray) and a.dtype == arrays[0].dtype for a in arrays)
            and arrays[0].dtype in ext.LAYER_DTYPES)


class _HostConv:
    """2-D convolution of host arrays with minigluon_ext's kernels, a chunk of samples at a time.

    A chunk of n samples has columns (C*kh*kw, n*P) (`ext.im2col`) and matmul rows
    (F, n*P); `ext.swap01` turns rows into the NCHW output and dy into rows, `ext.col2im`
    sums columns back onto the data gradient. The weight gradient adds the chunks' products.
    """

    def __init__(self, win, groups, channels, dtype):
        self.win, self.groups, self.channels = win, groups, channels
        self.geometry = dict(kernel=win.kernel, stride=win.stride, pad=win.pad,
                             dilate=win.dilate)
        self.p = math.prod(win.out)
        per_sample = channels * math.prod(win.kernel) * self.p * np.dtype(dtype).itemsize
        self.step = max(1, _CHUNK_BYTES // per_sample)

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
            rows = self._rows(dy[a:b]) if need_x or not self._small(w) else None
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

    def _small(self, w):
        # a tiny weight (LeNet's first layer): one matmul (F, n*P) @ (n*P, K) would run on
        # one core, as BLAS splits the output, not the sum; per-sample matmuls are faster
        return self.groups == 1 and w.size < _SMALL_WEIGHT

    def _weight_part(self, dy, rows, cols):
        """This chunk's weight gradient: rows @ columns^T."""
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


class _HostWinograd(_HostConv):
    """3x3 stride-1 convolution of host arrays by Winograd F(MxM, 3x3).

    M = 4 (4x fewer products than im2col) on outputs of at least _WINOGRAD4_MIN per side,
    else M = 2 (2.25x fewer). With P = (M+2)^2, per chunk of samples: input tiles V =
    ext.winograd_input (P, C, T), P matmuls M = U @ V with the transformed weight U
    (P, F, C), output ext.winograd_output. Backward takes dM = ext.winograd_output_adjoint(dy),
    dV = U^T @ dM back through ext.winograd_input_adjoint, and dU = dM @ V^T back through the
    weight transform.
    """

    def __init__(self, win, channels, dtype):
        super().__init__(win, 1, channels, dtype)
        self.tile = 4 if min(win.out) >= _WINOGRAD4_MIN else 2
        th, tw = ext.winograd_tiles(*win.out, self.tile)
        planes = (self.tile + 2) ** 2 * channels * th * tw * np.dtype(dtype).itemsize
        self.step = max(1, _CHUNK_BYTES // planes)

    @staticmethod
    def applies(win, groups):
        return (_WINOGRAD and win.kernel == (3, 3) and win.stride == (1, 1) and
                win.dilate == (1, 1) and groups == 1)

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
            ext.winograd_output(u @ v, out[a:b].shape, bias, self.tile, out=out[a:b])
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
                ext.winograd_input_adjoint(u.swapaxes(1, 2) @ dm, dx[a:b].shape, self.win.pad,
                                           self.tile, out=dx[a:b])
            if need_w:
                v = kept[k][1] if kept and kept[k][0] is x else \
                    ext.winograd_input(np.ascontiguousarray(x[a:b]), self.win.pad, self.tile)
                part = dm @ v.swapaxes(1, 2)
                du = part if du is None else np.add(du, part, out=du)
        self.tiles = None
        return dx, (self._transform_grad(du) if need_w else None)

    def _transform(self, w):
        """U (P, F, C): U[(M+2)i + j, f, c] = (G w[f, c] G^T)[i, j], as one matmul."""
        f, c = w.shape[:2]
        w2 = np.ascontiguousarray(w).reshape(f * c, 9)
        return (_WINOGRAD_GG[self.tile].astype(w.dtype) @ w2.T).reshape(-1, f, c)

    def _transform_grad(self, du):
        """The gradient for w of sum(du * U(w)): G^T du[f, c] G, (F, C, 3, 3)."""
        p, f, c = du.shape
        gg = _WINOGRAD_GG[self.tile].astype(du.dtype)
        return (du.reshape(p, f * c).T @ gg).reshape(f, c, 3, 3)


def _host_conv(win, groups, channels, dtype):
    """The host convolution for this window: Winograd for 3x3 stride 1, else columns."""
    if _HostWinograd.applies(win, groups):
        return _HostWinograd(win, channels, dtype)
    return _HostConv(win, groups, channels, dtype)


def _columns(xp, win, groups, batch, channels):
    """Columns in the faster layout for this window (see _SHORT_ROW)."""
    inner = batch > 1 and win.out[-1] < _SHORT_ROW
    return _Columns(xp, win, groups, batch, channels, inner)


def _bias_view(bias, nsp):
    return bias.reshape((1, -1) + (1,) * nsp)


def _bias_grad(xp, dy):
    # a matrix-vector product sums much faster than a multi-axis reduction
    per_sample = dy.reshape(dy.shape[0], dy.shape[1], -1)
    return (per_sample @ xp.ones(per_sample.shape[2], dtype=dy.dtype)).sum(axis=0)


# ---- Convolution ---------------------------------------------------------------------------
def _check_groups(op, channels, filters, groups):
    if groups < 1 or channels % groups or filters % groups:
        raise ShapeError(f"{op}: num_group={groups} must divide both the data's {channels} "
                         f"channels and num_filter={filters}")


def _check_param(op, name, array, expected, hint):
    if array is not None and tuple(array.shape) != tuple(expected):
        raise ShapeError(f"{op}: {name} has shape {tuple(array.shape)}, expected "
                         f"{tuple(expected)} = {hint}")


@register("Convolution", inputs=("data", "weight", "bias"), takes_need=True)
def convolution(xp, data, weight, bias=None, kernel=(), stride=(), dilate=(), pad=(),
                num_filter=None, num_group=1, no_bias=False, layout=None, workspace=1024,
                cudnn_tune=None, cudnn_off=False):
    """N-D convolution (cross-correlation) of channel-first data.

    data (N, C, *spatial), weight (num_filter, C/num_group, *kernel), bias (num_filter,).
    Output (N, num_filter, *out) with out = (size + 2*pad - dilate*(kernel-1) - 1)//stride + 1.
    Example: ``nd.Convolution(x, w, b, kernel=(3, 3), pad=(1, 1), num_filter=16)``.
    """
    op, kernel = "Convolution", _kernel("Convolution", kernel)
    n = len(kernel)
    _check_layout(op, layout, data, n)
    f = weight.shape[0] if num_filter is None else int(num_filter)
    _check_groups(op, data.shape[1], f, num_group)
    win = _Window.sliding(op, kernel, _per_axis(op, "stride", stride, n, 1),
                          _per_axis(op, "dilate", dilate, n, 1),
                          _per_axis(op, "pad", pad, n, 0), data.shape[2:])
    _check_param(op, "weight", weight, (f, data.shape[1] // num_group) + kernel,
                 "(num_filter, channels/num_group, *kernel)")
    use_bias = bias is not None and not no_bias
    _check_param(op, "bias", bias if use_bias else None, (f,), "(num_filter,)")
    if _on_host(xp, win, data, weight, bias if use_bias else None):
        host = _host_conv(win, num_group, data.shape[1], data.dtype)
        out = host.forward(data, weight, np.ascontiguousarray(bias) if use_bias else None)

        def host_backward(dy, need=(True, True, True)):
            dx, dw = host.backward(dy, data, weight, need[0], need[1])
            return dx, dw, (_bias_grad(xp, dy) if use_bias and need[2] else None)
        return out, host_backward
    cols = _columns(xp, win, num_group, data.shape[0], data.shape[1])
    grid = cols.to_grid(data)
    out = cols.from_rows(cols.correlate(grid, weight))
    if use_bias:
        out += _bias_view(bias, len(kernel))

    def backward(dy, need=(True, True, True)):
        rows = cols.to_rows(dy)
        dx = cols.from_grid(cols.correlate_transposed(rows, weight, dy.dtype)) \
            if need[0] else None
        dw = cols.weight_grad(rows, grid, weight) if need[1] else None
        return dx, dw, (_bias_grad(xp, dy) if use_bias and need[2] else None)
    return out, backward


# ---- Deconvolution ---------------------------------------------------------------------------
def _deconv_window(op, data, kernel, stride, dilate, pad, adj, target_shape):
    """The window of the convolution whose adjoint this deconvolution is."""
    n = len(kernel)
    stride = _per_axis(op, "stride", stride, n, 1)
    dilate = _per_axis(op, "dilate", dilate, n, 1)
    if min(stride) < 1 or min(dilate) < 1:
        raise ShapeError(f"{op}: stride {stride} and dilate {dilate} must be positive")
    size = data.shape[2:]
    spans = tuple(s * (m - 1) + d * (k - 1) + 1 for s, m, d, k in zip(stride, size, dilate, kernel))
    if target_shape and any(target_shape):
        target = _per_axis(op, "target_shape", target_shape, n, 0)
        if any(t > sp for t, sp in zip(target, spans)):
            raise ShapeError(f"{op}: target_shape {target} is larger than the largest output "
                             f"{spans} that input {size} can give")
        extra = tuple(sp - t for sp, t in zip(spans, target))
        pad, adj = tuple((e + 1) // 2 for e in extra), tuple(e % 2 for e in extra)
    else:
        pad = _per_axis(op, "pad", pad, n, 0)
        adj = _per_axis(op, "adj", adj, n, 0)
    if any(a >= s and a > 0 for a, s in zip(adj, stride)):
        raise ShapeError(f"{op}: adj {adj} must be smaller than stride {stride}")
    out = tuple(sp + a - 2 * p for sp, a, p in zip(spans, adj, pad))
    if min(out) < 1:
        raise ShapeError(f"{op}: pad {pad} leaves no output for input of spatial shape {size}")
    return _Window(kernel, stride, dilate, pad, out, size)


@register("Deconvolution", inputs=("data", "weight", "bias"))
def deconvolution(xp, data, weight, bias=None, kernel=(), stride=(), dilate=(), pad=(), adj=(),
                  target_shape=(), num_filter=None, num_group=1, no_bias=True, layout=None,
                  workspace=512, cudnn_tune=None, cudnn_off=False):
    """Transposed convolution: the gradient of Convolution with respect to its data.

    data (N, C, *spatial), weight (C, num_filter/num_group, *kernel), bias (num_filter,).
    Output size per axis: stride*(size-1) + dilate*(kernel-1) + 1 - 2*pad + adj, or
    `target_shape` (which then sets pad and adj). As in MXNet, no_bias defaults to True.
    Example: ``nd.Deconvolution(x, w, kernel=(4, 4), stride=(2, 2), pad=(1, 1), num_filter=8)``.
    """
    op, kernel = "Deconvolution", _kernel("Deconvolution", kernel)
    _check_layout(op, layout, data, len(kernel))
    c = data.shape[1]
    f = weight.shape[1] * num_group if num_filter is None else int(num_filter)
    _check_groups(op, c, f, num_group)
    _check_param(op, "weight", weight, (c, f // num_group) + kernel,
                 "(channels, num_filter/num_group, *kernel)")
    use_bias = bias is not None and not no_bias
    _check_param(op, "bias", bias if use_bias else None, (f,), "(num_filter,)")
    win = _deconv_window(op, data, kernel, stride, dilate, pad, adj, target_shape)
    if _on_host(xp, win, data, weight, bias if use_bias else None):
        return _host_deconvolution(_host_conv(win, num_group, f, data.dtype), data, weight,
                                   bias if use_bias else None)
    cols = _columns(xp, win, num_group, data.shape[0], f)
    rows = cols.to_rows(data)
    out = cols.from_grid(cols.correlate_transposed(rows, weight, data.dtype))
    if use_bias:
        out += _bias_view(bias, len(kernel))

    def backward(dy):
        grid = cols.to_grid(dy)
        dx = cols.from_rows(cols.correlate(grid, weight))
        dw = cols.weight_grad(rows, grid, weight)
        return dx, dw, (_bias_grad(xp, dy) if use_bias else None)
    return out, backward


def _host_deconvolution(conv, data, weight, bias):
    """Deconvolution as the adjoint of the host convolution `conv` (output -> data space)."""
    out, _ = conv.backward(data, None, weight, need_w=False)
    if bias is not None:
        out += _bias_view(bias, 2)

    def backward(dy):
        dx = conv.forward(dy, weight)
        _, dw = conv.backward(data, dy, weight, need_x=False)
        return dx, dw, (_bias_grad(np, dy) if bias is not None else None)
    return out, backward


# ---- Pooling --------------------------------------------------------------------------------
class _AxisPool:
    """1-D max or sum pooling along one axis of an already padded array."""

    def __init__(self, xp, axis, kernel, stride, out, is_max):
        self.xp, self.axis, self.k, self.s, self.out = xp, axis, kernel, stride, out
        self.is_max = is_max

    def _tap(self, ndim, t):
        """Index of the elements that tap t of every window reads."""
        return self._along(ndim, slice(t, t + self.s * (self.out - 1) + 1, self.s))

    def _along(self, ndim, sl):
        return (slice(None),) * self.axis + (sl,) + (slice(None),) * (ndim - self.axis - 1)

    def forward(self, x):
        if self.out == 1:       # one window: a plain reduction is fastest
            win = x[self._along(x.ndim, slice(0, self.k))]
            return win.max(axis=self.axis, keepdims=True) if self.is_max \
                else win.sum(axis=self.axis, keepdims=True)
        if self.k == 1:
            return x[self._tap(x.ndim, 0)].copy()
        combine = self.xp.maximum if self.is_max else self.xp.add
        y = combine(x[self._tap(x.ndim, 0)], x[self._tap(x.ndim, 1)])
        for t in range(2, self.k):
            combine(y, x[self._tap(x.ndim, t)], out=y)
        return y

    def backward(self, x, y, dy):
        """Gradient for x; max pooling sends it to the first maximum of each window."""
        if self.out == 1:
            return self._reduce_backward(x, y, dy)
        xp, overlap = self.xp, self.s < self.k
        fresh = overlap or self.s * self.out != x.shape[self.axis]
        dx = (xp.zeros if fresh else xp.empty)(x.shape, dtype=dy.dtype)
        left = dy        # max: gradient not yet claimed by an earlier tap
        for t in range(self.k):
            sl = self._tap(x.ndim, t)
            if self.is_max and t < self.k - 1:
                g = xp.multiply(left, x[sl] == y, out=None if overlap else dx[sl])
                left = left - g
                if overlap:
                    dx[sl] += g
            elif overlap:
                dx[sl] += left
            else:
                dx[sl] = left
        return dx

    def _reduce_backward(self, x, y, dy):
        xp = self.xp
        dx = xp.zeros(x.shape, dtype=dy.dtype)
        win = self._along(x.ndim, slice(0, self.k))
        if self.is_max:
            hit = x[win] == y
            hit &= xp.cumsum(hit, axis=self.axis) == 1
            dx[win] = dy * hit
        else:
            dx[win] = dy
        return dx


def _pool_window(op, data, kernel, stride, pad, global_pool, convention):
    n = data.ndim - 2
    if global_pool:
        size = data.shape[2:]
        return _Window(size, (1,) * n, (1,) * n, (0,) * n, size, (1,) * n), (0,) * n
    kernel = _kernel(op, kernel)
    if len(kernel) != n:
        raise ShapeError(f"{op}: kernel={kernel} needs {len(kernel) + 2}-D data, got data "
                         f"of shape {data.shape}; give a kernel per spatial axis or "
                         "global_pool=True")
    stride, pad = _per_axis(op, "stride", stride, n, 1), _per_axis(op, "pad", pad, n, 0)
    if convention not in ("valid", "full"):
        raise MXNetError(f"{op}: pooling_convention {convention!r} is not supported; use "
                         "'valid' or 'full'")
    rnd = math.ceil if convention == "full" else math.floor
    size = data.shape[2:]
    if min(stride) < 1 or any(k > m + 2 * p for k, m, p in zip(kernel, size, pad)):
        raise ShapeError(f"{op}: kernel {kernel} (stride {stride}) does not fit input of "
                         f"spatial shape {size} padded by {pad}")
    out = tuple(rnd((m + 2 * p - k) / s) + 1 for m, k, s, p in zip(size, kernel, stride, pad))
    win = _Window(kernel, stride, (1,) * n, pad, size, out)
    # 'full' windows may run past the padded input: pad further on the high side
    extra = tuple(max(0, s * (o - 1) + k - m - 2 * p)
                  for s, o, k, m, p in zip(stride, out, kernel, size, pad))
    return win, extra


class _Pool:
    """One pooling configuration: pad, then 1-D pooling along each spatial axis in turn."""

    def __init__(self, xp, win, extra, pool_type, count_include_pad, dtype):
        self.xp, self.win, self.extra = xp, win, extra
        self.is_max = pool_type == "max"
        self.fill = 0 if not self.is_max else \
            -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
        stages = [_AxisPool(xp, ax + 2, k, s, o, self.is_max)
                  for ax, (k, s, o) in enumerate(zip(win.kernel, win.stride, win.out))]
        self.stages = [st for st in stages if st.k > 1 or st.s > 1]
        self.div = _avg_divisor(xp, win, count_include_pad, dtype) \
            if pool_type == "avg" else None

    def forward(self, data):
        """The output, and the input of every stage (for backward)."""
        inputs = [self._pad(data)]
        for st in reversed(self.stages):     # innermost axis first: longest contiguous runs
            inputs.append(st.forward(inputs[-1]))
        out = inputs.pop()
        if self.div is not None:
            out = out / self.div
        elif out is data:
            out = out.copy()
        return out, inputs

    def backward(self, dy, out, inputs):
        g = dy / self.div if self.div is not None else dy
        y = out
        for st, x in zip(self.stages, reversed(inputs)):
            g, y = st.backward(x, y, g), x
        return g[(slice(None), slice(None)) + self.win.crop()]

    def _pad(self, x):
        win, extra = self.win, self.extra
        if not any(win.pad) and not any(extra):
            return x
        shape = x.shape[:2] + tuple(m + e for m, e in zip(win.padded, extra))
        grid = self.xp.full(shape, self.fill, dtype=x.dtype)
        grid[(slice(None), slice(None)) + win.crop()] = x
        return grid


def _host_max_pool(data, win, convention):
    """2-D max pooling of a host array with minigluon_ext's kernels; argmax kept for backward."""
    x = np.ascontiguousarray(data)
    out, argmax = ext.max_pool2d(x, win.kernel, win.stride, win.pad, convention)
    return out, lambda dy: (ext.max_pool2d_backward(np.ascontiguousarray(dy, dtype=x.dtype),
                                                    argmax, x.shape[2:]),)


def _avg_divisor(xp, win, count_include_pad, dtype):
    """Per-output window sizes, as MXNet counts them, broadcastable against the output."""
    div = None
    for ax, (k, s, p, m, o) in enumerate(zip(win.kernel, win.stride, win.pad, win.size,
                                             win.out)):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, m + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, m)
        shape = [1] * (len(win.out) + 2)
        shape[ax + 2] = o
        counts = (end - start).reshape(shape)
        div = counts if div is None else div * counts
    return xp.asarray(div.astype(dtype))


@register("Pooling")
def pooling(xp, data, kernel=(), pool_type="max", global_pool=False, stride=(), pad=(),
            pooling_convention="valid", count_include_pad=True, layout=None, cudnn_off=False,
            p_value=None):
    """Max, average or sum pooling of channel-first data (NCW, NCHW, NCDHW).

    Output size per axis: floor((size + 2*pad - kernel)/stride) + 1, ceil with
    pooling_convention='full'; global_pool=True pools each whole feature map to 1.
    Example: ``nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type='max')``.
    """
    op = "Pooling"
    if pool_type not in ("max", "avg", "sum"):
        raise MXNetError(f"{op}: pool_type {pool_type!r} is not supported; use 'max', 'avg' "
                         "or 'sum'")
    _check_layout(op, layout, data, data.ndim - 2)
    win, extra = _pool_window(op, data, kernel, stride, pad, global_pool, pooling_convention)
    if pool_type == "max" and _on_host(xp, win, data):
        return _host_max_pool(data, win, "valid" if global_pool else pooling_convention)
    pool = _Pool(xp, win, extra, pool_type, count_include_pad, data.dtype)
    out, saved = pool.forward(data)
    return out, lambda dy: (pool.backward(dy, out, saved),)
