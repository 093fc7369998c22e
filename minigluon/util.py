"""`mx.util`: MXNet's switches for NumPy shape and array semantics, as scopes and decorators,
and a few process-level helpers.

`npx.set_np()` flips NumPy mode for the whole process; the scopes here flip it for a
`with` block, a decorated function, or every method of a decorated class, and put back
what was there before, also on error.

>>> from minigluon import util
>>> with util.np_array(True):
...     util.is_np_array()
True
>>> @util.use_np
... class Net(gluon.HybridBlock): ...
"""
import contextlib
import functools
import inspect
import os

from .context import num_gpus
from .numpy.mode import is_np_array, is_np_shape, reset_np, set_np

__all__ = ["set_np", "reset_np", "is_np_array", "is_np_shape", "set_np_shape", "np_shape",
           "np_array", "use_np_shape", "use_np_array", "use_np", "getenv", "setenv",
           "get_gpu_count"]


def _apply(shape, array):
    if shape or array:
        set_np(shape=shape, array=array)    # refuses array without shape, saying why
    else:
        reset_np()


def set_np_shape(active):
    """Turn NumPy shape semantics on or off (keeping the array switch); returns the previous
    state."""
    previous = is_np_shape()
    _apply(bool(active), is_np_array())
    return previous


@contextlib.contextmanager
def _scope(shape=None, array=None):
    saved = (is_np_shape(), is_np_array())
    _apply(saved[0] if shape is None else bool(shape), saved[1] if array is None else bool(array))
    try:
        yield
    finally:
        _apply(*saved)


def np_shape(active=True):
    """A scope (`with` block or decorator) with NumPy shape semantics on (or off)."""
    return _scope(shape=active)


def np_array(active=True):
    """A scope (`with` block or decorator) in which Gluon makes mx.np arrays (or not);
    mx.np arrays need NumPy shape semantics, so turning arrays on turns those on too."""
    return _scope(shape=True if active else None, array=active)


def _decorate(target, scope):
    """Run `target` (a function, or each method a class defines) inside `scope()`."""
    if inspect.isclass(target):
        for name, member in list(vars(target).items()):
            if inspect.isfunction(member):
                setattr(target, name, _decorate(member, scope))
        return target
    if not callable(target):
        raise TypeError(f"expected a function or a class to decorate, got {target!r}")

    @functools.wraps(target)
    def scoped(*args, **kwargs):
        with scope():
            return target(*args, **kwargs)
    return scoped


def use_np_shape(target):
    """Decorator: `target` (function or class) runs with NumPy shape semantics."""
    return _decorate(target, lambda: _scope(shape=True))


def use_np_array(target):
    """Decorator: `target` (function or class) runs with Gluon making mx.np arrays."""
    return _decorate(target, lambda: _scope(shape=True, array=True))


def use_np(target):
    """Decorator: `target` (function or class, e.g. a HybridBlock) runs in NumPy mode, shape
    and array semantics both on, as after `npx.set_np()`."""
    return use_np_array(target)


def getenv(name):
    """The environment variable `name`, or None."""
    return os.environ.get(name)


def setenv(name, value):
    """Set (a string) or remove (None) the environment variable `name`."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)


def get_gpu_count():
    """How many GPUs minigluon can use (simulated ones included)."""
    return num_gpus()
