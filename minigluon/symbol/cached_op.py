"""`mx.nd.CachedOp`: a Symbol compiled once and then called like an operator on NDArrays,
as in MXNet; a hybridized HybridBlock runs its traced graph through one.

    sym = mx.sym.Convolution(kernel=(3, 3), num_filter=10, name='conv') + 2
    op = mx.nd.CachedOp(sym)             # inputs: sym.list_inputs(), here conv_data,
    out = op(data, weight, bias)         # conv_weight, conv_bias, in that order

Under `autograd.record()` a call is one tape node, the `_CachedOp` operator holding the
graph (graph.py), except that a graph of at most `inline_limit` operators is inlined: its
operators run one by one on the tape, as MXNet does to spare tiny graphs a node of their
own (`autograd.get_symbol` then shows them). An op hook (op_hook.py) sees every operator
of a call.

Flags, by MXNet's names, as (name, value) pairs or a dict; values may be strings, as MXNet
passes them on: `inline_limit` (int, default 2); `static_alloc` (bool; no inlining when
set); `static_shape` (bool, needs static_alloc); `forward_bulk_size`,
`backward_bulk_size` (ints). MXNet uses the last four to plan memory and to batch engine
work; minigluon runs a graph on buffers it allocates per call, so beyond these checks they
change nothing.
"""
from .. import autograd
from ..base import MXNetError
from ..ndarray import registry
from ..ndarray.ndarray import NDArray
from .graph import CachedGraph
from .op_hook import OpHook
from .symbol import Symbol

__all__ = ["CachedOp", "parse_flags"]

_BOOL_FLAGS = ("static_alloc", "static_shape")
_INT_FLAGS = ("inline_limit", "forward_bulk_size", "backward_bulk_size")
_DEFAULTS = {"static_alloc": False, "static_shape": False, "inline_limit": 2,
             "forward_bulk_size": None, "backward_bulk_size": None}


def parse_flags(flags):
    """MXNet's CachedOp flags (pairs or a dict) checked, over the defaults, as a dict."""
    pairs = flags.items() if isinstance(flags, dict) else flags
    out = dict(_DEFAULTS)
    for pair in pairs:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
            raise MXNetError(f"CachedOp flags must be (name, value) pairs, got {pair!r}")
        name, value = pair
        if name not in _DEFAULTS:
            raise MXNetError(f"CachedOp: unknown flag {name!r}; the flags are "
                             f"{sorted(_DEFAULTS)}")
        out[name] = _as_bool(name, value) if name in _BOOL_FLAGS else _as_count(name, value)
    if out["static_shape"] and not out["static_alloc"]:
        raise MXNetError("CachedOp: static_shape=True needs static_alloc=True as well")
    return out


def _as_bool(name, value):
    if isinstance(value, str) and value.lower() in ("true", "1", "false", "0"):
        return value.lower() in ("true", "1")
    if isinstance(value, (bool, int)) and value in (0, 1):
        return bool(value)
    raise MXNetError(f"CachedOp flag {name} must be True or False, got {value!r}")


def _as_count(name, value):
    if value is None or (isinstance(value, str) and value == "None"):
        return None
    try:
        count = int(value)
    except (TypeError, ValueError):
        count = -1
    if count < 0 or isinstance(value, (bool, float)):
        raise MXNetError(f"CachedOp flag {name} must be a non-negative integer, got {value!r}")
    return count


class CachedOp:
    """`sym` compiled for calls on NDArrays, one per input of `sym.list_inputs()` (or of
    `input_names`, in that order); returns an NDArray, or a list for several outputs."""

    def __init__(self, sym, flags=(), input_names=None):
        if not isinstance(sym, Symbol):
            raise MXNetError(f"CachedOp needs a Symbol, got {type(sym).__name__}")
        self.flags = parse_flags(flags)
        names = sym.list_inputs() if input_names is None else list(input_names)
        self._graph = CachedGraph(sym, names)
        self._hook = None

    @property
    def input_names(self):
        return list(self._graph.input_names)

    @property
    def graph(self):
        """The compiled CachedGraph (its steps, as rewritten, and its traced steps)."""
        return self._graph

    def register_op_hook(self, callback, monitor_all=False):
        """Call `callback(name, op_name, array)` for each operator output of later calls
        (and each input when monitor_all); None removes the hook. See op_hook.py."""
        self._hook = None if callback is None else OpHook(callback, monitor_all)

    def __call__(self, *args, out=None):
        outputs = self.run(list(args))
        if out is not None:
            return _write_into(out, outputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def run(self, inputs):
        """The outputs, always as a list, for `inputs` in input_names' order."""
        first = self._check_inputs(inputs)
        watch = None if self._hook is None else \
            self._hook.watcher(self._graph, first.context, type(first))
        if self._inlined():
            return self._run_inline(inputs, watch)
        return self._graph(inputs, watch)

    def _check_inputs(self, inputs):
        names = self._graph.input_names
        if not names:
            raise MXNetError("CachedOp: the graph has no inputs, so there is no array to "
                             "take a device from; give the symbol a variable")
        if len(inputs) != len(names):
            raise MXNetError(f"CachedOp takes {len(names)} inputs {names}, got {len(inputs)}")
        for name, x in zip(names, inputs):
            if not isinstance(x, NDArray):
                raise MXNetError(f"CachedOp input {name!r} must be an NDArray, got "
                                 f"{type(x).__name__}")
            if x.context != inputs[0].context:
                raise MXNetError(f"CachedOp inputs are on {inputs[0].context} and "
                                 f"{x.context} ({name!r}); put all inputs on one device")
        return inputs[0]

    def _inlined(self):
        """Whether this call runs operator by operator on the tape (see the module doc);
        a graph that hands an input straight out is kept whole, so that its output is a
        new array on the tape."""
        graph = self._graph
        return autograd.is_recording() and not self.flags["static_alloc"] and \
            len(graph.traced_steps) <= self.flags["inline_limit"] and \
            all(s >= graph.num_inputs for s in graph.output_slots)

    def _run_inline(self, inputs, watch):
        graph = self._graph
        values = list(inputs) + [None] * (graph.num_slots - graph.num_inputs)
        for index, (op, refs, attrs, first, count) in enumerate(graph.traced_steps):
            args = [values[v] if kind == "slot" else v for kind, v in refs]
            result = registry.invoke(op, args, dict(attrs))
            values[first:first + count] = result if isinstance(result, list) else [result]
            if watch is not None:
                watch(index, [a._data if isinstance(a, NDArray) else a for a in args],
                      [v._data for v in values[first:first + count]])
        return [values[s] for s in graph.output_slots]


def _write_into(out, outputs):
    """Copy `outputs` into the `out` array(s), which take over their place on the tape."""
    targets = [out] if isinstance(out, NDArray) else list(out)
    if len(targets) != len(outputs):
        raise MXNetError(f"CachedOp: {len(targets)} out arrays for {len(outputs)} outputs")
    for dst, src in zip(targets, outputs):
        if dst.shape != src.shape:
            raise MXNetError(f"CachedOp: out has shape {dst.shape}, the output {src.shape}")
        dst._data[...] = src._data
        dst._node, dst._out_index = src._node, src._out_index
    return out
