"""The operator dunders of NDArray, Symbol and mx.np's two classes, generated from one table:
each runs the op the table names, with the operands in the right order."""
import numpy as np
import pytest

import minigluon as mx
from minigluon.ndarray.operator_methods import BINARY, LEGACY, NUMPY, OPERATORS, UNARY

CLASSES = [(mx.sym.var, LEGACY), (lambda name: mx.sym.var(name).as_np_ndarray(), NUMPY)]


def _node(symbol):
    node = symbol._outputs[0][0]
    return node.op.name, [i[0].name if isinstance(i, tuple) else i for i in node.inputs]


@pytest.mark.parametrize("make, column", CLASSES, ids=["sym", "np-sym"])
def test_each_dunder_builds_the_table_op_with_operands_in_order(make, column):
    a, b = make("a"), make("b")
    for stem, _, ops, kind, _ in OPERATORS:
        op = ops[column]
        if op is None:
            assert not any(f"__{stem}__" in vars(k) for k in type(a).__mro__)
            continue
        if kind == UNARY:
            assert _node(getattr(a, f"__{stem}__")()) == (op, ["a"])
            continue
        assert _node(getattr(a, f"__{stem}__")(b)) == (op, ["a", "b"])
        if kind == BINARY:
            assert _node(getattr(a, f"__r{stem}__")(b)) == (op, ["b", "a"])


def test_only_ndarrays_update_in_place():
    x = mx.nd.array([1.0, 2.0])
    buffer = x._data
    x += 1
    x **= 2                       # no __ipow__: a new array, as Python's fallback makes
    assert x._data is not buffer and x.asnumpy().tolist() == [4.0, 9.0]
    y = mx.nd.array([1.0, 2.0])
    buffer = y._data
    y *= 3
    assert y._data is buffer and y.asnumpy().tolist() == [3.0, 6.0]
    s = mx.sym.var("s")
    t = s
    t += 1
    assert t is not s and not hasattr(mx.sym.Symbol, "__iadd__")


def test_comparing_arrays_with_none_calls_no_op_but_symbols_build_a_node():
    for x in (mx.nd.array([1.0]), mx.np.array([1.0])):
        assert (x == None) is False and (x != None) is True   # noqa: E711
    assert _node(mx.sym.var("s") == None)[0] == "equal"       # noqa: E711


def test_np_arrays_promote_through_the_numpy_column():
    x = mx.np.array([1, 2], dtype="int32")
    assert (x / 2).dtype == np.float32 and (x > 1).dtype == np.bool_
    assert (mx.nd.array([1, 2]) > 1).dtype == np.float32
