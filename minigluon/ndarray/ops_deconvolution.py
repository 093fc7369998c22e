"""The Deconvolution operator (transposed convolution): the adjoint of Convolution, built
from the same pieces (its window, the device and host kernels, the columns) run the other
way."""
import numpy as np

from ..base import ShapeError
from .conv_columns import columns
from .conv_device import DeviceConv
from .conv_host import host_conv, on_host
from .conv_window import Window, check_layout, kernel_attr, per_axis
from .device_kernels import device_kernels
from .ops_convolution import bias_grad, bias_view, check_groups, check_param
from .registry import register

__all__ = ["deconvolution"]


def _deconv_window(op, data, kernel, stride, dilate, pad, adj, target_shape):
    """The window of the convolution whose adjoint this deconvolution is."""
    n = len(kernel)
    stride = per_axis(op, "stride", stride, n, 1)
    dilate = per_axis(op, "dilate", dilate, n, 1)
    if min(stride) < 1 or min(dilate) < 1:
        raise ShapeError(f"{op}: stride {stride} and dilate {dilate} must be positive")
    size = data.shape[2:]
    spans = tuple(s * (m - 1) + d * (k - 1) + 1 for s, m, d, k in zip(stride, size, dilate, kernel))
    if target_shape and any(target_shape):
        target = per_axis(op, "target_shape", target_shape, n, 0)
        if any(t > sp for t, sp in zip(target, spans)):
            raise ShapeError(f"{op}: target_shape {target} is larger than the largest output "
                             f"{spans} that input {size} can give")
        extra = tuple(sp - t for sp, t in zip(spans, target))
        pad, adj = tuple((e + 1) // 2 for e in extra), tuple(e % 2 for e in extra)
    else:
        pad = per_axis(op, "pad", pad, n, 0)
        adj = per_axis(op, "adj", adj, n, 0)
    if any(a >= s and a > 0 for a, s in zip(adj, stride)):
        raise ShapeError(f"{op}: adj {adj} must be smaller than stride {stride}")
    out = tuple(sp + a - 2 * p for sp, a, p in zip(spans, adj, pad))
    if min(out) < 1:
        raise ShapeError(f"{op}: pad {pad} leaves no output for input of spatial shape {size}")
    return Window(kernel, stride, dilate, pad, out, size)


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
    op, kernel = "Deconvolution", kernel_attr("Deconvolution", kernel)
    check_layout(op, layout, data, len(kernel))
    c = data.shape[1]
    f = weight.shape[1] * num_group if num_filter is None else int(num_filter)
    check_groups(op, c, f, num_group)
    check_param(op, "weight", weight, (c, f // num_group) + kernel,
                 "(channels, num_filter/num_group, *kernel)")
    use_bias = bias is not None and not no_bias
    check_param(op, "bias", bias if use_bias else None, (f,), "(num_filter,)")
    win = _deconv_window(op, data, kernel, stride, dilate, pad, adj, target_shape)
    kernels = device_kernels(xp, data, weight, bias if use_bias else None) \
        if len(kernel) == 2 else None
    if kernels is not None:
        return _adjoint(DeviceConv(kernels, xp, win, num_group, f, data.dtype), xp, data,
                        weight, bias if use_bias else None)
    if on_host(xp, win, data, weight, bias if use_bias else None):
        return _adjoint(host_conv(win, num_group, f, data.dtype), np, data, weight,
                        bias if use_bias else None)
    cols = columns(xp, win, num_group, data.shape[0], f)
    rows = cols.to_rows(data)
    out = cols.from_grid(cols.correlate_transposed(rows, weight, data.dtype))
    if use_bias:
        out += bias_view(bias, len(kernel))

    def backward(dy):
        grid = cols.to_grid(dy)
        dx = cols.from_rows(cols.correlate(grid, weight))
        dw = cols.weight_grad(rows, grid, weight)
        return dx, dw, (bias_grad(xp, dy) if use_bias else None)
    return out, backward


def _adjoint(conv, xp, data, weight, bias):
    """Deconvolution as the adjoint of the convolution `conv` (output -> data space), a
    DeviceConv or a host one."""
    out, _ = conv.backward(data, None, weight, need_w=False)
    if bias is not None:
        out += bias_view(bias, 2)

    def backward(dy):
        dx = conv.forward(dy, weight)
        _, dw = conv.backward(data, dy, weight, need_x=False)
        return dx, dw, (bias_grad(xp, dy) if bias is not None else None)
    return out, backward
