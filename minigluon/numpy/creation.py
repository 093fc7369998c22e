"""Functions that make new mx.np arrays. float32 is the default dtype, as in MXNet (NumPy
would give float64, or int64 for integer ranges)."""
from ..ndarray import creation as _nd
from .dispatch import call
from .multiarray import context_arg, from_nd


def _check_order(order):
    if order != "C":
        raise ValueError(f"order={order!r} is not supported; minigluon arrays are C-ordered, "
                         "use order='C'")


def zeros(shape, dtype=None, order="C", ctx=None, device=None):
    """An array of zeros: `mx.np.zeros((2, 3))`."""
    _check_order(order)
    return from_nd(_nd.zeros(shape, ctx=context_arg(ctx, device), dtype=dtype))


def ones(shape, dtype=None, order="C", ctx=None, device=None):
    """An array of ones: `mx.np.ones((2, 3))`."""
    _check_order(order)
    return from_nd(_nd.ones(shape, ctx=context_arg(ctx, device), dtype=dtype))


def empty(shape, dtype=None, order="C", ctx=None, device=None):
    """An array whose values should not be relied on (zeros in minigluon)."""
    return zeros(shape, dtype, order, ctx, device)


def full(shape, fill_value, dtype=None, order="C", ctx=None, device=None):
    """An array filled with `fill_value`: `mx.np.full((2, 2), 7)`."""
    _check_order(order)
    return from_nd(_nd.full(shape, fill_value, ctx=context_arg(ctx, device), dtype=dtype))


def arange(start, stop=None, step=1, dtype=None, ctx=None, device=None):
    """Evenly spaced values in [start, stop): `mx.np.arange(5)` is [0., 1., 2., 3., 4.]."""
    if step == 0:
        raise ValueError("arange: step must not be 0")
    return from_nd(_nd.arange(start, stop, step, ctx=context_arg(ctx, device), dtype=dtype))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0,
             ctx=None, device=None):
    """`num` evenly spaced values from start to stop (and the step, with retstep=True)."""
    if axis != 0:
        raise ValueError(f"linspace: axis={axis} is not supported; start and stop are "
                         "scalars, so the result is 1-D (axis=0)")
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    out = from_nd(_nd.linspace(start, stop, num, endpoint, ctx=context_arg(ctx, device),
                               dtype=dtype))
    if not retstep:
        return out
    div = (num - 1) if endpoint else num
    return out, (stop - start) / div if div > 0 else float("nan")


def eye(N, M=None, k=0, dtype=None, ctx=None, device=None):   # noqa: N803 (NumPy's names)
    """A 2-D array with ones on the k-th diagonal."""
    return from_nd(_nd.eye(N, M or 0, k, ctx=context_arg(ctx, device), dtype=dtype))


def zeros_like(a, dtype=None):
    """Zeros with the shape (and dtype, unless given) of `a`."""
    out = call("zeros_like", a)
    return out if dtype is None else out.astype(dtype)


def ones_like(a, dtype=None):
    """Ones with the shape (and dtype, unless given) of `a`."""
    out = call("ones_like", a)
    return out if dtype is None else out.astype(dtype)
