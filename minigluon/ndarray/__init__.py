"""`mx.nd`: the NDArray type, creation functions, and one function per registered operator."""
import sys as _sys

from . import ops_elemwise, ops_reduce, ops_shape, ops_nn  # noqa: F401  (register ops)
from . import ops_convolution, ops_deconvolution, ops_pooling, ops_ctc  # noqa: F401
from . import ops_numpy  # noqa: F401  (NumPy-semantics ops behind mx.np)
from . import ops_optimizer  # noqa: F401  (fused optimizer updates: sgd_update, ...)
from . import random  # noqa: F401
from .creation import (arange, array, empty, eye, full, linspace, ones, waitall,  # noqa: F401
                       zeros)
from .ndarray import NDArray  # noqa: F401
from .registry import OPS as _OPS, invoke as _invoke
from .serialize import load, load_frombuffer, save, save_to_bytes  # noqa: F401


def _make_function(op, name):
    def function(*args, out=None, **kwargs):
        return _invoke(op, args, kwargs, out)
    function.__name__ = name
    function.__qualname__ = name
    function.__doc__ = op.fn.__doc__
    return function


def _make_method(op, name):
    def method(self, *args, **kwargs):
        return _invoke(op, (self,) + args, kwargs)
    method.__name__ = name
    method.__doc__ = op.fn.__doc__
    return method


_module = _sys.modules[__name__]
for _name, _op in _OPS.items():
    if not hasattr(_module, _name):
        setattr(_module, _name, _make_function(_op, _name))

_METHODS = """sum mean max min prod nansum norm argmax argmin exp expm1 log log1p log2 log10 sqrt
rsqrt cbrt square abs sign relu sigmoid tanh softrelu reciprocal sin cos tan arctan sinh cosh
floor ceil rint trunc fix round softmax log_softmax transpose swapaxes expand_dims squeeze
flatten split slice slice_axis take pick one_hot tile repeat broadcast_to broadcast_axes
broadcast_like clip topk sort argsort flip diag zeros_like ones_like""".split()
for _name in _METHODS:
    if _name not in NDArray.__dict__:
        setattr(NDArray, _name, _make_method(_OPS[_name], _name))
