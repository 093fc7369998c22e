"""The Python operator methods (`a + b`, `2 - a`, `a += b`, `-a`, `a < b`) of every array and
symbol class, from one table.

`mx.nd.NDArray`, `mx.sym.Symbol` and mx.np's ndarray and symbol run the same operators
under the same dunder names; only the registered op (legacy or NumPy semantics) and the
function that runs it (`registry.invoke`, a graph node, mx.np's `call`) differ. `define`
turns the table into plain methods once, when a class is defined, so a call costs what a
hand-written `def __add__(self, other): return call("add", self, other)` costs.
"""

BINARY, UNARY, COMPARE = "binary", "unary", "compare"
LEGACY, NUMPY = 0, 1   # which op-name column of OPERATORS a class runs

# dunder stem, Python spelling, (legacy op (mx.nd, mx.sym), NumPy-semantics op (mx.np)),
# kind, whether arrays update in place (`__i<stem>__`). A BINARY op also gets its reflected
# method (`__r<stem>__`, operands swapped). None: that flavour has no such operator.
OPERATORS = (
    ("add", "+", ("add", "_np_add"), BINARY, True),
    ("sub", "-", ("subtract", "_np_subtract"), BINARY, True),
    ("mul", "*", ("multiply", "_np_multiply"), BINARY, True),
    ("truediv", "/", ("divide", "_np_true_divide"), BINARY, True),
    ("mod", "%", ("modulo", "_np_modulo"), BINARY, True),
    ("pow", "**", ("power", "_np_power"), BINARY, False),
    ("matmul", "@", (None, "_np_matmul"), BINARY, False),
    ("and", "&", (None, "_np_bitwise_and"), BINARY, False),
    ("or", "|", (None, "_np_bitwise_or"), BINARY, False),
    ("xor", "^", (None, "_np_bitwise_xor"), BINARY, False),
    ("neg", "-", ("negative", "negative"), UNARY, False),
    ("abs", "abs", ("abs", "abs"), UNARY, False),
    ("invert", "~", (None, "_np_invert"), UNARY, False),
    ("eq", "==", ("equal", "_np_equal"), COMPARE, False),
    ("ne", "!=", ("not_equal", "_np_not_equal"), COMPARE, False),
    ("gt", ">", ("greater", "_np_greater"), COMPARE, False),
    ("ge", ">=", ("greater_equal", "_np_greater_equal"), COMPARE, False),
    ("lt", "<", ("lesser", "_np_lesser"), COMPARE, False),
    ("le", "<=", ("lesser_equal", "_np_lesser_equal"), COMPARE, False),
)

# what `a == None` and `a != None` give on arrays (a symbol builds the node instead)
_IF_NONE = {"eq": False, "ne": True}


def define(cls, call, column, inplace=False, none_check=True):
    """Add the operator methods of `column` (LEGACY or NUMPY) to `cls`.

    Each method returns `call(op_name, *operands)`. `inplace`: also `__iadd__` ..., which
    return `self._inplace(op_name, other)`. `none_check`: `==`/`!=` with None give
    False/True without calling an op (arrays); symbols leave it to the op.
    """
    for stem, spelling, ops, kind, has_inplace in OPERATORS:
        op = ops[column]
        if op is None:
            continue
        if kind == BINARY:
            _put(cls, stem, _binary(call, op), f"self {spelling} other")
            _put(cls, "r" + stem, _reflected(call, op), f"other {spelling} self")
        elif kind == UNARY:
            form = f"{spelling}(self)" if spelling.isalpha() else f"{spelling}self"
            _put(cls, stem, _unary(call, op), form)
        elif none_check and stem in _IF_NONE:
            _put(cls, stem, _compare_or_none(call, op, _IF_NONE[stem]), f"self {spelling} other")
        else:
            _put(cls, stem, _binary(call, op), f"self {spelling} other")
        if inplace and has_inplace:
            _put(cls, "i" + stem, _inplace(op), f"self {spelling}= other, in place")


def _put(cls, stem, method, form):
    method.__name__ = f"__{stem}__"
    method.__qualname__ = f"{cls.__name__}.__{stem}__"
    method.__doc__ = f"`{form}`"
    setattr(cls, method.__name__, method)


def _binary(call, op):
    def method(self, other):
        return call(op, self, other)
    return method


def _reflected(call, op):
    def method(self, other):
        return call(op, other, self)
    return method


def _unary(call, op):
    def method(self):
        return call(op, self)
    return method


def _compare_or_none(call, op, if_none):
    def method(self, other):
        return if_none if other is None else call(op, self, other)
    return method


def _inplace(op):
    def method(self, other):
        return self._inplace(op, other)
    return method
