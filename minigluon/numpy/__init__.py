"""`mx.np`: MXNet's NumPy-compatible front end.

`mx.np.ndarray` is an NDArray with NumPy semantics (dtype promotion, bool comparisons, 0-d
results); the functions keep NumPy's names and signatures and run minigluon's registered
operators, so autograd, devices and hybridization work as with mx.nd. See docs/numpy.md
for what is covered and what differs from NumPy.

>>> from minigluon import np, npx
>>> npx.set_np()
>>> x = np.arange(6).reshape(2, 3)
>>> float(x.sum()), (x > 2).dtype
(15.0, dtype('bool'))
"""
import sys as _sys

import numpy as _onp

from . import random  # noqa: F401
from .creation import (arange, empty, eye, full, linspace, ones, ones_like, zeros,  # noqa: F401
                       zeros_like)
from .elemwise import *  # noqa: F401,F403
from .elemwise import __all__ as _elemwise_names
from .mode import is_np_array, is_np_shape  # noqa: F401
from .multiarray import array, ndarray  # noqa: F401
from .products import dot, matmul  # noqa: F401
from .reduce import (all, amax, amin, any, argmax, argmin, argsort,  # noqa: F401,A004
                     cumsum, max, mean, min, prod, sort, std, sum, var)
from .shape import (concatenate, expand_dims, flip, ravel, repeat, reshape, split,  # noqa: F401
                    squeeze, stack, swapaxes, tile, transpose)

# dtypes and constants under NumPy's names, so `np.float32` and `np.pi` work as usual
float16, float32, float64 = _onp.float16, _onp.float32, _onp.float64
int8, int32, int64, uint8, bool_ = _onp.int8, _onp.int32, _onp.int64, _onp.uint8, _onp.bool_
dtype = _onp.dtype
pi, e, inf, nan, newaxis = _onp.pi, _onp.e, _onp.inf, _onp.nan, None

__all__ = sorted(["ndarray", "array", "zeros", "ones", "full", "empty", "arange", "linspace",
                  "eye", "zeros_like", "ones_like", "dot", "matmul", "sum", "prod", "mean",
                  "max", "min", "amax", "amin", "argmax", "argmin", "any", "all", "std",
                  "var", "cumsum", "sort", "argsort", "reshape", "ravel", "transpose",
                  "swapaxes", "expand_dims", "squeeze", "concatenate", "stack", "split",
                  "tile", "repeat", "flip", "random"] + _elemwise_names)

# F.np inside hybrid_forward while F is mx.nd (numpy/symbol.py sets mx.sym.np, for tracing)
from .. import ndarray as _ndarray  # noqa: E402
_ndarray.np = _sys.modules[__name__]


def __getattr__(name):
    raise AttributeError(
        f"mx.np.{name} is not implemented in minigluon; use the mx.nd operator of that name "
        "if there is one (x.as_nd_ndarray()), or compute it with NumPy on x.asnumpy() and "
        "come back with mx.np.array(result). docs/numpy.md lists what mx.np covers")
