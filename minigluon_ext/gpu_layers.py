"""The layer kernels of `minigluon_ext.gpu.Kernels`: convolution columns, pooling, ReLU and
BatchNorm for the backend's arrays, with `minigluon_ext.native`'s names, arguments and
results (cuda_src/columns.cu, pool.cu, relu.cu, batchnorm.cu).

`LayerKernels` is a mixin of `Kernels`: it uses the argument checks and the launcher that
gpu.py defines (`_array`, `_same_device`, `_run`, `xp`). Geometry reaches the kernels as
C ints, so every size a kernel multiplies must fit one (`_ints`); the convolution driver
(minigluon/ndarray/conv_device.py) splits big batches to stay inside that and its memory
bound. `nthreads` is accepted for native's signature and ignored: a GPU runs every item.

Beyond native: `avg_pool2d` and its gradient (the Pooling operator's average and sum), and
`max_pool2d_backward(..., kernel=, stride=, pad=)`, which with the window known gathers per
input element (a thread each) instead of walking each plane in one thread.
"""
import numpy as np

from minigluon.base import ShapeError

from . import _checks as check

INT_MAX = np.iinfo(np.int32).max
# BatchNorm's sums split the outer axis until about this many threads run (an H100 holds
# 132 x 2048 resident threads)
BN_THREADS = 1 << 18


def _i32(values):
    return tuple(np.int32(v) for v in values)


class LayerKernels:
    """Layer kernels over `self.backend` (mixed into gpu.Kernels)."""

    # ---- checks shared by the layer kernels ----------------------------------------------

    def _layer(self, fn, name, x, ndim=None, writable=False):
        self._array(fn, name, x, writable=writable, dtypes=check.LAYER_FLOATS)
        if ndim is not None and x.ndim != ndim:
            axes = "(N, C, H, W)" if ndim == 4 else "(outer, C, inner)"
            raise ShapeError(f"{fn}: {name} must be {axes}, got shape {x.shape}")
        return x

    def _out(self, fn, out, shape, dtype, like):
        """out, or a new array of `shape`; checked for shape and dtype."""
        if out is None:
            return self.xp.empty(shape, dtype)
        self._array(fn, "out", out, writable=True, dtypes=(np.dtype(dtype),))
        if out.shape != tuple(shape):
            raise ShapeError(f"{fn}: out has shape {out.shape}, expected {tuple(shape)}")
        self._same_device(fn, like, ("out", out))
        return out

    @staticmethod
    def _ints(fn, **sizes):
        """Refuse sizes a kernel's int arithmetic cannot hold."""
        for name, value in sizes.items():
            if value > INT_MAX:
                raise ShapeError(f"{fn}: {name} = {value} does not fit the kernels' 32-bit "
                                 f"indices (at most {INT_MAX}); help: split the batch")

    @staticmethod
    def _shape4(fn, shape):
        shape = tuple(int(v) for v in shape)
        if len(shape) != 4 or min(shape) < 0 or min(shape[2:]) < 1:
            raise ShapeError(f"{fn}: shape must be an image's (N, C, H, W) with H, W >= 1, "
                             f"got {shape}")
        return shape

    @staticmethod
    def _suffix(dtype):
        return "f32" if dtype == np.float32 else "f64"

    # ---- convolution columns (cuda_src/columns.cu) ---------------------------------------

    def im2col(self, x, kernel, stride=(1, 1), pad=(0, 0), dilate=(1, 1), out=None,
               nthreads=None):
        """Columns (C*kh*kw, N*oh*ow) of an (N, C, H, W) image (native.im2col's layout)."""
        fn = "im2col"
        self._layer(fn, "x", x, ndim=4)
        win = check.window2d(fn, kernel, stride, pad, dilate)
        oh, ow = check.conv_out_size(fn, x.shape[2:], win)
        n, c, h, w = x.shape
        self._columns_ints(fn, x.shape, win, oh, ow)
        out = self._out(fn, out, (c * win[0] * win[1], n * oh * ow), x.dtype, x)
        self._run("columns", f"im2col_{self._suffix(x.dtype)}", out.size,
                  (x, out) + _i32(x.shape + win + (oh, ow)) + (np.int64(out.size),), x)
        return out

    def col2im(self, cols, shape, kernel, stride=(1, 1), pad=(0, 0), dilate=(1, 1), out=None,
               nthreads=None):
        """The (N, C, H, W) image of `shape` summing the column entries (native.col2im's
        tap order, so its bits)."""
        fn = "col2im"
        self._layer(fn, "cols", cols)
        shape = self._shape4(fn, shape)
        win = check.window2d(fn, kernel, stride, pad, dilate)
        oh, ow = check.conv_out_size(fn, shape[2:], win)
        want = (shape[1] * win[0] * win[1], shape[0] * oh * ow)
        if cols.shape != want:
            raise ShapeError(f"{fn}: cols has shape {cols.shape} but image {shape} with kernel "
                             f"{win[:2]} needs {want}")
        self._columns_ints(fn, shape, win, oh, ow)
        out = self._out(fn, out, shape, cols.dtype, cols)
        self._run("columns", f"col2im_{self._suffix(cols.dtype)}", out.size,
                  (cols, out) + _i32(shape + win + (oh, ow)) + (np.int64(out.size),), cols)
        return out

    def _columns_ints(self, fn, shape, win, oh, ow):
        n, c, h, w = shape
        kh, kw, sh, sw, ph, pw, dh, dw = win
        self._ints(fn, columns=n * oh * ow, rows=c * kh * kw, planes=n * c, area=h * w,
                   height=max(oh * sh + kh * dh, h + ph), width=max(ow * sw + kw * dw, w + pw))

    # ---- pooling (cuda_src/pool.cu) ------------------------------------------------------

    def max_pool2d(self, x, kernel, stride=(1, 1), pad=(0, 0), convention="valid",
                   nthreads=None):
        """2-D max pooling of (N, C, H, W): (out, int32 argmax y*W + x or -1), native's bits."""
        fn = "max_pool2d"
        self._layer(fn, "x", x, ndim=4)
        win = check.window2d(fn, kernel, stride, pad)[:6]
        oh, ow = check.pool_out_size(fn, x.shape[2:], win, convention)
        self._pool_ints(fn, x.shape, win, oh, ow)
        shape = x.shape[:2] + (oh, ow)
        out, argmax = self.xp.empty(shape, x.dtype), self.xp.empty(shape, check.INDEX)
        self._run("pool", f"max_pool2d_{self._suffix(x.dtype)}", out.size,
                  (x, out, argmax) + _i32(x.shape[2:] + win + (oh, ow)) +
                  (x.dtype.type(-np.inf), np.int64(out.size)), x)
        return out, argmax

    def max_pool2d_backward(self, dy, argmax, size, out=None, nthreads=None, *, kernel=None,
                            stride=(1, 1), pad=(0, 0)):
        """Gradient of max_pool2d for inputs of spatial `size` (H, W): dy added at the argmax
        positions in window order (native's bits).

        With `kernel` (and the forward's stride and pad), one thread per input element
        gathers from the windows that hold it; without, one thread walks each plane.
        Unlike native, argmax is not checked against [-1, H*W) (that would wait for the GPU):
        pass the argmax that max_pool2d returned.
        """
        fn = "max_pool2d_backward"
        self._layer(fn, "dy", dy, ndim=4)
        self._array(fn, "argmax", argmax, dtypes=(check.INDEX,))
        if argmax.shape != dy.shape:
            raise ShapeError(f"{fn}: argmax has shape {argmax.shape} but dy has {dy.shape}")
        self._same_device(fn, dy, ("argmax", argmax))
        h, w = (int(v) for v in size)
        out = self._out(fn, out, dy.shape[:2] + (h, w), dy.dtype, dy)
        suffix = self._suffix(dy.dtype)
        if kernel is None:
            planes = dy.shape[0] * dy.shape[1]
            self._run("pool", f"max_pool2d_backward_planes_{suffix}", planes,
                      (dy, argmax, out, np.int64(h * w), np.int64(dy.shape[2] * dy.shape[3]),
                       np.int64(planes)), dy)
            return out
        win = self._pool_geometry(fn, dy, (h, w), kernel, stride, pad)
        self._run("pool", f"max_pool2d_backward_{suffix}", out.size,
                  (dy, argmax, out) + _i32((h, w) + win + dy.shape[2:]) +
                  (np.int64(out.size),), dy)
        return out

    def avg_pool2d(self, x, kernel, stride=(1, 1), pad=(0, 0), convention="valid",
                   count_include_pad=True, pool_type="avg", nthreads=None):
        """2-D average (or, pool_type='sum', sum) pooling of (N, C, H, W), windows counted as
        the Pooling operator counts them; equal to its NumPy path up to rounding."""
        fn = "avg_pool2d"
        self._layer(fn, "x", x, ndim=4)
        divide = self._pool_type(fn, pool_type)
        win = check.window2d(fn, kernel, stride, pad)[:6]
        oh, ow = check.pool_out_size(fn, x.shape[2:], win, convention)
        self._pool_ints(fn, x.shape, win, oh, ow)
        out = self.xp.empty(x.shape[:2] + (oh, ow), x.dtype)
        self._run("pool", f"avg_pool2d_{self._suffix(x.dtype)}", out.size,
                  (x, out) + _i32(x.shape[2:] + win + (oh, ow)) +
                  _i32((bool(count_include_pad), divide)) + (np.int64(out.size),), x)
        return out

    def avg_pool2d_backward(self, dy, size, kernel, stride=(1, 1), pad=(0, 0),
                            count_include_pad=True, pool_type="avg", out=None, nthreads=None):
        """Gradient of avg_pool2d for inputs of spatial `size` (H, W)."""
        fn = "avg_pool2d_backward"
        self._layer(fn, "dy", dy, ndim=4)
        divide = self._pool_type(fn, pool_type)
        h, w = (int(v) for v in size)
        win = self._pool_geometry(fn, dy, (h, w), kernel, stride, pad)
        out = self._out(fn, out, dy.shape[:2] + (h, w), dy.dtype, dy)
        self._run("pool", f"avg_pool2d_backward_{self._suffix(dy.dtype)}", out.size,
                  (dy, out) + _i32((h, w) + win + dy.shape[2:]) +
                  _i32((bool(count_include_pad), divide)) + (np.int64(out.size),), dy)
        return out

    @staticmethod
    def _pool_type(fn, pool_type):
        if pool_type not in ("avg", "sum"):
            raise ValueError(f"{fn}: pool_type must be 'avg' or 'sum', got {pool_type!r}; "
                             "help: max pooling is max_pool2d")
        return pool_type == "avg"

    def _pool_geometry(self, fn, dy, size, kernel, stride, pad):
        """The window of a pooling gradient, checked against dy's spatial shape."""
        win = check.window2d(fn, kernel, stride, pad)[:6]
        shapes = {check.pool_out_size(fn, size, win, c) for c in ("valid", "full")}
        if tuple(dy.shape[2:]) not in shapes:
            raise ShapeError(f"{fn}: dy has spatial shape {tuple(dy.shape[2:])} but kernel "
                             f"{win[:2]}, stride {win[2:4]}, pad {win[4:]} over {size} give "
                             f"{' or '.join(str(s) for s in sorted(shapes))}")
        self._pool_ints(fn, dy.shape[:2] + size, win, *dy.shape[2:])
        return win

    def _pool_ints(self, fn, shape, win, oh, ow):
        n, c, h, w = shape
        kh, kw, sh, sw, ph, pw = win
        self._ints(fn, area=h * w, outputs=oh * ow, window=kh * kw,
                   height=max(oh * sh + kh, h + ph), width=max(ow * sw + kw, w + pw))

    # ---- ReLU (cuda_src/relu.cu) ---------------------------------------------------------

    def relu(self, x, out=None, nthreads=None):
        """max(x, 0), NaN kept (native's bits)."""
        fn = "relu"
        self._layer(fn, "x", x)
        out = self._out(fn, out, x.shape, x.dtype, x)
        self._run("relu", f"relu_{self._suffix(x.dtype)}", x.size,
                  (x, out, np.int64(x.size)), x)
        return out

    def relu_backward(self, x, dy, out=None, nthreads=None):
        """dy * (x > 0) (native's bits)."""
        fn = "relu_backward"
        self._layer(fn, "x", x)
        self._layer(fn, "dy", dy)
        check.like(fn, "dy", dy, "x", x)
        self._same_device(fn, x, ("dy", dy))
        out = self._out(fn, out, x.shape, x.dtype, x)
        self._run("relu", f"relu_backward_{self._suffix(x.dtype)}", x.size,
                  (x, dy, out, np.int64(x.size)), x)
        return out

    # ---- BatchNorm (cuda_src/batchnorm.cu) -----------------------------------------------

    def batch_norm_stats(self, x, nthreads=None):
        """Per-channel float64 (mean, biased variance) of (outer, C, inner) x, summed in double
        (native's up to rounding): the sum of x, then of (x - mean)^2."""
        self._layer("batch_norm_stats", "x", x, ndim=3)
        count = x.shape[0] * x.shape[2]
        if count == 0:
            return (self.xp.zeros(x.shape[1], np.float64),) * 2
        total = self._partial_sums(x, x, self.xp.zeros(x.shape[1], np.float64), False)[0]
        mean = total / count
        return mean, self._partial_sums(x, x, mean, False)[1] / count

    def batch_norm_sums(self, x, dy, mean, nthreads=None):
        """Per-channel float64 (sum of dy, sum of dy * (x - mean)), summed in double (native's
        up to rounding)."""
        self._channels("batch_norm_sums", x, dy, mean=mean)
        return self._partial_sums(x, dy, mean.astype(np.float64), True)

    def _partial_sums(self, x, dy, mean, with_dy):
        """(s1, s2) per channel of batchnorm.cu's partial sums, added over the segments."""
        outer, c, inner = x.shape
        segments = max(1, min(outer, -(-BN_THREADS // max(1, c * inner))))
        seg_len = -(-outer // segments) if outer else 1
        segments = -(-outer // seg_len) if outer else 1
        s1, s2 = (self.xp.empty((segments, c, inner), np.float64) for _ in range(2))
        self._run("batchnorm", f"batch_norm_partial_sums_{self._suffix(x.dtype)}", s1.size,
                  (x, dy, mean, s1, s2, np.int32(with_dy), np.int64(outer), np.int64(c),
                   np.int64(inner), np.int64(seg_len), np.int64(s1.size)), x)
        return s1.sum(axis=(0, 2)), s2.sum(axis=(0, 2))

    def batch_norm_forward(self, x, mean, scale, shift, out=None, nthreads=None):
        """(x - mean) * scale + shift per channel of (outer, C, inner) x (native's bits)."""
        fn = "batch_norm_forward"
        self._channels(fn, x, None, mean=mean, scale=scale, shift=shift)
        out = self._out(fn, out, x.shape, x.dtype, x)
        self._run("batchnorm", f"batch_norm_forward_{self._suffix(x.dtype)}", x.size,
                  (x, mean, scale, shift, out, np.int64(x.shape[1]), np.int64(x.shape[2]),
                   np.int64(x.size)), x)
        return out

    def batch_norm_backward(self, x, dy, mean, a, b, k, out=None, nthreads=None):
        """(dy * a + (x - mean) * b) + k per channel of (outer, C, inner) x (native's bits)."""
        fn = "batch_norm_backward"
        self._channels(fn, x, dy, mean=mean, a=a, b=b, k=k)
        out = self._out(fn, out, x.shape, x.dtype, x)
        self._run("batchnorm", f"batch_norm_backward_{self._suffix(x.dtype)}", x.size,
                  (x, dy, mean, a, b, k, out, np.int64(x.shape[1]), np.int64(x.shape[2]),
                   np.int64(x.size)), x)
        return out

    def _channels(self, fn, x, dy, **vectors):
        """x (outer, C, inner), dy like x (when given), each vector (C,) of x's dtype."""
        self._layer(fn, "x", x, ndim=3)
        arrays = []
        if dy is not None:
            self._layer(fn, "dy", dy)
            check.like(fn, "dy", dy, "x", x)
            arrays.append(("dy", dy))
        for name, v in vectors.items():
            self._layer(fn, name, v)
            check.like(fn, name, v, "x's channels", np.empty(x.shape[1:2], x.dtype))
            arrays.append((name, v))
        self._same_device(fn, x, *arrays)
