"""minigluon: a Gluon-like deep-learning framework with a built-in distributed kvstore.

`import minigluon as mx` gives MXNet 1.x names: mx.nd, mx.np, mx.npx, mx.autograd, mx.init,
mx.optimizer, mx.lr_scheduler, mx.metric, mx.random, mx.cpu(), mx.gpu(), mx.Context.
"""
__version__ = "0.1.0"

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
from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus  # noqa: F401
from . import context  # noqa: F401
from . import name  # noqa: F401
from . import autograd  # noqa: F401
from . import ndarray  # noqa: F401
from . import ndarray as nd  # noqa: F401
from . import random  # noqa: F401
from . import random as rnd  # noqa: F401
from . import symbol  # noqa: F401
from . import symbol as sym  # noqa: F401
from . import numpy, numpy_extension  # noqa: F401  (mx.numpy, mx.numpy_extension)
from . import numpy as np  # noqa: F401
from . import numpy_extension as npx  # noqa: F401
from . import util  # noqa: F401
from .util import (is_np_array, is_np_shape, np_array, np_shape, set_np_shape,  # noqa: F401
                   use_np, use_np_array, use_np_shape)
from .numpy import symbol as _np_symbol
# F.np / F.npx inside hybrid_forward: F is mx.nd when running, mx.sym while tracing
nd.np, nd.npx = np, npx
nd.CachedOp = sym.CachedOp     # MXNet's mx.nd.CachedOp; it compiles a Symbol, so lives there
sym.np, sym.npx = _np_symbol, npx
from . import initializer, metric, test_utils  # noqa: F401
from . import initializer as init  # noqa: F401
from . import gluon  # noqa: F401
from . import lr_scheduler, optimizer  # noqa: F401
from . import kvstore  # noqa: F401
from . import kvstore as kv  # noqa: F401
from . import recordio, image  # noqa: F401
from . import image as img  # noqa: F401
from . import io  # noqa: F401
from . import profiler, runtime  # noqa: F401
from . import module  # noqa: F401  (mx.module)
from . import module as mod  # noqa: F401  (mx.mod)
kvstore.role.maybe_run_role()   # DMLC_ROLE=server/scheduler: serve here, then exit
