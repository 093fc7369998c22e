"""`mx.sym.sparse`: MXNet's sparse spelling of graph operators (`mx.sym.sparse.dot`,
`mx.sym.sparse.retain`, ...).

A graph run with sparse inputs calls each operator's sparse kernel, or its storage fallback
(docs/sparse.md), so these build the same nodes as `mx.sym.<op>`: the spelling only says
that sparse inputs are expected.
"""
from ..ndarray.registry import OPS
from .symbol import apply_op


def __getattr__(name):
    """`mx.sym.sparse.<op>` for every registered operator, looked up on use."""
    op = OPS.get(name)
    if op is None or name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def function(*args, **kwargs):
        return apply_op(op, args, kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = op.fn.__doc__
    return function
