"""Loading an optimizer (set_optimizer) or optimizer states (load_optimizer_states) that a
server received: pickle, restricted to what those are made of.

An optimizer travels as a pickle because it holds objects (an lr_scheduler, per-index
multipliers, update counts) that no flat description keeps exactly. A plain
`pickle.loads` would run whatever callable a crafted payload names, so servers load these
payloads with an unpickler that resolves only

- optimizer and lr-scheduler classes (subclasses of `Optimizer` / `LRScheduler`) and
  the classes `optimizer.updater.STATE_CLASSES` names, and
- the NumPy functions that rebuild arrays, scalars and dtypes.

Anything else is an `UnpicklingError`. Classes come from modules the server has already
imported (the registry's built-in optimizers and schedulers); only with `may_import` (the
job has a secret, so the payload's tag proved it comes from one of the job's workers) is a
module a payload names imported, which a custom optimizer in an importable module needs.
This is a second wall: with MINIGLUON_PS_SECRET the van already refuses every message
whose tag is not valid, so only the job's own workers reach this code.

>>> loads(pickle.dumps(mx.optimizer.SGD(momentum=0.9)))          # an SGD
>>> loads(pickle.dumps(os.system))                                # UnpicklingError
"""
import importlib
import io
import pickle
import sys

__all__ = ["loads"]

_NUMPY = {(m, n) for m in ("numpy.core.multiarray", "numpy._core.multiarray")
          for n in ("_reconstruct", "scalar")}
_NUMPY |= {(m, "_frombuffer") for m in ("numpy.core.numeric", "numpy._core.numeric")}
_NUMPY |= {("numpy", "dtype"), ("numpy", "ndarray")}
_BUILTINS = {("builtins", "set"), ("builtins", "frozenset"), ("builtins", "complex"),
             ("builtins", "slice"), ("collections", "OrderedDict")}


def _allowed_classes():
    # importing the packages loads every built-in optimizer and scheduler: a server loads
    # them with the first optimizer a worker sends (role.py starts it without them)
    from ..lr_scheduler import LRScheduler
    from ..optimizer import Optimizer
    from ..optimizer.updater import STATE_CLASSES
    return (Optimizer, LRScheduler) + STATE_CLASSES


class _Restricted(pickle.Unpickler):
    def __init__(self, file, may_import):
        super().__init__(file)
        self.may_import = may_import
        self.allowed = _allowed_classes()

    def find_class(self, module, name):
        if (module, name) in _NUMPY or (module, name) in _BUILTINS:
            return super().find_class(module, name)
        if self.may_import and module not in sys.modules:
            try:
                importlib.import_module(module)
            except ImportError:
                pass
        obj = getattr(sys.modules[module], name, None) if module in sys.modules else None
        if isinstance(obj, type) and issubclass(obj, self.allowed):
            return obj
        where = "" if self.may_import else (" (a custom optimizer's module is imported "
                                            "only in a job with MINIGLUON_PS_SECRET)")
        raise pickle.UnpicklingError(
            f"{module}.{name} may not be loaded from an optimizer payload: only optimizers, "
            f"lr schedulers and NumPy arrays are{where}")


def loads(blob, may_import=False):
    """Unpickle `blob`, resolving only the classes an optimizer or its states use;
    `may_import`: import the modules the payload names (authenticated payloads only)."""
    return _Restricted(io.BytesIO(blob), may_import).load()
