"""The inputs an operator creates for itself when built on Symbols, as MXNet does.

`mx.sym.FullyConnected(data, num_hidden=10, name='fc1')` has the arguments `data`,
`fc1_weight` and `fc1_bias`: each parameter input left out becomes a variable named
`<op name>_<input name>`, and so does any other input the operator cannot do without
(`mx.sym.Convolution(kernel=(3, 3), num_filter=8, name='c')` reads `c_data`).
`lr_mult=` / `wd_mult=` given to the operator go onto the parameters' variables
(`__lr_mult__`, `__wd_mult__`), where `Symbol.attr_dict()` and the optimizers find them.
`PARAMETER_SHAPES` gives shape_inference.py the parameters' shapes from the shape of the
data each layer receives (FullyConnected's rule is there).
"""

import functools
import inspect

__all__ = ["param_inputs", "required_inputs", "param_attrs", "take_mults",
           "PARAMETER_SHAPES"]


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


@functools.lru_cache(maxsize=None)
def required_inputs(op):
    """The array inputs of `op` (an OpDef) that its function has no default for."""
    if op.variadic:
        return ()
    params = inspect.signature(op.fn).parameters
    return tuple(name for name in op.inputs
                 if name in params and params[name].default is inspect.Parameter.empty)


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
# rules as symbol/shape_inference.py takes them: (attrs, input shapes) -> {position: shape}
def _conv_shapes(attrs, shapes, deconv=False):
    data = shapes[0]
    if data is None:
        return {}
    kernel, n = tuple(attrs["kernel"]), int(attrs["num_filter"])
    groups = int(attrs.get("num_group", 1))
    weight = (data[1], n // groups) if deconv else (n, data[1] // groups)
    return {1: weight + kernel, 2: (n,)}


def _channel_shapes(axis):
    def rule(attrs, shapes):
        if shapes[0] is None:
            return {}
        c = (shapes[0][int(attrs.get("axis", axis))],)
        return dict.fromkeys(range(1, 5), c)
    return rule


PARAMETER_SHAPES = {
    "Convolution": _conv_shapes,
    "Deconvolution": lambda attrs, shapes: _conv_shapes(attrs, shapes, deconv=True),
    "BatchNorm": _channel_shapes(1),
    "InstanceNorm": _channel_shapes(1),
    "LayerNorm": _channel_shapes(-1),
    "LeakyReLU": _channel_shapes(1),
    "Embedding": lambda attrs, shapes: {1: (int(attrs["input_dim"]), int(attrs["output_dim"]))},
}
