"""Operators with NumPy semantics, for `mx.np`.

Most are adapters: they call an op registered in ops_elemwise / ops_reduce / ops_shape (so
forward and backward stay defined once) and change only what NumPy does differently from
MXNet 1.x:

- operands of different dtypes are promoted (`result_dtype`), comparisons give bool;
- reductions, `x[i]` and `squeeze` may give 0-d arrays, where MXNet 1.x keeps shape (1,);
- argmax/argmin give int64 indices; exp, log, ... of integers give float32.

The rest are NumPy functions that MXNet 1.x has no operator for (matmul, cumsum, var,
any/all, bitwise and/or/xor/invert, exact int64 argmax/argmin) and a reshape whose 0 means
a zero-size dimension rather than "copy this dimension".
"""
import numpy as np

from ..base import ShapeError
from .ops_reduce import norm_axis
from .ops_shape import is_basic_index
from .registry import OPS, register

DEFAULT_FLOAT = np.dtype(np.float32)   # MXNet's default float dtype


def _base(name):
    return OPS[name].fn


def _is_array(x):
    return hasattr(x, "shape") and not isinstance(x, (np.generic, int, float, bool))


# ---- dtype promotion --------------------------------------------------------------------
def result_dtype(lhs, rhs):
    """The dtype NumPy gives `lhs op rhs`, with MXNet's rule that mixing integers and
    floats gives the float operand's dtype (so float32 never silently becomes float64).
    Scalars are weak: they keep the array's dtype unless their kind is wider."""
    if _is_array(lhs) and _is_array(rhs):
        a, b = lhs.dtype, rhs.dtype
        if (a.kind == "f") != (b.kind == "f"):
            return a if a.kind == "f" else b
        return np.result_type(a, b)
    array, scalar = (lhs, rhs) if _is_array(lhs) else (rhs, lhs)
    dtype = array.dtype
    if isinstance(scalar, (float, np.floating)) and dtype.kind in "biu":
        return DEFAULT_FLOAT
    if dtype.kind == "b" and not isinstance(scalar, (bool, np.bool_)):
        return np.dtype(np.int64)
    return dtype


def _cast(x, dtype):
    return x.astype(dtype) if _is_array(x) and x.dtype != dtype else x


def _promote(lhs, rhs, to_float=False):
    dtype = result_dtype(lhs, rhs)
    if to_float and dtype.kind in "biu":
        dtype = DEFAULT_FLOAT
    return _cast(lhs, dtype), _cast(rhs, dtype)


def _as_float(x):
    return x.astype(DEFAULT_FLOAT) if x.dtype.kind in "biu" else x


def _to_shape(result, shape):
    """An op's (output, backward) with the output reshaped to `shape` (same size)."""
    out, backward = result
    if out.shape == tuple(shape):
        return out, backward
    base_shape = out.shape
    if backward is None:
        return out.reshape(shape), None
    return out.reshape(shape), lambda dy: backward(dy.reshape(base_shape))


# ---- element-wise -----------------------------------------------------------------------
def _binary(name, base, to_float=False):
    def op(xp, lhs, rhs):
        return _base(base)(xp, *_promote(lhs, rhs, to_float))
    op.__name__ = name
    op.__doc__ = f"NumPy's {base}: broadcasting, with the operands' dtypes promoted."
    register(name, inputs=("lhs", "rhs"))(op)


def _compare(name, base):
    def op(xp, lhs, rhs):
        out, _ = _base(base)(xp, *_promote(lhs, rhs))
        return out.astype(bool), None
    op.__name__ = name
    op.__doc__ = f"NumPy's {base}: a bool array, with the operands' dtypes promoted."
    register(name, inputs=("lhs", "rhs"))(op)


def _float_unary(name, base):
    def op(xp, data):
        return _base(base)(xp, _as_float(data))
    op.__name__ = name
    op.__doc__ = f"NumPy's {base}: integer inputs give float32."
    register(name)(op)


def _bitwise(name, fn):
    def op(xp, lhs, rhs):
        lhs, rhs = _promote(lhs, rhs)
        return xp.asarray(getattr(xp, fn)(lhs, rhs)), None
    op.__name__ = name
    op.__doc__ = f"NumPy's {fn} of bool or integer operands."
    register(name, inputs=("lhs", "rhs"))(op)


@register("_np_invert")
def invert(xp, data):
    """NumPy's `~x`: logical not of bools, bitwise not of integers."""
    return xp.invert(data), None


@register("_np_logical_not")
def logical_not(xp, data):
    """True where `data` is zero (or False)."""
    return data == 0, None


for _name in ("add", "subtract", "multiply", "power", "maximum", "minimum", "modulo"):
    _binary("_np_" + _name, _name)
_binary("_np_true_divide", "divide", to_float=True)
for _name in ("equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal",
              "logical_and", "logical_or", "logical_xor"):
    _compare("_np_" + _name, _name)
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    _bitwise("_np_" + _name, _name)
for _name in ("exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "cbrt", "sin", "cos",
              "tan", "arctan", "sinh", "cosh", "tanh"):
    _float_unary("_np_" + _name, _name)


@register("_np_where", inputs=("condition", "x", "y"))
def where(xp, condition, x, y):
    """x where condition is true, else y; all three broadcast, x and y dtypes promoted."""
    if not (_is_array(x) or _is_array(y)):
        x = xp.asarray(x, dtype=_scalar_dtype(x))
    x, y = _promote(x, y)
    shapes = [getattr(v, "shape", ()) for v in (condition, x, y)]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ShapeError(f"where: condition, x and y of shapes {shapes} cannot be broadcast "
                         "together (each dimension must match or be 1)") from None
    dtype = x.dtype if _is_array(x) else y.dtype
    cond, xb, yb = (xp.broadcast_to(xp.asarray(v, dtype=d), shape)
                    for v, d in ((condition, None), (x, dtype), (y, dtype)))
    return _base("where")(xp, cond, xb, yb)


def _scalar_dtype(value):
    if isinstance(value, (bool, np.bool_)):
        return np.dtype(bool)
    return DEFAULT_FLOAT if isinstance(value, (float, np.floating)) else np.dtype(np.int64)


@register("_np_clip")
def clip(xp, data, a_min=None, a_max=None):
    """Limit values to [a_min, a_max]; either bound may be None (unbounded)."""
    if a_min is None and a_max is None:
        raise ShapeError("clip: a_min and a_max are both None; give at least one bound")
    low, high = (np.iinfo(data.dtype).min, np.iinfo(data.dtype).max) \
        if data.dtype.kind in "iu" else (-np.inf, np.inf)
    return _base("clip")(xp, data, low if a_min is None else a_min,
                         high if a_max is None else a_max)


# ---- reductions -------------------------------------------------------------------------
def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _accumulator(dtype):
    """NumPy's dtype for sum/prod/cumsum: bools and small integers widen to 64 bits."""
    if dtype.kind == "b" or (dtype.kind == "i" and dtype.itemsize < 8):
        return np.dtype(np.int64)
    if dtype.kind == "u" and dtype.itemsize < 8:
        return np.dtype(np.uint64)
    return dtype


def _reduction(name, base, dtype_rule):
    def op(xp, data, axis=None, dtype=None, keepdims=False):
        data = _cast(data, np.dtype(dtype) if dtype is not None else dtype_rule(data.dtype))
        if isinstance(axis, tuple) and not axis:    # NumPy: reduce over no axis at all
            return data.copy(), lambda dy: (dy,)
        axes = norm_axis(base, axis, data.ndim)
        result = _base(base)(xp, data, axis=axes, keepdims=keepdims)
        return _to_shape(result, _reduced_shape(data.shape, axes, keepdims))
    op.__name__ = name
    op.__doc__ = f"NumPy's {base} over `axis` (all axes when None); 0-d when all reduce."
    register(name)(op)


_reduction("_np_sum", "sum", _accumulator)
_reduction("_np_prod", "prod", _accumulator)
_reduction("_np_mean", "mean", lambda d: DEFAULT_FLOAT if d.kind in "biu" else d)
_reduction("_np_max", "max", lambda d: d)
_reduction("_np_min", "min", lambda d: d)


def _arg_reduction(name, what, fn):
    def op(xp, data, axis=None, keepdims=False):
        if axis is not None:
            axis = norm_axis(name, axis, data.ndim)[0]
        if data.size == 0:
            raise ShapeError(f"{name}: the {what} of an empty array of shape {data.shape} "
                             "is undefined")
        return xp.asarray(fn(data, axis=axis, keepdims=keepdims)).astype(np.int64), None
    op.__name__ = name
    op.__doc__ = f"Index of the {what} along `axis` (of the flat array when None), int64."
    register("_np_" + name)(op)


_arg_reduction("argmax", "maximum", lambda x, **kw: x.argmax(**kw))
_arg_reduction("argmin", "minimum", lambda x, **kw: x.argmin(**kw))


def _truth_reduction(name, fn):
    def op(xp, data, axis=None, keepdims=False):
        axes = norm_axis(name, axis, data.ndim)
        return xp.asarray(fn(data, axis=axes, keepdims=keepdims)), None
    op.__name__ = name
    op.__doc__ = f"NumPy's {name} over `axis` (all axes when None), a bool array."
    register("_np_" + name)(op)


_truth_reduction("any", lambda x, **kw: x.any(**kw))
_truth_reduction("all", lambda x, **kw: x.all(**kw))


@register("_np_var")
def var(xp, data, axis=None, ddof=0, keepdims=False):
    """Variance over `axis`, divided by (n - ddof); integer inputs give float32."""
    x = _as_float(data)
    axes = norm_axis("var", axis, x.ndim)
    n = 1
    for a in axes:
        n *= x.shape[a]
    centered = x - x.mean(axis=axes, keepdims=True)
    out = xp.asarray((centered * centered).sum(axis=axes, keepdims=keepdims) / (n - ddof))

    def backward(dy):
        dy = dy.reshape(_reduced_shape(x.shape, axes, True))
        return (2 * centered * dy / (n - ddof),)
    return out.astype(x.dtype, copy=False), backward


@register("_np_cumsum")
def cumsum(xp, data, axis=None, dtype=None):
    """Cumulative sum along `axis` (of the flattened array when None)."""
    flat = data.reshape(-1) if axis is None else data
    ax = 0 if axis is None else norm_axis("cumsum", axis, data.ndim)[0]
    target = np.dtype(dtype) if dtype is not None else _accumulator(data.dtype)
    out = xp.cumsum(flat, axis=ax, dtype=target)

    def backward(dy):
        return (xp.flip(xp.cumsum(xp.flip(dy, ax), axis=ax), ax).reshape(data.shape),)
    return out, backward


# ---- shapes and indexing ----------------------------------------------------------------
@register("_np_reshape")
def reshape(xp, data, newshape):
    """NumPy's reshape: -1 infers one dimension; 0 is a zero-size dimension."""
    try:
        out = data.reshape(newshape)
    except (ValueError, TypeError) as err:
        raise ShapeError(f"reshape: cannot reshape an array of shape {data.shape} "
                         f"(size {data.size}) into shape {newshape}: {err}") from None
    return out, lambda dy: (dy.reshape(data.shape),)


@register("_np_squeeze")
def squeeze(xp, data, axis=None):
    """Remove size-1 dimensions (only those in `axis` when given); may give a 0-d array."""
    axes = tuple(i for i, n in enumerate(data.shape) if n == 1) if axis is None \
        else norm_axis("squeeze", axis, data.ndim)
    return _to_shape(_base("squeeze")(xp, data, axis=axis),
                     _reduced_shape(data.shape, axes, False))


@register("_np_getitem")
def getitem(xp, data, key):
    """data[key] with NumPy semantics; integer indices into every axis give a 0-d array."""
    result = _base("_getitem")(xp, data, key)
    if not is_basic_index(key):
        return result
    return _to_shape(result, data[key].shape)


# ---- products ---------------------------------------------------------------------------
@register("_np_dot", inputs=("a", "b"))
def dot(xp, a, b):
    """NumPy's dot: a sum over a's last axis and b's second-to-last (its only, if 1-D)."""
    a, b = _promote(a, b)
    if a.ndim == 0 or b.ndim == 0:
        return _base("multiply")(xp, a, b)
    if b.ndim <= 2:
        return _to_shape(_base("dot")(xp, a, b), a.shape[:-1] + b.shape[1:])
    out, backward = _base("dot")(xp, a, xp.moveaxis(b, -2, 0))

    def moved_back(dy):
        ga, gb = backward(dy)
        return ga, xp.moveaxis(gb, 0, -2)
    return out, moved_back


def _sum_to(g, shape):
    """Sum a broadcast gradient down to `shape` (leading axes and size-1 axes)."""
    extra = g.ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


@register("_np_matmul", inputs=("a", "b"))
def matmul(xp, a, b):
    """NumPy's matmul: matrix products over the last two axes, broadcasting the others."""
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: operands of shapes {a.shape} and {b.shape}; matmul needs "
                         "at least 1-D operands, use multiply for scalars")
    a, b = _promote(a, b)
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    try:
        out = xp.matmul(a2, b2)
    except ValueError:
        raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} are not aligned (the last "
                         "axis of a must match the second-to-last of b; other axes must "
                         "broadcast)") from None
    shape = out.shape[:-2] + out.shape[-2:-1] * (a.ndim > 1) + out.shape[-1:] * (b.ndim > 1)

    def backward(dy):
        dy = dy.reshape(out.shape)
        ga = _sum_to(xp.matmul(dy, xp.swapaxes(b2, -1, -2)), a2.shape).reshape(a.shape)
        gb = _sum_to(xp.matmul(xp.swapaxes(a2, -1, -2), dy), b2.shape).reshape(b.shape)
        return ga, gb
    return out.reshape(shape), backward
