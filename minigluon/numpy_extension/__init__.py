"""`mx.npx`: MXNet's NumPy extensions — the mode switch (`set_np`), neural-network
operators on mx.np arrays, and device and random-seed helpers.

Like mx.np's functions, the operators run the registered ops eagerly on arrays and add
graph nodes on symbols, so `F.npx.relu(x)` works in a HybridBlock before and after
hybridize().
"""
import sys as _sys

from .. import ndarray as _ndarray, symbol as _symbol
from ..context import cpu, current_context, gpu, num_gpus  # noqa: F401
from ..numpy.mode import is_np_array, is_np_shape, reset_np, set_np  # noqa: F401
from .ops import (activation, batch_norm, convolution, dropout, embedding,  # noqa: F401
                  fully_connected, layer_norm, log_softmax, one_hot, pick, pooling, relu,
                  seed, sigmoid, softmax, topk)

__all__ = ["set_np", "reset_np", "is_np_array", "is_np_shape", "relu", "sigmoid", "softmax",
           "log_softmax", "activation", "batch_norm", "layer_norm", "convolution", "pooling",
           "fully_connected", "embedding", "dropout", "one_hot", "pick", "topk", "seed",
           "cpu", "gpu", "num_gpus", "current_context"]

# F.npx inside hybrid_forward, with F mx.nd or mx.sym
_ndarray.npx = _symbol.npx = _sys.modules[__name__]


def __getattr__(name):
    raise AttributeError(
        f"mx.npx.{name} is not implemented in minigluon; the mx.nd operator of that name may "
        "exist (call it on x.as_nd_ndarray()). docs/numpy.md lists what mx.npx covers")
