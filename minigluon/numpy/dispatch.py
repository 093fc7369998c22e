"""How mx.np and mx.npx functions reach the operator registry.

`call(name, ...)` runs the registered op eagerly on arrays, or adds it to the graph when an
argument is a Symbol (while a HybridBlock is traced). So one function serves as `mx.np.f`,
as `F.np.f` with F = mx.nd, and as `F.np.f` with F = mx.sym; hybridized and imperative
runs call the same op.
"""
import numpy as _np

from ..ndarray import creation as _nd_creation
from ..ndarray.ndarray import NDArray
from ..ndarray.registry import OPS, invoke
from ..symbol.symbol import Symbol, apply_op

_SCALARS = (int, float, bool, _np.generic)


def as_input(x):
    """`x` as an operand of an np op: arrays and symbols get NumPy semantics, lists and
    NumPy arrays become mx.np arrays, scalars and None stay as they are."""
    if x is None or isinstance(x, _SCALARS):
        return x
    if isinstance(x, (NDArray, Symbol)):
        return x.as_np_ndarray() if type(x) in (NDArray, Symbol) else x
    return new_array(x)


def new_array(obj, ctx=None, dtype=None):
    """A new mx.np.ndarray holding a copy of `obj`: the body of `mx.np.array`.

    The dtype is `obj`'s when it has one (NumPy and mx arrays), else float32. It lives here,
    below the module of the ndarray class (whose methods use `call`), and gets that class
    through `as_np_ndarray()`.
    """
    if dtype is None and hasattr(obj, "dtype") and not isinstance(obj, type):
        dtype = _np.dtype(obj.dtype)
    return _nd_creation.array(obj, ctx=ctx, dtype=dtype).as_np_ndarray()


def call(name, *args, **attrs):
    """Run the registered op `name` with NumPy-semantics operands; attributes by keyword."""
    op = OPS[name]
    n = len(args) if op.variadic else len(op.inputs)
    args = [as_input(a) for a in args[:n]] + list(args[n:])
    if any(isinstance(a, Symbol) for a in args):
        return apply_op(op, args, attrs)
    return invoke(op, args, attrs)
