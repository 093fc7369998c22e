"""The Convolution operator on channel-first data (NCW, NCHW, NCDHW): im2col plus one
batched matmul, on minigluon_ext's CUDA kernels for 2-D CuPy arrays (`conv_device`), its C
kernels for 2-D host arrays (`conv_host`), else with `conv_columns`. Also the parameter
checks and bias helpers that Deconvolution shares.

Out of scope: channel-last layouts (transpose to channel-first first).
"""
import numpy as np

from ..base import ShapeError
from .conv_columns import columns
from .conv_device import DeviceConv
from .conv_host import host_conv, on_host
from .conv_pointwise import Pointwise
from .conv_window import Window, check_layout, kernel_attr, per_axis
from .device_kernels import device_kernels
from .registry import register

__all__ = ["convolution", "check_groups", "check_param", "bias_view", "bias_grad"]


def bias_view(bias, nsp):
    """Bias (F,) as (1, F, 1, ...) to add to an NC* output with `nsp` spatial axes."""
    return bias.reshape((1, -1) + (1,) * nsp)


def bias_grad(xp, dy):
    """The bias gradient: dy (N, F, *spatial) summed over every axis but F."""
    # a matrix-vector product sums much faster than a multi-axis reduction
    per_sample = dy.reshape(dy.shape[0], dy.shape[1], -1)
    return (per_sample @ xp.ones(per_sample.shape[2], dtype=dy.dtype)).sum(axis=0)


def check_groups(op, channels, filters, groups):
    """Raise unless num_group divides both the channels and the filters."""
    if groups < 1 or channels % groups or filters % groups:
        raise ShapeError(f"{op}: num_group={groups} must divide both the data's {channels} "
                         f"channels and num_filter={filters}")


def check_param(op, name, array, expected, hint):
    """Raise if parameter `array` (None: absent) does not have the `expected` shape."""
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
    op, kernel = "Convolution", kernel_attr("Convolution", kernel)
    n = len(kernel)
    check_layout(op, layout, data, n)
    f = weight.shape[0] if num_filter is None else int(num_filter)
    check_groups(op, data.shape[1], f, num_group)
    win = Window.sliding(op, kernel, per_axis(op, "stride", stride, n, 1),
                          per_axis(op, "dilate", dilate, n, 1),
                          per_axis(op, "pad", pad, n, 0), data.shape[2:])
    check_param(op, "weight", weight, (f, data.shape[1] // num_group) + kernel,
                 "(num_filter, channels/num_group, *kernel)")
    use_bias = bias is not None and not no_bias
    check_param(op, "bias", bias if use_bias else None, (f,), "(num_filter,)")
    kernels = device_kernels(xp, data, weight, bias if use_bias else None) if n == 2 else None
    if kernels is not None:
        conv = DeviceConv(kernels, xp, win, num_group, data.shape[1], data.dtype)
        return _run(xp, conv, data, weight, bias if use_bias else None)
    if Pointwise.applies(win, data.shape[1], num_group, data.dtype):
        return _run(xp, Pointwise(xp, win, num_group), data, weight,
                    bias if use_bias else None)
    if on_host(xp, win, data, weight, bias if use_bias else None):
        host = host_conv(win, num_group, data.shape[1], data.dtype)
        out = host.forward(data, weight, np.ascontiguousarray(bias) if use_bias else None)

        def host_backward(dy, need=(True, True, True)):
            dx, dw = host.backward(dy, data, weight, need[0], need[1])
            return dx, dw, (bias_grad(xp, dy) if use_bias and need[2] else None)
        return out, host_backward
    cols = columns(xp, win, num_group, data.shape[0], data.shape[1])
    grid = cols.to_grid(data)
    out = cols.from_rows(cols.correlate(grid, weight))
    if use_bias:
        out += bias_view(bias, len(kernel))

    def backward(dy, need=(True, True, True)):
        rows = cols.to_rows(dy)
        dx = cols.from_grid(cols.correlate_transposed(rows, weight, dy.dtype)) \
            if need[0] else None
        dw = cols.weight_grad(rows, grid, weight) if need[1] else None
        return dx, dw, (bias_grad(xp, dy) if use_bias and need[2] else None)
    return out, backward


def _run(xp, conv, data, weight, bias):
    """(out, backward) of a convolution object: Pointwise (1x1 unpadded convolutions as
    matmuls on the arrays in place) or DeviceConv."""
    out = conv.forward(data, weight, bias)

    def backward(dy, need=(True, True, True)):
        dx, dw = conv.backward(dy, data, weight, need[0], need[1])
        return dx, dw, (bias_grad(xp, dy) if bias is not None and need[2] else None)
    return out, backward
