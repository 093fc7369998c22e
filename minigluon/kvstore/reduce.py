"""Summing the values of several devices into one array: the single place a faster
kernel plugs in, shared by the in-process stores (local.py) and the distributed worker
(dist.py).

>>> out = np.empty(3, np.float32)
>>> reduce_sum([np.ones(3, np.float32), np.ones(3, np.float32)], out)    # out: [2, 2, 2]
"""
import numpy as np

import minigluon_ext

__all__ = ["reduce_sum", "sum_into"]

_EXT_DTYPES = (np.float16, np.float32, np.float64)


def reduce_sum(arrays, out):
    """`out[...] = arrays[0] + arrays[1] + ...` on raw arrays of one device (numpy or cupy).

    Host arrays of float dtypes go through minigluon_ext.sum_into (C, multi-threaded for
    big arrays); others are summed by the array module. Both add left to right, so the
    result does not depend on which path runs it.
    """
    if _ext_can_sum(arrays, out):
        minigluon_ext.sum_into(out, arrays)
        return
    out[...] = arrays[0]
    for arr in arrays[1:]:
        out += arr


def _ext_can_sum(arrays, out):
    return (isinstance(out, np.ndarray) and out.dtype.type in _EXT_DTYPES
            and out.flags.c_contiguous and out.flags.writeable
            and all(isinstance(a, np.ndarray) and a.dtype == out.dtype and a.shape == out.shape
                    and a.flags.c_contiguous for a in arrays))


def sum_into(values, out):
    """Sum NDArrays from any devices into the NDArray `out`, on out's device."""
    ctx = out.context
    raws = [v.as_in_context(ctx)._data for v in values]
    with ctx.scope():
        reduce_sum(raws, out._data)
