"""The Pooling operator: max, average or sum pooling of channel-first data.

Pooling is separable: it pools one spatial axis at a time (`_AxisPool`). 2-D pooling of
CuPy arrays runs on minigluon_ext's CUDA kernels instead (`pool_device`), 2-D max pooling
of host arrays on its C kernel (`conv_host.host_max_pool`).

Out of scope: channel-last layouts, 'lp' pooling and the 'same' pooling convention.
"""
import math

import numpy as np

from ..base import MXNetError, ShapeError
from .conv_host import host_max_pool, on_host
from .conv_window import Window, check_layout, kernel_attr, per_axis
from .device_kernels import device_kernels
from .pool_device import device_pool
from .registry import register

__all__ = ["pooling"]


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
        return Window(size, (1,) * n, (1,) * n, (0,) * n, size, (1,) * n), (0,) * n
    kernel = kernel_attr(op, kernel)
    if len(kernel) != n:
        raise ShapeError(f"{op}: kernel={kernel} needs {len(kernel) + 2}-D data, got data "
                         f"of shape {data.shape}; give a kernel per spatial axis or "
                         "global_pool=True")
    stride, pad = per_axis(op, "stride", stride, n, 1), per_axis(op, "pad", pad, n, 0)
    if convention not in ("valid", "full"):
        raise MXNetError(f"{op}: pooling_convention {convention!r} is not supported; use "
                         "'valid' or 'full'")
    rnd = math.ceil if convention == "full" else math.floor
    size = data.shape[2:]
    if min(stride) < 1 or any(k > m + 2 * p for k, m, p in zip(kernel, size, pad)):
        raise ShapeError(f"{op}: kernel {kernel} (stride {stride}) does not fit input of "
                         f"spatial shape {size} padded by {pad}")
    out = tuple(rnd((m + 2 * p - k) / s) + 1 for m, k, s, p in zip(size, kernel, stride, pad))
    win = Window(kernel, stride, (1,) * n, pad, size, out)
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
    check_layout(op, layout, data, data.ndim - 2)
    win, extra = _pool_window(op, data, kernel, stride, pad, global_pool, pooling_convention)
    convention = "valid" if global_pool else pooling_convention
    kernels = device_kernels(xp, data) if len(win.kernel) == 2 else None
    if kernels is not None:
        return device_pool(kernels, xp, data, win, pool_type, convention, count_include_pad)
    if pool_type == "max" and on_host(xp, win, data):
        return host_max_pool(data, win, convention)
    pool = _Pool(xp, win, extra, pool_type, count_include_pad, data.dtype)
    out, saved = pool.forward(data)
    return out, lambda dy: (pool.backward(dy, out, saved),)
