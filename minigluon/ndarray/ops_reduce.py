"""Reductions along axes (sum, mean, max, min, prod, norm, argmax, argmin) and ordering ops
(topk, sort, argsort). softmax and log_softmax live in ops_softmax.py."""
import numpy as np

from ..base import ShapeError
from .registry import Backward, register


def norm_axis(name, axis, ndim, exclude=False):
    """MXNet axis argument -> a sorted tuple of non-negative axes.

    None and () mean all axes, with or without exclude (MXNet's ReduceAxesShapeImpl)."""
    if axis is None or axis == ():
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise ShapeError(f"{name}: axis {a} is out of range for an array with {ndim} "
                             "dimensions")
        out.append(int(a) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ShapeError(f"{name}: axis {axis} repeats a dimension")
    if exclude:
        out = [i for i in range(ndim) if i not in out]
    return tuple(sorted(out))


def _at_least_1d(out):
    """MXNet 1.x has no 0-d arrays: a reduction to a scalar has shape (1,)."""
    return out.reshape(1) if out.ndim == 0 else out


def _expand(g, shape, axes):
    """Reshape a reduced gradient so it broadcasts against the input of `shape`."""
    kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
    return g.reshape(kept)


def _reducer(name, forward, grad, aliases=(), traceable=False):
    """Register a reduction; `traceable`: `grad` uses only operators and `xp.*` calls that
    are registered ops, so autograd.grad(create_graph=True) can record it."""
    def op(xp, data, axis=None, keepdims=False, exclude=False):
        axes = norm_axis(name, axis, data.ndim, exclude)
        out = forward(xp, data, axes)
        out = xp.asarray(out).astype(data.dtype, copy=False)
        result = out.reshape(tuple(1 if i in axes else n for i, n in enumerate(data.shape))) \
            if keepdims else _at_least_1d(out)
        if traceable:
            return result, Backward(_reduce_grad, xp, data, out, grad, axes)

        def backward(dy):
            return (grad(xp, data, _expand(out, data.shape, axes), _expand(dy, data.shape, axes),
                         axes),)
        return result, backward
    op.__name__ = name
    op.__doc__ = f"{name} over `axis` (all axes when None); keepdims and exclude as in MXNet."
    register(name, aliases=aliases)(op)


def _reduce_grad(xp, data, out, grad, axes, dy):
    return (grad(xp, data, _expand(out, data.shape, axes), _expand(dy, data.shape, axes),
                 axes),)


def _count(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _extreme_grad(xp, x, y, dy, axes):
    # ties share the gradient equally, so the sum of the gradient is preserved
    mask = (x == y).astype(x.dtype)
    return dy * mask / mask.sum(axis=axes, keepdims=True)


_reducer("sum", lambda xp, x, a: x.sum(axis=a), lambda xp, x, y, dy, a: dy + xp.zeros_like(x),
         aliases=("sum_axis",), traceable=True)
_reducer("mean", lambda xp, x, a: x.mean(axis=a) if x.size else x.sum(axis=a),
         lambda xp, x, y, dy, a: dy / max(_count(x.shape, a), 1) + xp.zeros_like(x),
         traceable=True)
_reducer("max", lambda xp, x, a: x.max(axis=a), _extreme_grad, aliases=("max_axis",),
         traceable=True)
_reducer("min", lambda xp, x, a: x.min(axis=a), _extreme_grad, aliases=("min_axis",),
         traceable=True)
_reducer("prod", lambda xp, x, a: x.prod(axis=a),
         lambda xp, x, y, dy, a: dy * _prod_except(xp, x, a))
_reducer("nansum", lambda xp, x, a: xp.nansum(x, axis=a),
         lambda xp, x, y, dy, a: xp.where(xp.isnan(x), 0, dy))
_reducer("nanprod", lambda xp, x, a: xp.nanprod(x, axis=a),
         lambda xp, x, y, dy, a: xp.where(
             xp.isnan(x), 0, dy * _prod_except(xp, xp.where(xp.isnan(x), 1, x), a)))


def _prod_except(xp, x, axes):
    """d prod / d x_i = product of the other elements, exact also where x has zeros."""
    moved = xp.moveaxis(x, axes, tuple(range(len(axes))))
    flat = moved.reshape((-1,) + moved.shape[len(axes):])
    ones = xp.ones((1,) + flat.shape[1:], dtype=x.dtype)
    left = xp.cumprod(xp.concatenate([ones, flat[:-1]]), axis=0)
    right = xp.flip(xp.cumprod(xp.concatenate([ones, xp.flip(flat, 0)[:-1]]), axis=0), 0)
    return xp.moveaxis((left * right).reshape(moved.shape), tuple(range(len(axes))), axes)


@register("norm")
def norm(xp, data, ord=2, axis=None, keepdims=False, out_dtype=None):
    """The L1 or L2 norm over `axis` (all elements when None)."""
    if ord not in (1, 2):
        raise ShapeError(f"norm: ord must be 1 or 2, got {ord}")
    axes = norm_axis("norm", axis, data.ndim)
    if ord == 1:
        out = xp.abs(data).sum(axis=axes, keepdims=True)
    else:
        out = xp.sqrt((data * data).sum(axis=axes, keepdims=True))
    out = out.astype(data.dtype, copy=False)
    result = out if keepdims else _at_least_1d(
        out.reshape(tuple(n for i, n in enumerate(data.shape) if i not in axes)))

    def backward(dy):
        dy = _expand(dy, data.shape, axes)
        if ord == 1:
            return (dy * xp.sign(data),)
        return (dy * data / xp.where(out == 0, 1, out),)
    return result, backward


def _arg_reducer(name, fn):
    def op(xp, data, axis=None, keepdims=False):
        if axis is None:
            out = fn(xp, data.reshape(-1), 0)
            out = out.reshape((1,) * data.ndim) if keepdims else out
        else:
            ax = norm_axis(name, axis, data.ndim)[0]
            out = fn(xp, data, ax)
            if keepdims:
                out = xp.expand_dims(out, ax)
        # MXNet returns indices as float32, and never as a 0-d array
        out = xp.asarray(out).astype(np.float32)
        return (out if keepdims else _at_least_1d(out)), None
    op.__name__ = name
    op.__doc__ = f"Index of the {name[3:]} along `axis`, as float32 (MXNet's convention)."
    register(name)(op)


_arg_reducer("argmax", lambda xp, x, a: xp.argmax(x, axis=a))
_arg_reducer("argmin", lambda xp, x, a: xp.argmin(x, axis=a))


@register("argmax_channel")
def argmax_channel(xp, data):
    """Index of the maximum along the last axis (the channels of each row), as float32."""
    if data.ndim == 0 or data.shape[-1] == 0:
        raise ShapeError(f"argmax_channel: needs a last axis of at least one element, got "
                         f"shape {data.shape}")
    return _at_least_1d(xp.asarray(xp.argmax(data, axis=-1)).astype(np.float32)), None


def _sort_key(data, is_ascend):
    """Keys whose ascending order is the wanted order; widen before negating unsigned ints."""
    if is_ascend:
        return data
    return -data.astype(np.int64) if data.dtype.kind in "ub" else -data


@register("topk")
def topk(xp, data, axis=-1, k=1, ret_typ="indices", is_ascend=False, dtype="float32"):
    """The k largest (or smallest) entries along `axis`: indices, values, both, or a mask."""
    if ret_typ not in ("indices", "value", "both", "mask"):
        raise ShapeError(f"topk: ret_typ must be indices, value, both or mask, got {ret_typ!r}")
    ax = norm_axis("topk", axis, data.ndim)[0] if axis is not None else None
    flat = data.reshape(-1) if ax is None else data
    ax = 0 if ax is None else ax
    n = flat.shape[ax]
    if not 0 < k <= n and k != 0:
        raise ShapeError(f"topk: k={k} must be between 1 and {n} (the size of axis {axis})")
    k = n if k <= 0 else k
    order = xp.argsort(_sort_key(flat, is_ascend), axis=ax, kind="stable")
    idx = xp.take(order, xp.arange(k), axis=ax)
    values = xp.take_along_axis(flat, idx, axis=ax)
    if ret_typ == "mask":
        mask = xp.zeros_like(flat)
        xp.put_along_axis(mask, idx, 1, axis=ax)
        return mask.reshape(data.shape), None
    indices = idx.astype(np.dtype(dtype))

    def backward(dy_values, dy_indices=None):
        g = xp.zeros_like(flat)
        xp.put_along_axis(g, idx, dy_values, axis=ax)
        return (g.reshape(data.shape),)
    if ret_typ == "indices":
        return indices, None
    if ret_typ == "value":
        return values, backward
    return (values, indices), backward


@register("sort")
def sort(xp, data, axis=-1, is_ascend=True):
    """The values sorted along `axis`."""
    order = xp.argsort(_sort_key(data, is_ascend), axis=axis, kind="stable")
    out = xp.take_along_axis(data, order, axis=axis)

    def backward(dy):
        g = xp.zeros_like(data)
        xp.put_along_axis(g, order, dy, axis=axis)
        return (g,)
    return out, backward


@register("argsort")
def argsort(xp, data, axis=-1, is_ascend=True, dtype="float32"):
    """The indices that sort `data` along `axis`, as `dtype` (float32 by default)."""
    order = xp.argsort(_sort_key(data, is_ascend), axis=axis, kind="stable")
    return order.astype(np.dtype(dtype)), None
