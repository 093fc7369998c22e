"""`mx.sym`: symbolic graphs built from the same operators as `mx.nd`.

Every registered operator has a function here that returns a Symbol instead of computing.
This is what `F` is inside `HybridBlock.hybrid_forward` while a block is being traced.
"""
import sys as _sys

from .. import ndarray as _ndarray
from ..ndarray import ops_creation as _ops_creation  # noqa: F401  (registers _zeros, ...)
from ..ndarray.registry import OPS as _OPS
from . import image  # noqa: F401  (mx.sym.image)
from . import sparse  # noqa: F401  (mx.sym.sparse)
from .symbol import Group, Symbol, Variable, apply_op as _apply_op, load, load_json, var  # noqa: F401
from .cached_op import CachedOp  # noqa: F401  (also mx.nd.CachedOp, set below)
from .. import autograd as _autograd
from .tape import symbol_of as _symbol_of

_autograd.set_symbol_builder(_symbol_of)


def _make_function(op, name):
    def function(*args, **kwargs):
        return _apply_op(op, args, kwargs)
    function.__name__ = name
    function.__doc__ = op.fn.__doc__
    return function


_module = _sys.modules[__name__]
for _name, _op in _OPS.items():
    if not hasattr(_module, _name):
        setattr(_module, _name, _make_function(_op, _name))


def zeros(shape, dtype=None, **kwargs):
    """A constant of zeros in the graph."""
    return _apply_op(_OPS["_zeros"], (), dict(shape=tuple(shape), dtype=dtype))


def ones(shape, dtype=None, **kwargs):
    """A constant of ones in the graph."""
    return _apply_op(_OPS["_ones"], (), dict(shape=tuple(shape), dtype=dtype))


def full(shape, val, dtype=None, **kwargs):
    """A constant filled with `val` in the graph."""
    return _apply_op(_OPS["_full"], (), dict(shape=tuple(shape), value=val, dtype=dtype))


def arange(start, stop=None, step=1.0, repeat=1, dtype=None, **kwargs):
    """Evenly spaced values in the graph."""
    return _apply_op(_OPS["_arange"], (), dict(start=start, stop=stop, step=step,
                                                 repeat=repeat, dtype=dtype))


def _make_method(name):
    op = _OPS[name]

    def method(self, *args, **kwargs):
        return _apply_op(op, (self,) + args, kwargs)
    method.__name__ = name
    return method


for _name in ("sum mean max min prod norm argmax argmin exp log sqrt square abs sign relu "
              "sigmoid tanh softmax log_softmax transpose swapaxes expand_dims squeeze flatten "
              "split slice slice_axis take pick one_hot tile repeat broadcast_to broadcast_like "
              "clip topk sort argsort flip zeros_like ones_like").split():
    if _name not in Symbol.__dict__:
        setattr(Symbol, _name, _make_method(_name))


# MXNet's mx.nd.CachedOp: it compiles a Symbol, so it lives here and is lent to mx.nd
_ndarray.CachedOp = CachedOp


def __getattr__(name):
    if name in ("np", "npx"):
        # minigluon.numpy and numpy_extension set these when they load
        module = "numpy" if name == "np" else "numpy_extension"
        raise AttributeError(
            f"mx.sym.{name} is set when minigluon.{module} is imported; use it through "
            f"`import minigluon as mx` (mx.sym.{name} loads it), or import that module first")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
