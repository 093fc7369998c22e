"""`mx.nd`: the NDArray type, creation functions, and one function per registered operator."""
import math as _math
import operator as _operator
import sys as _sys
import types as _types

import numpy as _np

from . import ops_elemwise, ops_reduce, ops_shape, ops_nn  # noqa: F401  (register ops)
from . import ops_convolution, ops_deconvolution, ops_pooling, ops_ctc  # noqa: F401
from . import ops_numpy  # noqa: F401  (NumPy-semantics ops behind mx.np)
from . import ops_sequence  # noqa: F401  (SequenceMask, SequenceLast, SequenceReverse)
from . import ops_rnn  # noqa: F401  (the fused RNN operator, the fused cell updates)
from . import ops_rnn_sequence  # noqa: F401  (one recurrent layer direction as one op)
from . import ops_math  # noqa: F401  (inverse trigonometric, angle and cube-root ops)
from . import ops_optimizer_mp  # noqa: F401  (mp_*, multi_* optimizer updates, reset_arrays)
from . import random  # noqa: F401
from . import ops_loss  # noqa: F401  (make_loss)
from . import ops_softmax  # noqa: F401  (softmax, log_softmax, fused softmax CE)
from . import ops_storage, ops_sparse  # noqa: F401  (cast_storage; sparse kernels)
from .creation import (arange, array, empty, eye, full, linspace, ones, waitall,  # noqa: F401
                       zeros)
from .ndarray import NDArray  # noqa: F401
from .registry import OPS as _OPS, invoke as _invoke
from .serialize import load, load_frombuffer, save, save_to_bytes  # noqa: F401
from . import ops_legacy, ops_optimizer, contrib  # noqa: F401  (register ops; mx.nd.contrib)
from . import ops_optimizer_sparse  # noqa: F401  (the update ops' sparse kernels)
from . import image  # noqa: F401  (mx.nd.image)
from . import sparse  # noqa: F401  (mx.nd.sparse: row_sparse and csr arrays)
from .manipulation import concatenate, moveaxis, onehot_encode  # noqa: F401
from .interop import from_dlpack, from_numpy, to_dlpack_for_read, to_dlpack_for_write  # noqa: F401
from .random import normal, uniform  # noqa: F401  (MXNet's legacy nd.normal / nd.uniform)
from .random import normal as random_normal, uniform as random_uniform  # noqa: F401


def _make_function(op, name):
    def function(*args, out=None, **kwargs):
        return _invoke(op, args, kwargs, out)
    function.__name__ = name
    function.__qualname__ = name
    function.__doc__ = op.fn.__doc__
    return function


def _make_method(op, name):
    def method(self, *args, out=None, **kwargs):
        return _invoke(op, (self,) + args, kwargs, out)
    method.__name__ = name
    method.__doc__ = op.fn.__doc__
    return method


_module = _sys.modules[__name__]
for _name, _op in _OPS.items():
    if not hasattr(_module, _name):
        setattr(_module, _name, _make_function(_op, _name))

# MXNet's nd.add(2, 3), nd.power(0.9, t), nd.equal(1, 1), ... with two plain numbers give a
# plain number (no array is made); the same functions on arrays run the operator.
_SCALAR_PAIRS = {
    "add": _operator.add, "subtract": _operator.sub, "multiply": _operator.mul,
    "divide": _operator.truediv, "true_divide": _operator.truediv, "modulo": _operator.mod,
    "power": _operator.pow, "maximum": lambda x, y: x if x > y else y,
    "minimum": lambda x, y: x if x < y else y, "hypot": _math.hypot,
    "equal": lambda x, y: 1 if x == y else 0, "not_equal": lambda x, y: 1 if x != y else 0,
    "greater": lambda x, y: 1 if x > y else 0, "greater_equal": lambda x, y: 1 if x >= y else 0,
    "lesser": lambda x, y: 1 if x < y else 0, "lesser_equal": lambda x, y: 1 if x <= y else 0,
    "logical_and": lambda x, y: 1 if x and y else 0, "logical_or": lambda x, y: 1 if x or y else 0,
    "logical_xor": lambda x, y: 1 if bool(x) != bool(y) else 0,
}


def _scalar_pair(name, function, python):
    def pair(*args, **kwargs):
        if (len(args) == 2 and not kwargs and isinstance(args[0], _NUMBERS)
                and isinstance(args[1], _NUMBERS)):
            return python(*args)
        return function(*args, **kwargs)
    pair.__name__ = pair.__qualname__ = name
    pair.__doc__ = function.__doc__
    return pair


_NUMBERS = (int, float, _np.generic)
for _name, _python in _SCALAR_PAIRS.items():
    if hasattr(_module, _name):
        setattr(_module, _name, _scalar_pair(_name, getattr(_module, _name), _python))

# mx.nd._internal: the operators whose names start with "_" (e.g. _slice_assign), by name
_internal = _types.ModuleType(__name__ + "._internal", "Internal operators, by name.")
_sys.modules[_internal.__name__] = _internal
for _name, _op in _OPS.items():
    if _name.startswith("_"):
        setattr(_internal, _name, _make_function(_op, _name))

_METHODS = """sum mean max min prod nansum norm argmax argmin exp expm1 log log1p log2 log10 sqrt
rsqrt cbrt square abs sign relu sigmoid tanh softrelu reciprocal sin cos tan arctan sinh cosh
floor ceil rint trunc fix round softmax log_softmax transpose swapaxes expand_dims squeeze
flatten split slice slice_axis take pick one_hot tile repeat broadcast_to broadcast_axes
broadcast_like clip topk sort argsort flip diag zeros_like ones_like""".split()
for _name in _METHODS:
    if _name not in NDArray.__dict__:
        setattr(NDArray, _name, _make_method(_OPS[_name], _name))

# The rest of MXNet's fluent methods (x.nanprod(...), x.softmin(), ...), for the operators
# registered so far.
for _name in """pad nanprod argmax_channel shape_array size_array softmin split_v2 slice_like
degrees radians arcsin arccos arcsinh arccosh arctanh rcbrt""".split():
    if _name in _OPS and _name not in NDArray.__dict__:
        setattr(NDArray, _name, _make_method(_OPS[_name], _name))


def __getattr__(name):
    if name in ("np", "npx", "CachedOp"):
        # the upper floors set these when they load (numpy, numpy_extension, symbol)
        raise AttributeError(
            f"mx.nd.{name} is set when minigluon.{_WIRED_BY[name]} is imported; use it "
            f"through `import minigluon as mx` (mx.nd.{name} loads it), or import that "
            "module first")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_WIRED_BY = {"np": "numpy", "npx": "numpy_extension", "CachedOp": "symbol"}
