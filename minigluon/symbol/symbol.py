"""Symbol: a node of a traced computation graph (`mx.sym`).

A Symbol is a list of outputs, each an (`_Node`, index) pair. A node is a variable (no op)
or an operator from the same registry that NDArrays use, with its inputs (other outputs or
Python literals such as scalars) and attributes. `HybridBlock` traces `hybrid_forward` with
Symbols to build the graph it replays; users can also build graphs by hand:

    x, y = mx.sym.Variable('X'), mx.sym.Variable('Y')
    z = (x + y) / 100
    z.eval(X=mx.nd.ones(2), Y=mx.nd.ones(2))
"""
import itertools
import json

import numpy as np

from ..base import MXNetError
from ..name import NameManager
from ..ndarray import operator_methods, registry
from ..ndarray.ndarray import STORAGE_TYPE_STR_TO_ID
from ..ndarray.sparse_storage import check_stype
from . import implicit
from .graph import CachedGraph

_node_seq = itertools.count()
_np_class = None   # mx.np's symbol class, registered by mx.np (which sits above symbol)


def set_np_class(cls):
    """Make `cls` (mx.np's `_Symbol`) the class `Symbol.as_np_ndarray()` returns."""
    global _np_class
    _np_class = cls


def _node_name(name, op_name):
    """The name the current NameManager gives a node: `name` when given (a `Prefix`
    manager prefixes it), else one made from the op's lower-cased name."""
    return NameManager.current.get(name, op_name.lower().lstrip("_"))


def _num_outputs(op_name, attrs):
    """How many outputs an op node has (known from its attributes)."""
    if op_name in ("split", "SliceChannel"):
        return int(attrs.get("num_outputs", attrs.get("_pos0", 1)))
    if op_name == "topk" and attrs.get("ret_typ") == "both":
        return 2
    if op_name == "BatchNorm" and attrs.get("output_mean_var"):
        return 3
    if op_name == "_CachedOp":
        return attrs["graph"].num_outputs
    return 1


class _Node:
    __slots__ = ("op", "inputs", "attrs", "name", "num_outputs", "var_attrs", "seq")

    def __init__(self, op, inputs, attrs, name, var_attrs=None):
        self.seq = next(_node_seq)    # creation order = the order the trace ran the ops
        self.op = op                  # OpDef, or None for a variable
        self.inputs = inputs          # list of (node, index) or literals
        self.attrs = attrs
        self.name = name
        self.var_attrs = var_attrs or {}
        self.num_outputs = 1 if op is None else _num_outputs(op.name, attrs)

    @property
    def is_var(self):
        return self.op is None


class Symbol:
    """A symbolic value: the output(s) of a traced graph."""

    __slots__ = ("_outputs",)

    def __init__(self, outputs):
        self._outputs = list(outputs)

    # ---- structure ----------------------------------------------------------------------
    @property
    def name(self):
        if len(self._outputs) != 1:
            return None
        node, _ = self._outputs[0]
        return node.name

    def _entry(self, what):
        if len(self._outputs) != 1:
            raise MXNetError(f"{what}: this symbol groups {len(self._outputs)} outputs; pick "
                             "one with sym[i]")
        return self._outputs[0]

    def __getitem__(self, index):
        outs = self._outputs
        if isinstance(index, str):
            names = self.list_outputs()
            if index not in names:
                raise MXNetError(f"no output named {index!r}; outputs are {names}")
            index = names.index(index)
        if not isinstance(index, int):
            raise MXNetError("a Symbol can only be indexed by an output number or name; use "
                             "F.slice / F.slice_axis / F.take to slice values")
        return type(self)([outs[index]])

    def __len__(self):
        return len(self._outputs)

    def __iter__(self):
        return (type(self)([o]) for o in self._outputs)

    def _topo(self):
        """Every node the outputs depend on, in creation order (inputs before users).

        Creation order is the order the traced code ran the operators, so a replay runs
        them, and its backward meets them, exactly as the imperative code did.
        """
        found, stack = {}, [node for node, _ in self._outputs]
        while stack:
            node = stack.pop()
            if id(node) in found:
                continue
            found[id(node)] = node
            stack.extend(i[0] for i in node.inputs if isinstance(i, tuple))
        return sorted(found.values(), key=lambda n: n.seq)

    def list_arguments(self):
        """Names of the variables, in the order they are first used."""
        return [n.name for n in self._topo() if n.is_var]

    list_inputs = list_arguments

    def list_outputs(self):
        names = []
        for node, idx in self._outputs:
            suffix = "output" if node.num_outputs == 1 else f"output{idx}"
            names.append(node.name if node.is_var else f"{node.name}_{suffix}")
        return names

    def list_auxiliary_states(self):
        return []

    def attr(self, key):
        """The attribute `key` of this symbol's node as a str (None when it has none), e.g.
        a variable's `__lr_mult__` or `__storage_type__`."""
        if len(self._outputs) != 1:
            raise MXNetError(f"attr: this symbol groups {len(self._outputs)} outputs; ask "
                             "one of them (symbol[i].attr(key))")
        node = self._outputs[0][0]
        value = (node.var_attrs if node.is_var else node.attrs).get(key)
        return None if value is None else str(value)

    def attr_dict(self):
        """{variable name: {attribute: str value}}: `__lr_mult__`, `__wd_mult__`, `__init__`
        as given to `Variable` or to the layer that created the variable."""
        return {n.name: {k: str(v) for k, v in n.var_attrs.items() if k.startswith("__")}
                for n in self._topo() if n.is_var and
                any(k.startswith("__") for k in n.var_attrs)}

    def get_internals(self):
        """Every node's outputs, as one grouped symbol."""
        return Symbol([(n, i) for n in self._topo()
                       for i in range(n.num_outputs)])

    def __repr__(self):
        if len(self._outputs) == 1:
            return f"<Symbol {self.name}>"
        return f"<Symbol group [{', '.join(self.list_outputs())}]>"

    # ---- evaluation ---------------------------------------------------------------------
    def eval(self, ctx=None, **kwargs):
        """Evaluate with the given NDArrays bound to the variables; returns a list."""
        return self.bind(ctx, kwargs).forward()

    def bind(self, ctx=None, args=None, args_grad=None, grad_req="write", aux_states=None,
             **kwargs):
        """An Executor running this graph on `ctx` with `args` (dict or list by position)."""
        from .executor import Executor
        return Executor(self, ctx, args, args_grad, grad_req)

    def infer_shape(self, **shapes):
        """(arg_shapes, out_shapes, aux_shapes) given the shapes of the data variables;
        the shapes of FullyConnected weights and biases are inferred from their data."""
        from .shape_inference import infer_shapes
        return infer_shapes(self, shapes)

    def _var_shape(self, name):
        for n in self._topo():
            if n.is_var and n.name == name:
                shape = n.var_attrs.get("shape")
                return tuple(shape) if shape and all(s > 0 for s in shape) else None
        return None

    # ---- serialization ------------------------------------------------------------------
    def tojson(self):
        """The graph as a JSON string (see docs/symbol-format.md)."""
        nodes = self._topo()
        index = {id(n): i for i, n in enumerate(nodes)}
        out = []
        for n in nodes:
            inputs = [[index[id(i[0])], i[1]] if isinstance(i, tuple) else {"literal": _jsonable(i)}
                      for i in n.inputs]
            out.append({"op": "null" if n.is_var else n.op.name, "name": n.name,
                        "attrs": _jsonable(n.var_attrs if n.is_var else n.attrs),
                        "inputs": inputs})
        heads = [[index[id(node)], idx] for node, idx in self._outputs]
        return json.dumps({"format": "minigluon-symbol", "version": 1, "nodes": out,
                           "heads": heads}, indent=1)

    def save(self, fname):
        with open(fname, "w") as f:
            f.write(self.tojson())

    # ---- operators: the dunder methods are added by operator_methods.define below ----
    __hash__ = object.__hash__

    def reshape(self, *shape, **kwargs):
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        if shape:
            kwargs["shape"] = shape
        return _apply("reshape", self, **kwargs)

    def astype(self, dtype, copy=True):
        return _apply("cast", self, dtype=dtype)

    @property
    def T(self):
        return _apply("transpose", self)

    def as_np_ndarray(self):
        """This symbol with mx.np semantics (operators and methods as on mx.np.ndarray)."""
        return _np_class(self._outputs)

    def as_nd_ndarray(self):
        """This symbol with legacy mx.sym semantics."""
        return self if type(self) is Symbol else Symbol(self._outputs)


def _apply(op_name, *args, **kwargs):
    return apply_op(registry.OPS[op_name], args, kwargs)


operator_methods.define(Symbol, _apply, operator_methods.LEGACY, none_check=False)


def _jsonable(value):
    if isinstance(value, CachedGraph):      # a _CachedOp node's graph, written in place
        return {"__subgraph__": {"graph": json.loads(value.symbol.tojson()),
                                 "inputs": value.input_names}}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value).name
    if isinstance(value, np.dtype):
        return value.name
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise MXNetError(f"cannot serialize attribute value {value!r} of type {type(value).__name__}")


def _from_json(value):
    if isinstance(value, dict) and "__subgraph__" in value:
        sub = value["__subgraph__"]
        return CachedGraph(_from_doc(sub["graph"]), sub["inputs"])
    if isinstance(value, dict):
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_from_json(v) for v in value)
    return value


def load_json(text):
    """Rebuild a Symbol from `Symbol.tojson()` output."""
    return _from_doc(json.loads(text))


def _from_doc(doc):
    if doc.get("format") != "minigluon-symbol":
        raise MXNetError("not a minigluon symbol file (missing format 'minigluon-symbol')")
    nodes = []
    for spec in doc["nodes"]:
        inputs = [(nodes[i[0]], i[1]) if isinstance(i, list) else _from_json(i["literal"]) for i in spec["inputs"]]
        attrs = _from_json(spec["attrs"])
        if spec["op"] == "null":
            nodes.append(_Node(None, [], {}, spec["name"], attrs))
        else:
            nodes.append(_Node(registry.get(spec["op"]), inputs, attrs, spec["name"]))
    return Symbol([(nodes[i], j) for i, j in doc["heads"]])


def load(fname):
    """Read a symbol saved with `Symbol.save`."""
    with open(fname) as f:
        return load_json(f.read())


def var(name, shape=None, dtype=None, init=None, lr_mult=None, wd_mult=None, stype=None,
        **kwargs):
    """A named placeholder for an input or a parameter; `stype` ('row_sparse', 'csr')
    marks a sparse one (attribute `__storage_type__`, MXNet's id of the storage type)."""
    if not isinstance(name, str):
        raise MXNetError(f"Variable name must be a str, got {name!r}")
    attrs = {"shape": tuple(shape) if shape is not None else None,
             "dtype": np.dtype(dtype).name if dtype is not None else None}
    attrs.update({f"__{k}__": float(v) for k, v in (("lr_mult", lr_mult), ("wd_mult", wd_mult))
                  if v is not None})
    if stype is not None:
        attrs["__storage_type__"] = STORAGE_TYPE_STR_TO_ID[check_stype(stype, f"var {name!r}")]
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    return Symbol([(_Node(None, [], {}, name, attrs), 0)])


Variable = var


def Group(symbols):
    """One symbol whose outputs are the outputs of `symbols`."""
    outs = []
    for s in symbols:
        outs.extend(s._outputs)
    return Symbol(outs)


def _with_params(op, inputs, attrs, name):
    """`inputs` with a new variable `<name>_<input>` for each parameter the layer creates
    and each input it needs, when left out (see implicit.py); lr_mult/wd_mult move from
    attrs onto the parameters' variables."""
    mults = implicit.take_mults(attrs)
    params = implicit.param_inputs(op.name, attrs)
    needed = implicit.required_inputs(op)
    inputs = list(inputs)
    for pos, input_name in enumerate(op.inputs):
        if inputs[pos] is not None or (input_name not in params and input_name not in needed):
            continue
        inputs[pos] = var(f"{name}_{input_name}")
        if input_name in params:
            inputs[pos]._outputs[0][0].var_attrs.update(
                implicit.param_attrs(op.name, input_name, mults))
    return inputs


def _entry_of(x, op_name):
    if isinstance(x, Symbol):
        return x._entry(op_name)
    return x


def apply_op(op, args, kwargs):
    """Build the node for `op` applied to Symbols (and literals); returns its Symbol."""
    kwargs = dict(kwargs)
    name = kwargs.pop("name", None)
    kwargs.pop("out", None)
    inputs, extra, attrs = registry.split_args(op, args, kwargs)
    if extra:
        fn_params = op.fn.__code__.co_varnames[1 + len(op.inputs):op.fn.__code__.co_argcount]
        if len(extra) > len(fn_params):
            raise MXNetError(f"{op.name}: too many positional arguments")
        attrs = dict(zip(fn_params, extra), **attrs)
    name = _node_name(name, op.name)
    inputs = _with_params(op, inputs, attrs, name)
    entries = [_entry_of(x, op.name) for x in inputs]
    node = _Node(op, entries, attrs, name)
    # like NDArrays, results take the class of the first symbol input (mx.np's or legacy)
    cls = next((type(x) for x in inputs if isinstance(x, Symbol)), Symbol)
    return cls([(node, i) for i in range(node.num_outputs)])
