"""Reductions and orderings: sum, prod, mean, max, min, argmax, argmin, any, all, std, var,
cumsum, sort and argsort. A reduction over every axis gives a 0-d array, as in NumPy."""
from .dispatch import as_input, call


def sum(a, axis=None, dtype=None, keepdims=False):   # noqa: A001 (NumPy's name)
    """Sum over `axis` (all axes when None); bools and small integers sum as int64.

    >>> float(mx.np.sum(mx.np.ones((2, 3))))
    6.0
    """
    return as_input(a).sum(axis=axis, dtype=dtype, keepdims=keepdims)


def prod(a, axis=None, dtype=None, keepdims=False):
    """Product over `axis` (all axes when None)."""
    return as_input(a).prod(axis=axis, dtype=dtype, keepdims=keepdims)


def mean(a, axis=None, dtype=None, keepdims=False):
    """Mean over `axis` (all axes when None); integer arrays average as float32."""
    return as_input(a).mean(axis=axis, dtype=dtype, keepdims=keepdims)


def max(a, axis=None, keepdims=False):   # noqa: A001 (NumPy's name)
    """Maximum over `axis` (all axes when None)."""
    return as_input(a).max(axis=axis, keepdims=keepdims)


def min(a, axis=None, keepdims=False):   # noqa: A001 (NumPy's name)
    """Minimum over `axis` (all axes when None)."""
    return as_input(a).min(axis=axis, keepdims=keepdims)


amax, amin = max, min


def argmax(a, axis=None, keepdims=False):
    """int64 index of the maximum along `axis` (into the flattened array when None)."""
    return as_input(a).argmax(axis=axis, keepdims=keepdims)


def argmin(a, axis=None, keepdims=False):
    """int64 index of the minimum along `axis` (into the flattened array when None)."""
    return as_input(a).argmin(axis=axis, keepdims=keepdims)


def any(a, axis=None, keepdims=False):   # noqa: A001 (NumPy's name)
    """True where any element along `axis` is non-zero."""
    return as_input(a).any(axis=axis, keepdims=keepdims)


def all(a, axis=None, keepdims=False):   # noqa: A001 (NumPy's name)
    """True where every element along `axis` is non-zero."""
    return as_input(a).all(axis=axis, keepdims=keepdims)


def var(a, axis=None, ddof=0, keepdims=False):
    """Variance over `axis`, dividing by n - ddof; integer arrays give float32."""
    return as_input(a).var(axis=axis, ddof=ddof, keepdims=keepdims)


def std(a, axis=None, ddof=0, keepdims=False):
    """Standard deviation over `axis`, dividing by n - ddof."""
    return as_input(a).std(axis=axis, ddof=ddof, keepdims=keepdims)


def cumsum(a, axis=None, dtype=None):
    """Cumulative sum along `axis` (of the flattened array when None)."""
    return as_input(a).cumsum(axis=axis, dtype=dtype)


def sort(a, axis=-1):
    """A sorted copy of `a` along `axis` (of the flattened array when None)."""
    a = as_input(a)
    data, axis = (a.flatten(), 0) if axis is None else (a, axis)
    return call("sort", data, axis=axis)


def argsort(a, axis=-1):
    """int64 indices that sort `a` along `axis` (the flattened array when None)."""
    return as_input(a).argsort(axis=axis)
