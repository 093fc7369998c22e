"""`mx.np.random`: NumPy-style sampling on minigluon's shared random state.

Seed it with `mx.npx.seed(n)` (or `mx.random.seed(n)`); draws then repeat exactly.
"""
import numpy as _np

from ..ndarray import random as _nd_random
from .dispatch import as_input
from .multiarray import context_arg, from_nd

__all__ = ["uniform", "normal", "randint", "shuffle"]


def _draw(fn, params, size, dtype, ctx):
    """Scalar parameters draw `size` samples; array parameters one sample per element."""
    params = [v if isinstance(v, (int, float)) else as_input(v) for v in params]
    arrays = [v for v in params if not isinstance(v, (int, float))]
    if arrays and size is not None and tuple(_np.atleast_1d(size)) != arrays[0].shape:
        raise ValueError(f"size={size} with array parameters of shape {arrays[0].shape} is "
                         "not supported; leave size=None to draw one sample per element")
    shape = None if arrays else (() if size is None else size)
    return from_nd(fn(*params, shape, dtype, ctx))


def uniform(low=0.0, high=1.0, size=None, dtype=None, ctx=None, device=None):
    """Samples from the uniform distribution on [low, high); float32 by default.

    >>> mx.np.random.uniform(-1, 1, size=(2, 3)).shape
    (2, 3)
    """
    return _draw(_nd_random.uniform, (low, high), size, dtype, context_arg(ctx, device))


def normal(loc=0.0, scale=1.0, size=None, dtype=None, ctx=None, device=None):
    """Samples from the normal distribution N(loc, scale**2); float32 by default."""
    return _draw(_nd_random.normal, (loc, scale), size, dtype, context_arg(ctx, device))


def randint(low, high=None, size=None, dtype=None, ctx=None, device=None):
    """Integers drawn uniformly from [low, high) (from [0, low) when high is None); int64
    by default."""
    if high is None:
        low, high = 0, low
    return from_nd(_nd_random.randint(low, high, () if size is None else size,
                                      dtype or _np.int64, context_arg(ctx, device)))


def shuffle(x):
    """Shuffle the rows (first axis) of the mx.np array `x` in place; returns None."""
    if not hasattr(x, "_data") or getattr(x, "ndim", 0) == 0:
        raise TypeError(f"shuffle: expected an mx.np array with at least one axis, got "
                        f"{type(x).__name__}")
    x._data[...] = _nd_random.shuffle(x)._data


def __getattr__(name):
    hint = " (seed with mx.npx.seed(n))" if name == "seed" else ""
    raise AttributeError(f"mx.np.random.{name} is not implemented in minigluon{hint}; "
                         f"available: {', '.join(__all__)}. Draw with NumPy and convert with "
                         "mx.np.array(...) if you need another distribution")
