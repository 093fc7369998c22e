"""Errors shared by every layer of minigluon.

`MXNetError` is the base class, as in MXNet, so code that catches it keeps working.
Each subclass also derives from the Python error it resembles, so `except ValueError`
catches a bad shape too.
"""


class MXNetError(Exception):
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


def numeric_types():
    """The Python and NumPy scalar types that ops accept in place of an array."""
    import numpy as np
    return (int, float, bool, np.generic)


def unknown_name(kind, name, known):
    """Build the error for an unknown registry name, listing what exists."""
    choices = ", ".join(sorted(known))
    return UnknownNameError(f"unknown {kind} {name!r}; known {kind}s: {choices}")
