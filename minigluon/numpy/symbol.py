"""The mx.np flavour of Symbol, and `F.np` while a HybridBlock is traced (F = mx.sym).

A HybridBlock called on mx.np arrays is traced with these symbols, so `x + y`, `x.sum()`,
`x[1:]` ... build the same NumPy-semantics ops the imperative call runs. Functions that
take arrays are mx.np's own (they add graph nodes when given symbols); the creation
functions below make graph constants instead of arrays.
"""
import sys as _sys

from .. import symbol as _symbol
from ..ndarray.registry import OPS
from ..symbol.symbol import Symbol, apply_op, set_np_class
from .dispatch import call
from .methods import NumpyMethods


class _Symbol(NumpyMethods, Symbol):
    """A traced mx.np value (MXNet's `mx.sym.np._Symbol`)."""

    __slots__ = ()

    def __getitem__(self, key):
        # a group of outputs is indexed by output (as legacy symbols); one value by NumPy's rules
        if len(self._outputs) != 1 or isinstance(key, str):
            return Symbol.__getitem__(self, key)
        if isinstance(key, Symbol) or (isinstance(key, tuple) and
                                       any(isinstance(k, Symbol) for k in key)):
            raise TypeError("indexing a traced mx.np value with another traced value is not "
                            "supported; use F.np.take / F.npx.pick")
        return call("_np_getitem", self, key=key)

    def as_np_ndarray(self):
        return self


set_np_class(_Symbol)   # what Symbol.as_np_ndarray() returns
_symbol.np = _sys.modules[__name__]     # F.np while tracing: F is mx.sym


def _constant(op_name, **attrs):
    return _Symbol(apply_op(OPS[op_name], (), attrs)._outputs)


def zeros(shape, dtype=None, order="C", ctx=None, device=None):
    """A graph constant of zeros."""
    return _constant("_zeros", shape=_shape(shape), dtype=dtype)


def ones(shape, dtype=None, order="C", ctx=None, device=None):
    """A graph constant of ones."""
    return _constant("_ones", shape=_shape(shape), dtype=dtype)


def full(shape, fill_value, dtype=None, order="C", ctx=None, device=None):
    """A graph constant filled with `fill_value`."""
    return _constant("_full", shape=_shape(shape), value=fill_value, dtype=dtype)


def arange(start, stop=None, step=1, dtype=None, ctx=None, device=None):
    """A graph constant of evenly spaced values in [start, stop)."""
    return _constant("_arange", start=start, stop=stop, step=step, dtype=dtype)


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


_EAGER_ONLY = ("array", "empty", "eye", "linspace", "random")


def __getattr__(name):
    if name in _EAGER_ONLY:
        raise AttributeError(
            f"F.np.{name} cannot be used while a HybridBlock is traced (hybridize): it makes "
            "an array, not a graph node. Create the array outside hybrid_forward (e.g. "
            "self.params.get_constant in __init__) and pass it in, or use F.np.zeros / ones "
            "/ full / arange")
    from .. import numpy
    return getattr(numpy, name)
