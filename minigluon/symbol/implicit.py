"""The parameters a layer operator creates for itself when built on Symbols, as MXNet does.

`mx.sym.FullyConnected(data, num_hidden=10, name='fc1')` has the arguments `data`,
`fc1_weight` and `fc1_bias`: each parameter input left out becomes a variable named
`<op name>_<input name>`. `lr_mult=` / `wd_mult=` given to the operator go onto those
variables (`__lr_mult__`, `__wd_mult__`), where `Symbol.attr_dict()` and the optimizers find
them. `infer_arg_shapes` gives every argument's shape from the data shapes, deducing the
parameters' shapes from the shape of the data each layer receives.
"""
import numpy as np

from .. import autograd
from ..base import MXNetError
from ..ndarray import registry

__all__ = ["param_inputs", "param_attrs", "take_mults", "infer_arg_shapes"]


def _conv_params(attrs):
    return ("weight",) if attrs.get("no_bias") else ("weight", "bias")


def _prelu_params(attrs):
    return ("gamma",) if attrs.get("act_type") == "prelu" else ()


# op name -> the parameter inputs it creates when they are left out (given its attrs)
_PARAMS = {
    "FullyConnected": _conv_params,
    "Convolution": _conv_params,
    "Deconvolution": _conv_params,
    "BatchNorm": lambda attrs: ("gamma", "beta", "moving_mean", "moving_var"),
    "LayerNorm": lambda attrs: ("gamma", "beta"),
    "InstanceNorm": lambda attrs: ("gamma", "beta"),
    "Embedding": lambda attrs: ("weight",),
    "LeakyReLU": _prelu_params,
}


def param_inputs(op_name, attrs):
    """The parameter inputs `op_name` creates as variables when they are not given."""
    rule = _PARAMS.get(op_name)
    return rule(attrs) if rule else ()


# the initializer MXNet gives a created parameter in place of the name-suffix rules
_INITS = {("LeakyReLU", "gamma"): '["constant", {"value": 0.25}]'}


def param_attrs(op_name, input_name, mults):
    """The attributes of the variable created for `input_name` of `op_name`: the op's
    lr/wd multipliers and, where MXNet sets one, its `__init__` initializer."""
    attrs = dict(mults)
    if (op_name, input_name) in _INITS:
        attrs["__init__"] = _INITS[(op_name, input_name)]
    return attrs


def take_mults(attrs):
    """Remove `lr_mult` / `wd_mult` from an operator's attrs; return them as variable attrs."""
    return {f"__{key}__": float(attrs.pop(key)) for key in ("lr_mult", "wd_mult")
            if key in attrs}


# ---- shapes of the parameters, from the shape of the layer's data -----------------------
def _fc_shapes(data, attrs):
    n = int(attrs["num_hidden"])
    fan_in = data[-1] if attrs.get("flatten", True) is False else int(np.prod(data[1:]))
    return {"weight": (n, fan_in), "bias": (n,)}


def _conv_shapes(data, attrs):
    kernel, n, groups = tuple(attrs["kernel"]), int(attrs["num_filter"]), int(
        attrs.get("num_group", 1))
    return {"weight": (n, data[1] // groups) + kernel, "bias": (n,)}


def _deconv_shapes(data, attrs):
    kernel, n, groups = tuple(attrs["kernel"]), int(attrs["num_filter"]), int(
        attrs.get("num_group", 1))
    return {"weight": (data[1], n // groups) + kernel, "bias": (n,)}


def _channel_shapes(axis):
    def rule(data, attrs):
        c = (data[int(attrs.get("axis", axis))],)
        return dict.fromkeys(("gamma", "beta", "moving_mean", "moving_var"), c)
    return rule


_SHAPES = {
    "FullyConnected": _fc_shapes,
    "Convolution": _conv_shapes,
    "Deconvolution": _deconv_shapes,
    "BatchNorm": _channel_shapes(1),
    "InstanceNorm": _channel_shapes(1),
    "LayerNorm": _channel_shapes(-1),
    "LeakyReLU": lambda data, attrs: {"gamma": (data[1],)},
    "Embedding": lambda data, attrs: {"weight": (int(attrs["input_dim"]),
                                                 int(attrs["output_dim"]))},
}


def infer_arg_shapes(symbol, nodes, shapes, zeros):
    """{argument name: shape} for every variable of `symbol` (its nodes in `nodes`, inputs
    before users), running each operator once on zero arrays made by `zeros(shape)`.

    `shapes` gives the data shapes by name; a variable's own `shape=` attr counts too. A
    parameter variable a layer created gets its shape from the layer's data shape. Returns
    None when some argument's shape cannot be found.
    """
    values, arg_shapes = {}, dict(shapes)
    for node in nodes:
        if node.is_var:
            shape = arg_shapes.get(node.name) or _declared(node)
            if shape is not None:
                arg_shapes[node.name] = tuple(shape)
                values[(id(node), 0)] = zeros(tuple(shape))
            continue
        if not _fill_params(node, values, arg_shapes, zeros):
            return None
        args = [values[(id(i[0]), i[1])] if isinstance(i, tuple) else i for i in node.inputs]
        for k, out in enumerate(_run(node, args)):
            values[(id(node), k)] = out
    if any(n.name not in arg_shapes for n in nodes if n.is_var):
        return None
    return arg_shapes


def _declared(node):
    shape = node.var_attrs.get("shape")
    return tuple(shape) if shape and all(s > 0 for s in shape) else None


def _fill_params(node, values, arg_shapes, zeros):
    """Give the unknown-shape parameter variables feeding `node` their shapes; False when
    an input is still unknown."""
    rule = _SHAPES.get(node.op.name)
    for pos, entry in enumerate(node.inputs):
        if not isinstance(entry, tuple) or (id(entry[0]), entry[1]) in values:
            continue
        src = node.inputs[0]
        if rule is None or pos == 0 or not entry[0].is_var or \
                (id(src[0]), src[1]) not in values:
            return False
        name = node.op.inputs[pos] if pos < len(node.op.inputs) else None
        shape = rule(values[(id(src[0]), src[1])].shape, node.attrs).get(name)
        if shape is None:
            raise MXNetError(f"infer_shape: cannot deduce the shape of {entry[0].name!r} "
                             f"(input {name!r} of {node.name}); pass it to bind or infer_shape")
        arg_shapes[entry[0].name] = tuple(shape)
        values[(id(entry[0]), 0)] = zeros(tuple(shape))
    return True


def _run(node, args):
    with autograd.pause():
        out = registry.invoke(node.op, args, dict(node.attrs))
    return out if isinstance(out, (list, tuple)) else [out]
