"""Element-wise mx.np functions: arithmetic, comparisons, unary math, where, clip, round.

Binary functions broadcast and promote dtypes as NumPy does, except that mixing integers
and floats gives the float operand's dtype (float32 for a Python float), as in MXNet.
"""
import sys as _sys

from ..ndarray.ndarray import NDArray
from ..symbol.symbol import Symbol
from .dispatch import as_input, call
from .multiarray import array


def _operands(x1, x2):
    """Both operands as inputs; when both are plain numbers, the first becomes an array."""
    x1, x2 = as_input(x1), as_input(x2)
    if not isinstance(x1, (NDArray, Symbol)) and not isinstance(x2, (NDArray, Symbol)):
        x1 = array(x1)
    return x1, x2


def _binary(name, op, doc):
    def function(x1, x2):
        return call(op, *_operands(x1, x2))
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"{doc}, element-wise with broadcasting: `mx.np.{name}(x1, x2)`."
    return function


def _unary(name, op, doc):
    def function(x):
        return call(op, x)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"{doc}, element-wise: `mx.np.{name}(x)`."
    return function


_BINARY = {
    "add": ("_np_add", "x1 + x2"),
    "subtract": ("_np_subtract", "x1 - x2"),
    "multiply": ("_np_multiply", "x1 * x2"),
    "divide": ("_np_true_divide", "x1 / x2 (integers give float32)"),
    "true_divide": ("_np_true_divide", "x1 / x2 (integers give float32)"),
    "power": ("_np_power", "x1 ** x2"),
    "mod": ("_np_modulo", "x1 % x2, with the sign of x2"),
    "remainder": ("_np_modulo", "x1 % x2, with the sign of x2"),
    "maximum": ("_np_maximum", "The larger of x1 and x2"),
    "minimum": ("_np_minimum", "The smaller of x1 and x2"),
    "equal": ("_np_equal", "x1 == x2 as a bool array"),
    "not_equal": ("_np_not_equal", "x1 != x2 as a bool array"),
    "greater": ("_np_greater", "x1 > x2 as a bool array"),
    "greater_equal": ("_np_greater_equal", "x1 >= x2 as a bool array"),
    "less": ("_np_lesser", "x1 < x2 as a bool array"),
    "less_equal": ("_np_lesser_equal", "x1 <= x2 as a bool array"),
    "logical_and": ("_np_logical_and", "x1 and x2 (non-zero is true) as a bool array"),
    "logical_or": ("_np_logical_or", "x1 or x2 (non-zero is true) as a bool array"),
    "logical_xor": ("_np_logical_xor", "x1 xor x2 (non-zero is true) as a bool array"),
    "bitwise_and": ("_np_bitwise_and", "x1 & x2 of bools or integers"),
    "bitwise_or": ("_np_bitwise_or", "x1 | x2 of bools or integers"),
    "bitwise_xor": ("_np_bitwise_xor", "x1 ^ x2 of bools or integers"),
}

# integers give float32 where NumPy would give float64
_FLOAT_UNARY = ["exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "cbrt", "sin", "cos",
                "tan", "arctan", "sinh", "cosh", "tanh"]
# the dtype of the input is kept
_SAME_UNARY = {"negative": "negative", "abs": "abs", "absolute": "abs", "sign": "sign",
               "square": "square", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
               "fix": "fix", "rint": "rint", "invert": "_np_invert",
               "logical_not": "_np_logical_not"}

_module = _sys.modules[__name__]
for _name, (_op, _doc) in _BINARY.items():
    setattr(_module, _name, _binary(_name, _op, _doc))
for _name in _FLOAT_UNARY:
    setattr(_module, _name, _unary(_name, "_np_" + _name, f"NumPy's {_name}"))
for _name, _op in _SAME_UNARY.items():
    setattr(_module, _name, _unary(_name, _op, f"NumPy's {_name}"))

__all__ = list(_BINARY) + _FLOAT_UNARY + list(_SAME_UNARY) + ["where", "clip", "round",
                                                              "around"]


def where(condition, x, y):
    """Elements of x where `condition` is true, else of y; all three broadcast together.

    >>> mx.np.where(mx.np.array([1., -1.]) > 0, 1., 0.)
    array([1., 0.], dtype=float32)
    """
    return call("_np_where", condition, x, y)


def clip(a, a_min, a_max):
    """Values of `a` limited to [a_min, a_max]; one bound may be None. Bounds are numbers
    (for array bounds use mx.np.maximum / mx.np.minimum)."""
    return as_input(a).clip(_bound("a_min", a_min), _bound("a_max", a_max))


def _bound(name, value):
    if value is None or isinstance(value, (int, float)):
        return value
    if getattr(value, "size", None) == 1:
        return value.item()
    raise TypeError(f"clip: {name} must be a number or None, got {type(value).__name__}; for "
                    "array bounds use mx.np.maximum(a, low) and mx.np.minimum(a, high)")


def round(x, decimals=0):   # noqa: A001 (NumPy's name)
    """Round half to even to `decimals` decimals, as NumPy does."""
    return as_input(x).round(decimals)


around = round
