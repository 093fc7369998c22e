"""Op hooks: a callback that sees each operator's outputs (and, with monitor_all, its inputs)
while a cached graph runs, under the names MXNet's monitor gives them.

`HybridBlock.register_op_hook(callback, monitor_all)` and `CachedOp.register_op_hook` take
`callback(name, op_name, array)`: `name` and `op_name` are bytes, as MXNet's C callback
passes them (`mx.base.py_str` decodes them), and `array` is a copy of the value, so the
callback may keep it. For a node `dense0_fwd` running FullyConnected:

- outputs: `dense0_fwd_output` for operators that name their outputs in MXNet (layers,
  activations, concat, ...; `_output<i>` or their own names when there are several), and
  `dense0_fwd_<i>` for the others (arithmetic, reshapes, reductions);
- inputs: `dense0_fwd_data`, `_weight`, `_bias` for operators that name their inputs in
  MXNet (layers, binary arithmetic `lhs`/`rhs`, and `arg<i>` for concat, stack, add_n), and
  `<node>_input<i>` for the others (Activation, unary math, reshapes).

Python literals (scalars) and absent optional inputs are not arrays and are not reported.
"""
from ..base import MXNetError

__all__ = ["OpHook"]

# operators whose inputs MXNet's monitor calls by name (they list them in MXNet)
_NAMED_INPUTS = frozenset((
    "FullyConnected Convolution Deconvolution Pooling BatchNorm LayerNorm GroupNorm "
    "InstanceNorm LeakyReLU Dropout Embedding CTCLoss RNN SequenceLast SequenceMask "
    "SequenceReverse softmax log_softmax softmax_cross_entropy pad split split_v2 swapaxes "
    "take one_hot where dot batch_dot repeat tile squeeze slice_like _slice_assign "
    "concat stack add_n "
    "add subtract multiply divide modulo power maximum minimum hypot equal not_equal "
    "greater greater_equal lesser lesser_equal logical_and logical_or logical_xor").split())

# operators whose outputs MXNet's monitor calls `output` (or by the names given here)
_NAMED_OUTPUTS = frozenset((
    "Activation BatchNorm Convolution Deconvolution Dropout FullyConnected GroupNorm "
    "LayerNorm InstanceNorm LeakyReLU CTCLoss Pooling RNN SequenceLast SequenceMask "
    "SequenceReverse softmax softmin concat make_loss pad split swapaxes").split())
_OUTPUT_NAMES = {"BatchNorm": ("output", "mean", "var"), "Dropout": ("output", "mask"),
                 "RNN": ("output", "state_output", "statecell_output")}


def input_names(op, refs):
    """The monitor's name for each array input of a step (its refs), in order."""
    positions = [k for k, (kind, _) in enumerate(refs) if kind == "slot"]
    if op.name not in _NAMED_INPUTS:
        return [f"input{j}" for j in range(len(positions))]
    if op.variadic:
        return [f"arg{j}" for j in range(len(positions))]
    return [op.inputs[k] if k < len(op.inputs) else f"input{k}" for k in positions]


def output_names(op, count):
    """The monitor's name for each of a step's `count` outputs."""
    if op.name not in _NAMED_OUTPUTS:
        return [str(i) for i in range(count)]
    given = _OUTPUT_NAMES.get(op.name, ())
    if count == 1:
        return ["output"]
    return [given[i] if i < len(given) else f"output{i}" for i in range(count)]


class OpHook:
    """`callback(name, op_name, array)` for every output (and, with monitor_all, every
    input) of every operator of a graph run."""

    def __init__(self, callback, monitor_all=False):
        if not callable(callback):
            raise MXNetError(f"register_op_hook: callback must be callable, got {callback!r}; "
                             "pass a function of (name, op_name, array)")
        self.callback = callback
        self.monitor_all = bool(monitor_all)

    def watcher(self, graph, ctx, array_class):
        """A `watch(step index, raw args, raw outputs)` for `graph`'s traced steps that
        calls the callback with `array_class` copies on `ctx`."""
        def watch(index, args, outs):
            op, refs = graph.traced_steps[index][:2]
            node = graph.node_names[index]
            if self.monitor_all:
                arrays = [args[k] for k, (kind, _) in enumerate(refs) if kind == "slot"]
                self._report(node, op, input_names(op, refs), arrays, ctx, array_class)
            self._report(node, op, output_names(op, len(outs)), outs, ctx, array_class)
        return watch

    def _report(self, node, op, names, arrays, ctx, array_class):
        for name, raw in zip(names, arrays):
            if raw is None:
                continue
            copy = array_class(ctx.xp.array(raw, copy=True), ctx)
            self.callback(f"{node}_{name}".encode(), op.name.encode(), copy)
