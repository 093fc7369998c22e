"""2-D max, average and sum pooling of device (CuPy) arrays on minigluon_ext's CUDA kernels.

Max pooling keeps the forward's argmax, and its gradient gathers per input element over the
windows that hold it (the window is known here): the C kernels' bits. Average and sum
pooling divide each window as the Pooling operator counts it. The functions take the
kernels and the array module, so tests run this very path on NumPy arrays
(device_kernels._STAND_IN).
"""
__all__ = ["device_pool"]


def device_pool(kernels, xp, data, win, pool_type, convention, count_include_pad):
    """(out, backward) of a 2-D pooling of `data` over window `win`."""
    x = xp.ascontiguousarray(data)
    window = dict(kernel=win.kernel, stride=win.stride, pad=win.pad)
    if pool_type == "max":
        out, argmax = kernels.max_pool2d(x, win.kernel, win.stride, win.pad, convention)

        def max_backward(dy):
            dy = xp.ascontiguousarray(dy, dtype=x.dtype)
            return (kernels.max_pool2d_backward(dy, argmax, x.shape[2:], **window),)
        return out, max_backward
    out = kernels.avg_pool2d(x, win.kernel, win.stride, win.pad, convention, count_include_pad,
                             pool_type)

    def avg_backward(dy):
        dy = xp.ascontiguousarray(dy, dtype=x.dtype)
        return (kernels.avg_pool2d_backward(dy, x.shape[2:], win.kernel, win.stride, win.pad,
                                            count_include_pad, pool_type),)
    return out, avg_backward
