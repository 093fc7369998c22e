"""Operators with no array input that create values, so traced graphs (`F.zeros(...)` in a
hybrid_forward) can hold them. `mx.nd.zeros` and friends in creation.py are the direct way."""
import numpy as np

from .registry import register


def _dtype(dtype):
    return np.dtype(np.float32 if dtype is None else dtype)


@register("_zeros", inputs=())
def zeros(xp, shape, dtype=None, ctx=None):
    """An array of zeros."""
    return xp.zeros(tuple(shape), dtype=_dtype(dtype)), None


@register("_ones", inputs=())
def ones(xp, shape, dtype=None, ctx=None):
    """An array of ones."""
    return xp.ones(tuple(shape), dtype=_dtype(dtype)), None


@register("_full", inputs=())
def full(xp, shape, value, dtype=None, ctx=None):
    """An array filled with `value`."""
    return xp.full(tuple(shape), value, dtype=_dtype(dtype)), None


@register("_arange", inputs=())
def arange(xp, start, stop=None, step=1.0, repeat=1, dtype=None, ctx=None):
    """Evenly spaced values in [start, stop)."""
    out = xp.arange(start, stop, step, dtype=_dtype(dtype))
    return (xp.repeat(out, repeat) if repeat > 1 else out), None
