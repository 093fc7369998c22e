"""Element-wise operators: unary math, broadcasting binary arithmetic, comparisons,
activations, clip, where and casts. Each op's forward and backward sit side by side.

Gradient formulas are written for the array module `xp` with Python operators and `xp.*`
calls only, so one formula serves both the fast NumPy backward and, through
`registry.Backward`, the recorded backward of `autograd.grad(create_graph=True)`."""
import math

import numpy as np

import minigluon_ext as ext

from ..base import DTypeError, ShapeError
from . import sample_parts
from .device_kernels import device_kernels
from .registry import Backward, check_same_dtype, register

_SCALARS = (int, float, bool, np.generic)
# relu of big host arrays uses minigluon_ext's threaded kernels (tests turn this off)
_HOST_KERNELS = True
_HOST_MIN_SIZE = 1 << 14


def _is_array(x):
    return not isinstance(x, _SCALARS) and x is not None


# ---- unary ------------------------------------------------------------------------------
def register_unary(name, forward, grad=None, aliases=()):
    """Register `name`: y = forward(xp, x); dx = grad(xp, x, y, dy). Keeps x's dtype.

    `grad` uses only Python operators and `xp.*` calls on x, y and dy, so that
    `autograd.grad(create_graph=True)` can record it (see `registry.Backward`).
    """
    def op(xp, data):
        if not hasattr(data, "dtype"):
            raise DTypeError(f"{name}: data must be an NDArray, got {type(data).__name__} "
                             f"{data!r}; convert it with mx.nd.array(...) first")
        out = forward(xp, data)
        if out.dtype != data.dtype:
            out = out.astype(data.dtype)
        if grad is None:
            return out, None
        return out, Backward(_unary_grads, xp, grad, data, out)
    op.__name__ = name
    op.__doc__ = f"Element-wise {name}."
    register(name, aliases=aliases)(op)


_unary = register_unary


def _unary_grads(xp, grad, x, y, dy):
    return (grad(xp, x, y, dy),)


def _sigmoid(xp, x):
    # exp of a negative magnitude only, so large |x| neither overflows nor warns
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _erf(xp, x):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), enough for float32 GELU
    t = 1.0 / (1.0 + 0.3275911 * xp.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                + t * 1.061405429))))
    return xp.sign(x) * (1 - poly * xp.exp(-x * x))


_unary("negative", lambda xp, x: -x, lambda xp, x, y, dy: -dy)
_unary("reciprocal", lambda xp, x: 1 / x, lambda xp, x, y, dy: -dy * y * y)
_unary("abs", lambda xp, x: xp.abs(x), lambda xp, x, y, dy: dy * xp.sign(x))
_unary("sign", lambda xp, x: xp.sign(x), lambda xp, x, y, dy: dy * 0)
# NumPy's vectorised float32 exp may be 1 ulp from the correctly rounded value MXNet's expf
# gives (exp(1) = 2.718282, not 2.7182817); going through float64 would cost 2.5-4x
_unary("exp", lambda xp, x: xp.exp(x), lambda xp, x, y, dy: dy * y)
_unary("expm1", lambda xp, x: xp.expm1(x), lambda xp, x, y, dy: dy * (y + 1))
_unary("log", lambda xp, x: xp.log(x), lambda xp, x, y, dy: dy / x)
_unary("log1p", lambda xp, x: xp.log1p(x), lambda xp, x, y, dy: dy / (1 + x))
_unary("log2", lambda xp, x: xp.log2(x), lambda xp, x, y, dy: dy / (x * math.log(2)))
_unary("log10", lambda xp, x: xp.log10(x), lambda xp, x, y, dy: dy / (x * math.log(10)))
_unary("sqrt", lambda xp, x: xp.sqrt(x), lambda xp, x, y, dy: dy / (2 * y))
_unary("rsqrt", lambda xp, x: 1 / xp.sqrt(x), lambda xp, x, y, dy: -0.5 * dy * y * y * y)
_unary("cbrt", lambda xp, x: xp.cbrt(x), lambda xp, x, y, dy: dy / (3 * y * y))
_unary("square", lambda xp, x: x * x, lambda xp, x, y, dy: 2 * dy * x)


def _on_host(xp, *arrays):
    """True for big C-contiguous host arrays of one dtype that minigluon_ext's kernels take."""
    a = arrays[0]
    return (_HOST_KERNELS and xp is np and a.size >= _HOST_MIN_SIZE and
            a.dtype in ext.LAYER_DTYPES and
            all(isinstance(b, np.ndarray) and b.flags.c_contiguous and b.dtype == a.dtype and
                b.shape == a.shape for b in arrays))


def _relu(xp, x):
    kernels = device_kernels(xp, x)
    if kernels is not None:
        return kernels.relu(xp.ascontiguousarray(x))
    return ext.relu(x) if _on_host(xp, x) else xp.maximum(x, 0)


def _relu_grad(xp, x, y, dy):
    kernels = device_kernels(xp, x, dy) if dy.shape == x.shape else None
    if kernels is not None:
        return kernels.relu_backward(xp.ascontiguousarray(x), xp.ascontiguousarray(dy))
    return ext.relu_backward(x, dy) if _on_host(xp, x, dy) else dy * (x > 0)


_unary("relu", _relu, _relu_grad)
_unary("sigmoid", _sigmoid, lambda xp, x, y, dy: dy * y * (1 - y))
_unary("tanh", lambda xp, x: xp.tanh(x), lambda xp, x, y, dy: dy * (1 - y * y))
_unary("softrelu", lambda xp, x: xp.logaddexp(0, x),
       lambda xp, x, y, dy: dy * _sigmoid(xp, x), aliases=("softplus",))
_unary("softsign", lambda xp, x: x / (1 + xp.abs(x)),
       lambda xp, x, y, dy: dy / (1 + xp.abs(x)) ** 2)
_unary("erf", _erf, lambda xp, x, y, dy: dy * (2 / math.sqrt(math.pi)) * xp.exp(-x * x))
_unary("sin", lambda xp, x: xp.sin(x), lambda xp, x, y, dy: dy * xp.cos(x))
_unary("cos", lambda xp, x: xp.cos(x), lambda xp, x, y, dy: -dy * xp.sin(x))
_unary("tan", lambda xp, x: xp.tan(x), lambda xp, x, y, dy: dy * (1 + y * y))
_unary("arctan", lambda xp, x: xp.arctan(x), lambda xp, x, y, dy: dy / (1 + x * x))
_unary("sinh", lambda xp, x: xp.sinh(x), lambda xp, x, y, dy: dy * xp.cosh(x))
_unary("cosh", lambda xp, x: xp.cosh(x), lambda xp, x, y, dy: dy * xp.sinh(x))
for _name in ("floor", "ceil", "rint", "trunc", "fix"):
    _unary(_name, (lambda f: lambda xp, x: getattr(xp, f)(x))(_name),
           lambda xp, x, y, dy: dy * 0)
_unary("round", lambda xp, x: xp.where(x >= 0, xp.floor(x + 0.5), xp.ceil(x - 0.5)),
       lambda xp, x, y, dy: dy * 0)
_unary("logical_not", lambda xp, x: x == 0)
_unary("zeros_like", lambda xp, x: xp.zeros_like(x))
_unary("ones_like", lambda xp, x: xp.ones_like(x))


@register("identity", aliases=("_copy", "copy"))
def identity(xp, data):
    """A copy of the input; gradients pass through unchanged."""
    return data.copy(), Backward(lambda m, dy: (dy,), xp)


@register("BlockGrad", aliases=("stop_gradient",))
def block_grad(xp, data):
    """The input, with no gradient flowing back through it."""
    return data.copy(), None


@register("cast", aliases=("Cast",))
def cast(xp, data, dtype):
    """The input converted to `dtype`; the gradient is converted back."""
    out = data.astype(np.dtype(dtype))
    return out, Backward(lambda m, x, dy: (dy.astype(x.dtype),), xp, data)


# ---- binary, with NumPy broadcasting and scalar operands --------------------------------
def _broadcast_shape(name, xp, lhs, rhs):
    if not (_is_array(lhs) and _is_array(rhs)):
        return
    if lhs.dtype != rhs.dtype:
        raise DTypeError(f"{name}: operands have different dtypes {lhs.dtype} and "
                         f"{rhs.dtype}; cast one with .astype() first")
    try:
        np.broadcast_shapes(lhs.shape, rhs.shape)
    except ValueError:
        raise ShapeError(f"{name}: shapes {lhs.shape} and {rhs.shape} cannot be broadcast "
                         "together (each dimension must match or be 1)") from None


def _result_dtype(lhs, rhs):
    return lhs.dtype if _is_array(lhs) else rhs.dtype


def _binary(name, forward, grad_lhs=None, grad_rhs=None, aliases=()):
    """Register a broadcasting op: out = forward(xp, l, r); grads get (xp, l, r, out, dy)."""
    def op(xp, lhs, rhs):
        _broadcast_shape(name, xp, lhs, rhs)
        out = forward(xp, lhs, rhs)
        dtype = _result_dtype(lhs, rhs)
        if not hasattr(out, "dtype") or out.dtype != dtype:
            out = xp.asarray(out).astype(dtype)
        if grad_lhs is None:
            return out, None

        return out, Backward(_binary_grads, xp, lhs, rhs, out, grad_lhs, grad_rhs)
    op.__name__ = name
    op.__doc__ = f"Element-wise {name} with broadcasting; either side may be a scalar."
    broadcast = tuple(a for a in aliases if a.startswith("broadcast_"))
    register(name, inputs=("lhs", "rhs"), aliases=tuple(a for a in aliases if a not in broadcast),
             lenient_aliases=broadcast)(op)


def _binary_grads(xp, lhs, rhs, out, grad_lhs, grad_rhs, dy):
    gl = grad_lhs(xp, lhs, rhs, out, dy) if _is_array(lhs) else None
    gr = grad_rhs(xp, lhs, rhs, out, dy) if _is_array(rhs) else None
    return gl, gr


def _pow_grad_rhs(xp, l, r, out, dy):
    safe = xp.where(l > 0, l, 1)
    return dy * out * xp.log(safe)


# two big host arrays of one shape (a ResNet's shortcut and its branch) are added by
# samples over the compute threads, NumPy's bits (sample_parts.py): 8 MiB took 1.66 ms on
# the calling thread, 0.92 split in two (quiet, 2 threads)
_binary("add", lambda xp, l, r: sample_parts.add(l, r), lambda xp, l, r, o, dy: dy,
        lambda xp, l, r, o, dy: dy,
        aliases=("broadcast_add", "broadcast_plus", "elemwise_add", "_plus", "plus"))
_binary("subtract", lambda xp, l, r: l - r, lambda xp, l, r, o, dy: dy,
        lambda xp, l, r, o, dy: -dy,
        aliases=("broadcast_sub", "broadcast_minus", "elemwise_sub", "_minus", "minus"))
_binary("multiply", lambda xp, l, r: l * r, lambda xp, l, r, o, dy: dy * r,
        lambda xp, l, r, o, dy: dy * l, aliases=("broadcast_mul", "elemwise_mul", "_mul"))
_binary("divide", lambda xp, l, r: l / r, lambda xp, l, r, o, dy: dy / r,
        lambda xp, l, r, o, dy: -dy * l / (r * r),
        aliases=("broadcast_div", "elemwise_div", "_div", "true_divide"))
_binary("modulo", lambda xp, l, r: xp.mod(l, r),
        lambda xp, l, r, o, dy: dy, lambda xp, l, r, o, dy: -dy * xp.floor(l / r),
        aliases=("broadcast_mod", "mod"))
_binary("power", lambda xp, l, r: l ** r, lambda xp, l, r, o, dy: dy * r * l ** (r - 1),
        _pow_grad_rhs, aliases=("broadcast_power", "pow"))
_binary("maximum", lambda xp, l, r: xp.maximum(l, r),
        lambda xp, l, r, o, dy: dy * (l >= r), lambda xp, l, r, o, dy: dy * (l < r),
        aliases=("broadcast_maximum",))
_binary("minimum", lambda xp, l, r: xp.minimum(l, r),
        lambda xp, l, r, o, dy: dy * (l <= r), lambda xp, l, r, o, dy: dy * (l > r),
        aliases=("broadcast_minimum",))
_binary("hypot", lambda xp, l, r: xp.hypot(l, r), lambda xp, l, r, o, dy: dy * l / o,
        lambda xp, l, r, o, dy: dy * r / o, aliases=("broadcast_hypot",))
for _name, _f in [("equal", lambda xp, l, r: l == r), ("not_equal", lambda xp, l, r: l != r),
                  ("greater", lambda xp, l, r: l > r),
                  ("greater_equal", lambda xp, l, r: l >= r),
                  ("lesser", lambda xp, l, r: l < r), ("lesser_equal", lambda xp, l, r: l <= r),
                  ("logical_and", lambda xp, l, r: (l != 0) & (r != 0)),
                  ("logical_or", lambda xp, l, r: (l != 0) | (r != 0)),
                  ("logical_xor", lambda xp, l, r: (l != 0) ^ (r != 0))]:
    _binary(_name, _f, aliases=("broadcast_" + _name,))


@register("add_n", inputs=(), aliases=("ElementWiseSum",), variadic=True)
def add_n(xp, *args):
    """The sum of all inputs, which must share one shape."""
    shapes = {a.shape for a in args}
    if len(shapes) != 1:
        raise ShapeError(f"add_n: all inputs must have the same shape, got {sorted(shapes)}")
    check_same_dtype("add_n", *args)
    out = args[0].copy()
    for a in args[1:]:
        out += a
    return out, Backward(lambda m, dy: (dy,) * len(args), xp)


# ---- activations and friends ------------------------------------------------------------
@register("clip")
def clip(xp, data, a_min, a_max):
    """Limit values to [a_min, a_max]; the gradient is zero where clipping happened."""
    if a_min > a_max:
        raise ShapeError(f"clip: a_min ({a_min}) must not exceed a_max ({a_max})")
    if _on_host(xp, data):
        # ReLU6 (MobileNet) on big maps: one threaded pass, and the mask only in backward
        return ext.clip(data, a_min, a_max), Backward(_clip_grad, xp, data, a_min, a_max)
    out = xp.clip(data, a_min, a_max)
    # a constant mask of x's dtype: clip's second derivative is zero
    inside = ((data >= a_min) & (data <= a_max)).astype(data.dtype)
    return out, Backward(lambda m, inside, dy: (dy * inside,), xp, inside)


def _clip_grad(xp, x, a_min, a_max, dy):
    """dy where a_min <= x <= a_max, else 0 (the kernels' path of clip)."""
    if _on_host(xp, x, dy):
        return (ext.clip_backward(x, dy, a_min, a_max),)
    # traced for create_graph: the comparisons are constants of the tape
    return (dy * (x >= a_min) * (x <= a_max),)


@register("where", inputs=("condition", "x", "y"))
def where(xp, condition, x, y):
    """x where condition is non-zero, else y. condition has x's shape, or is 1-D over axis 0."""
    if x.shape != y.shape:
        raise ShapeError(f"where: x and y must have the same shape, got {x.shape} and {y.shape}")
    check_same_dtype("where", x, y)
    cond = condition != 0
    if cond.shape != x.shape:
        if cond.ndim != 1 or cond.shape[0] != x.shape[0]:
            raise ShapeError(f"where: condition shape {condition.shape} must equal x's shape "
                             f"{x.shape} or be ({x.shape[0]},)")
        cond = cond.reshape((-1,) + (1,) * (x.ndim - 1))
    out = xp.where(cond, x, y)
    return out, Backward(_where_grads, xp, cond)


def _where_grads(xp, cond, dy):
    picked = dy * cond.astype(dy.dtype)
    return None, picked, dy - picked


def _leaky_forward(xp, data, act_type, slope, gamma):
    if act_type == "leaky":
        return xp.where(data > 0, data, data * slope)
    if act_type == "elu":
        return xp.where(data > 0, data, slope * xp.expm1(xp.minimum(data, 0)))
    if act_type == "selu":
        a, s = 1.6732632423543772, 1.0507009873554805
        return s * xp.where(data > 0, data, a * xp.expm1(xp.minimum(data, 0)))
    if act_type == "gelu":
        return 0.5 * data * (1 + _erf(xp, data / math.sqrt(2)))
    if act_type == "prelu":
        return xp.where(data > 0, data, data * gamma)
    raise ShapeError(f"LeakyReLU: unknown act_type {act_type!r}; use leaky, elu, selu, gelu "
                     "or prelu")


def _leaky_grad(xp, data, out, dy, act_type, slope, gamma):
    pos = data > 0
    if act_type == "leaky":
        return dy * xp.where(pos, 1, slope), None
    if act_type == "elu":
        return dy * xp.where(pos, 1, out + slope), None
    if act_type == "selu":
        a, s = 1.6732632423543772, 1.0507009873554805
        return dy * xp.where(pos, s, out + s * a), None
    if act_type == "gelu":
        cdf = 0.5 * (1 + _erf(xp, data / math.sqrt(2)))
        pdf = xp.exp(-0.5 * data * data) / math.sqrt(2 * math.pi)
        return dy * (cdf + data * pdf), None
    return dy * xp.where(pos, 1, gamma), dy * xp.where(pos, 0, data)


def _gamma_view(data, gamma):
    # PReLU's gamma has one value per channel (axis 1), or a single shared value
    if gamma is None or gamma.size == 1 or data.ndim < 2:
        return gamma
    return gamma.reshape((1, -1) + (1,) * (data.ndim - 2))


@register("LeakyReLU", inputs=("data", "gamma"))
def leaky_relu(xp, data, gamma=None, act_type="leaky", slope=0.25, lower_bound=0.125,
               upper_bound=0.334):
    """Leaky ReLU family: act_type leaky, elu, selu, gelu, or prelu (learned `gamma`)."""
    if act_type == "prelu" and gamma is None:
        raise ShapeError("LeakyReLU(act_type='prelu') needs the gamma input")
    g = _gamma_view(data, gamma)
    out = _leaky_forward(xp, data, act_type, slope, g).astype(data.dtype, copy=False)

    def backward(dy):
        dx, dg = _leaky_grad(xp, data, out, dy, act_type, slope, g)
        if dg is not None and gamma is not None:
            dg = dg.sum(axis=tuple(i for i in range(dy.ndim) if i != 1)) \
                if gamma.size > 1 else dg.sum().reshape(gamma.shape)
            dg = dg.reshape(gamma.shape)
        return dx, dg
    return out, backward


_ACTIVATIONS = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "softrelu": "softrelu",
                "softsign": "softsign"}


@register("Activation")
def activation(xp, data, act_type):
    """Apply relu, sigmoid, tanh, softrelu or softsign."""
    from .registry import OPS
    if act_type not in _ACTIVATIONS:
        raise ShapeError(f"Activation: unknown act_type {act_type!r}; use one of "
                         f"{', '.join(_ACTIVATIONS)}")
    return OPS[_ACTIVATIONS[act_type]].fn(xp, data)


@register("smooth_l1")
def smooth_l1(xp, data, scalar=1.0):
    """Huber-like: 0.5*(s*x)^2 where |x| < 1/s^2, else |x| - 0.5/s^2."""
    s2 = scalar * scalar
    small = xp.abs(data) < 1.0 / s2
    out = xp.where(small, 0.5 * s2 * data * data, xp.abs(data) - 0.5 / s2)
    return out.astype(data.dtype, copy=False), \
        lambda dy: (dy * xp.where(small, s2 * data, xp.sign(data)),)
