"""`autograd.get_symbol`: the operators recorded on the autograd tape, rebuilt as a Symbol.

Each tape node keeps the call that made it (`Node.call`: the op, its inputs, its other
arguments); replaying those calls with `apply_op` on Symbols gives the same graph. Arrays
the graph reads but did not compute become variables, named as MXNet names them: `var<k>`
for arrays marked with attach_grad(), `null<k>` for the others. A hybridized block's call
is one `_CachedOp` node holding its graph (or, inlined, its operators one by one; see
cached_op.py), as in MXNet.
"""
import itertools

from ..base import MXNetError
from .symbol import apply_op, var


def symbol_of(head):
    """The Symbol of the recorded computation that produced the array `head`."""
    built, leaves, counter = {}, {}, itertools.count()

    def leaf(array):
        if id(array) not in leaves:
            marked = array._grad_req not in (None, "null")
            leaves[id(array)] = (array, var(f"{'var' if marked else 'null'}{next(counter)}"))
        return leaves[id(array)][1]

    def operand(x):
        if x is None or not hasattr(x, "_node"):
            return x     # a literal (scalar) or an absent optional input
        if x._node is None or id(x._node) not in built:
            return leaf(x)      # not recorded, or a constant from a freed graph
        return built[id(x._node)][x._out_index]

    for node in _nodes_in_order(head._node):
        if node.call is None:
            raise MXNetError(f"autograd.get_symbol: {node.op_name} (a custom Function) has "
                             "no operator call to rebuild; record plain operators, or a "
                             "HybridBlock, which becomes one _CachedOp node")
        op, inputs, extra, attrs = node.call[:4]
        built[id(node)] = apply_op(op, [operand(x) for x in inputs] + list(extra),
                                   dict(attrs))
    return built[id(head._node)][head._out_index]


def _nodes_in_order(last):
    """Tape nodes `last` depends on, in recording order (inputs before their users)."""
    found, stack = {}, [last]
    while stack:
        node = stack.pop()
        if id(node) in found:
            continue
        found[id(node)] = node
        stack.extend(x._node for x in node.inputs if x is not None and x._node is not None)
    return sorted(found.values(), key=lambda n: n.seq)
