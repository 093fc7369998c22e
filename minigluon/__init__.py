"""minigluon: a Gluon-like deep-learning framework with a built-in distributed kvstore.

`import minigluon as mx` gives MXNet 1.x names: mx.nd, mx.np, mx.npx, mx.autograd, mx.init,
mx.optimizer, mx.lr_scheduler, mx.metric, mx.random, mx.cpu(), mx.gpu(), mx.Context.
Each of them is imported when first used, so a process pays only for what it uses.
"""
__version__ = "0.1.0"

import importlib as _importlib
import os as _os
import sys as _sys

# Before NumPy loads OpenBLAS: its threads should sleep soon after a product instead of
# spinning for a tenth of a second on cores other work needs (see minigluon/threads.py).
_blas_loaded = "numpy" in _sys.modules
_quiet_blas = "OPENBLAS_THREAD_TIMEOUT" not in _os.environ
if _quiet_blas:
    _os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"

from . import base, config, threads  # noqa: F401
if _quiet_blas and _blas_loaded:   # NumPy came first: its OpenBLAS must re-read the variable
    threads.reload_blas_environment()
from . import _allocator

_allocator.tune()
from .base import MXNetError  # noqa: F401


# Everything else loads on first use, so that `import minigluon` costs a process (the
# launcher, a probe, a job's roles) only what it touches: `mx.gluon`, `from minigluon import
# nd` and `import minigluon.gluon` import their module then. name -> the submodule it is,
# or (submodule, attribute).
_LAZY = {
    "context": "context", "name": "name", "autograd": "autograd",
    "ndarray": "ndarray", "nd": "ndarray", "random": "random", "rnd": "random",
    "symbol": "symbol", "sym": "symbol", "numpy": "numpy", "np": "numpy",
    "numpy_extension": "numpy_extension", "npx": "numpy_extension", "util": "util",
    "initializer": "initializer", "init": "initializer", "metric": "metric",
    "test_utils": "test_utils", "gluon": "gluon", "lr_scheduler": "lr_scheduler",
    "optimizer": "optimizer", "kvstore": "kvstore", "kv": "kvstore", "recordio": "recordio",
    "image": "image", "img": "image", "io": "io", "profiler": "profiler",
    "runtime": "runtime", "module": "module", "mod": "module", "telemetry": "telemetry",
}
_LAZY.update({attr: ("context", attr) for attr in (
    "Context", "cpu", "cpu_pinned", "current_context", "gpu", "num_gpus")})
_LAZY.update({attr: ("util", attr) for attr in (
    "is_np_array", "is_np_shape", "np_array", "np_shape", "set_np_shape", "use_np",
    "use_np_array", "use_np_shape")})

# mx.nd.np, mx.nd.npx, mx.nd.CachedOp, mx.sym.np and mx.sym.npx are set by the module they
# name when it loads (sym.np by numpy.symbol): the face loads these together
_ARRAYS = ("ndarray", "symbol", "numpy", "numpy.symbol", "numpy_extension")


def __getattr__(name):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'minigluon' has no attribute {name!r}")
    module = where if isinstance(where, str) else where[0]
    for other in _ARRAYS if module in _ARRAYS else ():
        _importlib.import_module(f"{__name__}.{other}")
    value = _importlib.import_module(f"{__name__}.{module}")
    if not isinstance(where, str):
        value = getattr(value, where[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


# `from minigluon import *` takes every public name, as when the face imported them all
__all__ = sorted({n for n in globals() if not n.startswith("_")} | set(_LAZY))


# A scheduler or server serves here and exits, before anything heavy is imported: it loads
# only its own part of the kvstore (NumPy and zmq for a server; an optimizer when a worker
# sends one). __getattr__ is in place by now, so an optimizer's module that does
# `import minigluon as mx` in a server still finds mx.optimizer.
from .kvstore import role as _role  # noqa: E402

_role.maybe_run_role()   # DMLC_ROLE=server/scheduler: serve here, then exit
