"""Depthwise 2-D convolution of host arrays (num_group == channels: MobileNet's 3x3 layers)
with minigluon_ext's direct kernels, forward and both gradients.

The columns path runs such a layer as one matmul of a single row per channel, which BLAS
does slowly; the direct kernels make a few passes over each plane in cache instead
(MobileNet-v2's depthwise layers at batch 16: 1.6x to 5x less CPU time, see
docs/minigluon_ext.md). `conv_host.host_conv` picks this class for the windows of
`applies`.
"""
import numpy as np

import minigluon_ext as ext

__all__ = ["HostDepthwise"]

# host depthwise convolutions use the direct kernels (tests turn this off to compare paths)
_DEPTHWISE = True


class HostDepthwise:
    """Convolution with num_group == channels, as conv_host's drivers are called."""

    def __init__(self, win):
        self.win = win
        self.geometry = dict(stride=win.stride, pad=win.pad, dilate=win.dilate)

    @staticmethod
    def applies(win, groups, channels):
        """True for a 2-D window whose groups (more than one) are the channels, in the
        kernels' size limit."""
        # one channel in one group is an ordinary convolution (LeNet's first layer: 1 -> 20
        # filters of 5x5), where the columns' one matmul beats a plane pass per filter:
        # 0.037 against 0.069 CPU s per LeNet step at batch 64 (docs/performance.md)
        return (_DEPTHWISE and len(win.kernel) == 2 and groups == channels > 1 and
                max(win.kernel) <= ext.DEPTHWISE_MAX_SIDE)

    def forward(self, x, w, bias=None):
        """(N, F, *out): each output channel from its one input channel, plus bias."""
        return ext.depthwise_forward(np.ascontiguousarray(x), np.ascontiguousarray(w), bias,
                                     **self.geometry)

    def backward(self, dy, x, w, need_x=True, need_w=True):
        """(gradient for x, gradient for w) of sum(dy * forward(x, w)); None where not needed."""
        dy = np.ascontiguousarray(dy, dtype=w.dtype)
        dx = ext.depthwise_backward_data(dy, np.ascontiguousarray(w), x.shape,
                                         **self.geometry) if need_x else None
        dw = ext.depthwise_backward_weight(np.ascontiguousarray(x), dy, self.win.kernel,
                                           **self.geometry) if need_w else None
        return dx, dw
