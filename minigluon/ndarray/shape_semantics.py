"""Which shape semantics an array file was saved in, and the check that it loads in the same.

MXNet marks every saved array with the semantics active when it was saved: legacy shapes,
or NumPy shapes (`mx.util.set_np_shape(True)` / `with mx.np_shape():`, where `()` is a
scalar and a 0 in a shape means zero-size). Loading under the other semantics is refused,
in both directions, since a shape means something else in each. The switch itself lives
in mx.np's mode (a floor above this one), which registers it here at import.
"""
from ..base import MXNetError


class ShapeSemanticsError(MXNetError):
    """An array file loaded under other shape semantics than it was saved in."""


def _legacy():
    return False


_switch = _legacy   # () -> bool: NumPy shape semantics on; mx.np's mode registers the real one


def set_switch(is_np_shape):
    """Make `is_np_shape` (a function of no arguments) the switch `save`/`load` consult."""
    global _switch
    _switch = is_np_shape


def np_shape_on():
    """True while NumPy shape semantics are on."""
    return bool(_switch())


def check_loadable(saved_np_shape, source):
    """Refuse, naming the fix, an array saved under other shape semantics than the current."""
    if saved_np_shape and not np_shape_on():
        raise ShapeSemanticsError(
            f"{source}: the arrays were saved with NumPy shape semantics on and must be loaded "
            "with them on; load inside `with mx.np_shape(True):` (or after "
            "mx.util.set_np_shape(True))")
    if not saved_np_shape and np_shape_on():
        raise ShapeSemanticsError(
            f"{source}: the arrays were saved with legacy shape semantics and cannot be loaded "
            "while NumPy shape semantics are on; load inside `with mx.np_shape(False):`")
