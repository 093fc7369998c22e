"""Errors shared by every layer of minigluon.

`MXNetError` is the base class and a RuntimeError, as in MXNet 1.x, so code that catches
either keeps working. Each subclass also derives from the Python error it resembles, so `except ValueError`
catches a bad shape too.

This module and config.py import no NumPy: a scheduler process loads them and nothing heavy.
"""


class MXNetError(RuntimeError):
    """Base class of every error minigluon raises on purpose."""


class ShapeError(MXNetError, ValueError):
    """Operands whose shapes do not fit the operator."""


class DTypeError(MXNetError, TypeError):
    """Operands whose dtypes do not fit the operator."""


class ContextError(MXNetError, RuntimeError):
    """A device that cannot be used, or arrays on different devices."""


class AutogradError(MXNetError, RuntimeError):
    """A backward pass that cannot run (nothing recorded, graph freed, ...)."""


class UnknownNameError(MXNetError, ValueError):
    """A registry lookup (optimizer, initializer, metric, ...) with an unknown name."""


# MXNet's names for the Python types its API checks arguments against
integer_types = (int,)
string_types = (str,)


def __getattr__(name):
    # mx_real_t, MXNet's default element type (numpy.float32), loads NumPy only when asked
    if name == "mx_real_t":
        import numpy
        return numpy.float32
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def py_str(value):
    """`value` as a Python str: bytes are decoded as UTF-8, anything else is str()'d."""
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def numeric_types():
    """The Python and NumPy scalar types that ops accept in place of an array."""
    import numpy as np
    return (int, float, bool, np.generic)


def unknown_name(kind, name, known):
    """Build the error for an unknown registry name, listing what exists."""
    choices = ", ".join(sorted(known))
    return UnknownNameError(f"unknown {kind} {name!r}; known {kind}s: {choices}")


class NameRegistry:
    """Classes creatable by name (case-insensitive), as `mx.init` and `mx.metric` offer.

    >>> names = NameRegistry("metric")
    >>> @names.register
    ... class Accuracy: ...
    >>> names.lookup("accuracy") is Accuracy
    """

    def __init__(self, kind):
        self.kind = kind
        self.classes = {}

    def register(self, klass):
        """Class decorator: make `klass` creatable by its lower-cased name."""
        self.classes[klass.__name__.lower()] = klass
        return klass

    def alias(self, *aliases):
        """Class decorator: extra names for the class, e.g. 'zeros' or 'acc'."""
        def decorate(klass):
            for name in aliases:
                self.classes[name.lower()] = klass
            return klass
        return decorate

    def lookup(self, name):
        """The class registered as `name`, or an error listing the known names."""
        klass = self.classes.get(name.lower())
        if klass is None:
            raise unknown_name(self.kind, name, self.classes)
        return klass
