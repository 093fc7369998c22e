"""Shape inference for `Symbol.infer_shape`: run the graph op by op on placeholder arrays
of the known shapes, and give a variable that nothing sized (a layer's deferred weight,
e.g. `i2h_weight` of shape (400, 0)) the shape its operator needs, as MXNet's shape
inference does for FullyConnected's weight and bias.
"""
import numpy as np

from ..base import MXNetError
from . import implicit


def _fully_connected(attrs, shapes):
    data = shapes[0]
    if data is None:
        return {}
    width = data[-1] if not attrs.get("flatten", True) else int(np.prod(data[1:]))
    hidden = attrs.get("num_hidden")
    return {1: (hidden, width), 2: (hidden,)}


# op name -> rule(attrs, input shapes (None where unknown)) -> {input position: shape}
PARAMETER_RULES = {"FullyConnected": _fully_connected}
PARAMETER_RULES.update(implicit.PARAMETER_SHAPES)   # the other layers that create parameters


def _known(shape):
    return shape is not None and all(s > 0 for s in shape)


def _given_shape(node, shapes):
    if node.name in shapes:
        return tuple(shapes[node.name])
    shape = node.var_attrs.get("shape")
    return tuple(shape) if _known(shape) else None


def _fill_unknown_inputs(node, values, var_shapes):
    """Size the variables among `node`'s inputs that have no shape yet, by its op's rule."""
    entries = [i for i in node.inputs if isinstance(i, tuple)]
    unknown = [k for k, (src, _) in enumerate(entries) if values.get(id(src)) is None]
    if not unknown:
        return
    rule = PARAMETER_RULES.get(node.op.name)
    shapes = [None if values.get(id(src)) is None else values[id(src)][idx].shape
              for src, idx in entries]
    filled = rule(node.attrs, shapes) if rule else {}
    for k in unknown:
        src = entries[k][0]
        if not src.is_var or k not in filled:
            raise _Unknown(src.name)
        var_shapes[src.name] = tuple(filled[k])
        values[id(src)] = [np.ones(filled[k], dtype=np.float32)]


class _Unknown(Exception):
    """A variable's shape cannot be inferred from what was given."""


def _run(node, values):
    args = [values[id(i[0])][i[1]] if isinstance(i, tuple) else i for i in node.inputs]
    out, _ = node.op.fn(np, *args, **node.attrs)
    return list(out) if isinstance(out, (list, tuple)) else [np.asarray(out)]


def infer_shapes(symbol, shapes):
    """(arg_shapes, out_shapes, aux_shapes) of `symbol` given `shapes` {variable: shape};
    (None, None, None) when some argument's shape cannot be inferred."""
    values, var_shapes = {}, {}
    nodes = symbol._topo()
    for node in nodes:
        if node.is_var:
            shape = _given_shape(node, shapes)
            if shape is not None:
                var_shapes[node.name] = shape
                values[id(node)] = [np.ones(shape, dtype=np.float32)]
    try:
        for node in nodes:
            if node.is_var:
                continue
            _fill_unknown_inputs(node, values, var_shapes)
            try:
                values[id(node)] = _run(node, values)
            except MXNetError as err:
                raise MXNetError(f"infer_shape: {node.name}: {err}") from None
    except _Unknown:
        return None, None, None
    args = symbol.list_arguments()
    outs = [values[id(node)][idx].shape for node, idx in symbol._outputs]
    return [var_shapes[a] for a in args], outs, []
