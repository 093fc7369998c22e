"""Functions that make new arrays: array, zeros, ones, full, empty, arange, linspace, eye,
zeros_like, ones_like. float32 is the default dtype, as in MXNet."""
import numpy as np

from ..base import DTypeError, ShapeError
from ..context import current_context
from . import registry, sparse, sparse_storage
from .ndarray import NDArray

DEFAULT_DTYPE = sparse.DEFAULT_DTYPE


def _ctx(ctx):
    return current_context() if ctx is None else ctx


def _dtype(dtype):
    try:
        return np.dtype(DEFAULT_DTYPE if dtype is None else dtype)
    except TypeError:
        raise DTypeError(f"unknown dtype {dtype!r}; use e.g. 'float32', 'float16', 'int32'") from None


def _shape(shape):
    return (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)


def array(source_array, ctx=None, dtype=None):
    """An NDArray from an NDArray, NumPy array or (nested) list.

    The dtype is the source's when it is an NDArray, float32 otherwise (MXNet's rule, also
    for NumPy arrays of another dtype); pass `dtype` to choose. A sparse NDArray gives a
    copy in its own storage type and a scipy.sparse matrix a CSRNDArray, as in MXNet.
    """
    ctx = _ctx(ctx)
    if sparse.scipy_sparse_module(source_array) is not None:
        return sparse.csr_matrix(source_array, ctx=ctx, dtype=dtype)
    if isinstance(source_array, NDArray) and source_array.stype != "default":
        out = source_array.as_in_context(ctx)
        out = out.copy() if out is source_array else out
        return out if dtype is None else out.astype(dtype, copy=False)
    if isinstance(source_array, NDArray):
        src = source_array.asnumpy()
        target = src.dtype if dtype is None else _dtype(dtype)
    else:
        target = _dtype(dtype)
        src = source_array if hasattr(source_array, "__cuda_array_interface__") \
            else np.asarray(source_array)
    with ctx.scope():
        data = ctx.xp.array(src, dtype=target, copy=True)
    return NDArray(data, ctx)


def empty(shape, ctx=None, dtype=None, stype=None):
    """An uninitialized array (zeros on minigluon, so results never depend on garbage)."""
    return zeros(shape, ctx, dtype, stype=stype)


def zeros(shape, ctx=None, dtype=None, out=None, stype=None, **kwargs):
    """An array of zeros; with `out`, written into `out` and returned. A sparse `stype`
    ('row_sparse', 'csr') gives a sparse array with nothing stored."""
    if stype not in (None, "default"):
        ctx = _ctx(ctx)
        sparse_storage.check_stype(stype, "zeros")
        with ctx.scope():
            raw = sparse_storage.zeros(ctx.xp, stype, _shape(shape), _dtype(dtype))
        return _result(raw, ctx, out)
    return full(shape, 0, ctx, dtype, out=out)


def ones(shape, ctx=None, dtype=None, out=None, **kwargs):
    """An array of ones; with `out`, written into `out` and returned."""
    return full(shape, 1, ctx, dtype, out=out)


def _result(data, ctx, out):
    """`data` as a new NDArray, or copied into `out` (whose shape must match)."""
    if out is None:
        return registry.wrap(data, ctx)
    if tuple(out.shape) != tuple(data.shape):
        raise ShapeError(f"out has shape {out.shape}, the result has {tuple(data.shape)}; "
                         "pass an out array of the result's shape")
    result = registry.wrap(data, ctx)
    if out.stype == "default" and result.stype == "default":
        out[:] = result
    else:
        result.copyto(out)    # the out array keeps its storage type
    return out


def full(shape, val, ctx=None, dtype=None, out=None):
    """An array filled with `val`."""
    ctx = _ctx(ctx)
    with ctx.scope():
        data = ctx.xp.full(_shape(shape), val, dtype=_dtype(dtype))
    return _result(data, ctx, out)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=None, ctx=None, dtype=None,
           out=None):
    """Evenly spaced values in [start, stop), each repeated `repeat` times."""
    ctx = _ctx(ctx)
    with ctx.scope():
        data = ctx.xp.arange(start, stop, step, dtype=_dtype(dtype))
        if repeat > 1:
            data = ctx.xp.repeat(data, repeat)
    return _result(data, ctx, out)


def linspace(start, stop, num, endpoint=True, ctx=None, dtype=None, out=None):
    """`num` evenly spaced values from start to stop."""
    ctx = _ctx(ctx)
    with ctx.scope():
        data = ctx.xp.linspace(start, stop, num, endpoint=endpoint, dtype=_dtype(dtype))
    return _result(data, ctx, out)


def eye(N, M=0, k=0, ctx=None, dtype=None, out=None):
    """A 2-D array with ones on the k-th diagonal."""
    ctx = _ctx(ctx)
    with ctx.scope():
        data = ctx.xp.eye(N, M or None, k, dtype=_dtype(dtype))
    return _result(data, ctx, out)


def waitall():
    """Wait for all pending device work (a no-op on CPU, where work is synchronous)."""
    import sys
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        for dev in range(cupy.cuda.runtime.getDeviceCount()):
            with cupy.cuda.Device(dev):
                cupy.cuda.get_current_stream().synchronize()
