"""CachedGraph: a traced Symbol compiled into a flat list of steps and run as ONE autograd
node, as MXNet's CachedOp does for hybridized blocks.

Running a step calls the same op function as the imperative path (so results are the same),
but on raw arrays: no NDArray wrappers, no per-op context checks, no per-op tape nodes.
Backward replays the steps' closures in reverse; an input's gradient is complete once the
earliest step that reads it has run, and the tape is told so then (`on_input_final`), so a
hook on a parameter of the last layers runs before the graph's first layers' backward (a
Trainer pushes that gradient while the rest of backward runs). Before the first run,
`rewrite.optimize` reorders steps where that gives the same values with less work; a
watched run (an op hook, see op_hook.py) runs the steps as traced instead, so that each
value it reports is the one its node computes.

A CachedGraph is also the operator `_CachedOp` (registered below): the node that
`autograd.get_symbol` makes for a hybridized call, which `Symbol.eval` can run again.
"""
import numpy as np

from .. import autograd, profiler
from ..base import MXNetError
from ..ndarray import registry, sample_parts
from ..ndarray.ndarray import NDArray
from ..ndarray.sparse_storage import is_sparse
from . import rewrite


class CachedGraph:
    """Compile `symbol` for inputs named `input_names` (variables), in that order."""

    def __init__(self, symbol, input_names):
        nodes = symbol._topo()
        slot = {}
        var_names = [n.name for n in nodes if n.is_var]
        missing = [v for v in var_names if v not in input_names]
        if missing:
            raise MXNetError(f"the graph uses variables {missing} that are not among the "
                             f"inputs {list(input_names)}")
        self.symbol = symbol
        self.input_names = list(input_names)
        self.num_inputs = len(self.input_names)
        for n in nodes:
            if n.is_var:
                slot[(id(n), 0)] = self.input_names.index(n.name)
        # (op, input refs, attrs, first output slot, num outputs): one per node, as traced
        self.traced_steps = []
        self.node_names = []
        next_slot = self.num_inputs
        for n in nodes:
            if n.is_var:
                continue
            refs = [("slot", slot[(id(i[0]), i[1])]) if isinstance(i, tuple) else ("lit", i)
                    for i in n.inputs]
            self.traced_steps.append((n.op, refs, n.attrs, next_slot, n.num_outputs))
            self.node_names.append(n.name)
            for k in range(n.num_outputs):
                slot[(id(n), k)] = next_slot + k
            next_slot += n.num_outputs
        self.num_slots = next_slot
        self.output_slots = [slot[(id(node), idx)] for node, idx in symbol._outputs]
        self.steps = rewrite.optimize(self.traced_steps, self.output_slots)
        self._final_at = {}     # id(steps) -> (steps, {step index: input slots})
        self._dead_after = {}   # id(steps) -> (steps, {step index: value slots})

    @property
    def num_outputs(self):
        return len(self.output_slots)

    def _forward(self, xp, raw_inputs, steps, watch=None):
        """Run `steps` on raw arrays; `watch(step index, args, outputs)` sees each step."""
        values = list(raw_inputs) + [None] * (self.num_slots - self.num_inputs)
        closures = []
        # sparse inputs: every step picks the op's sparse kernel or the storage fallback,
        # as the imperative path does; dense graphs call the ops directly
        sparse = any(is_sparse(r) for r in raw_inputs)
        dead_after = self._values_dead_after(steps)
        for index, (op, refs, attrs, first, count) in enumerate(steps):
            args = [values[v] if kind == "slot" else v for kind, v in refs]
            if profiler._running:
                out, backward = profiler.timed(op.name, "symbolic", registry.compute, op, xp,
                                               args, (), attrs)
            elif sparse:
                out, backward = registry.compute(op, xp, args, (), attrs)
            else:
                out, backward = op.fn(xp, *args, **attrs)
            if count == 1:   # ufuncs give scalars for 0-d arrays
                values[first] = out if is_sparse(out) else xp.asarray(out)
            else:
                values[first:first + count] = list(out)
            closures.append(backward)
            if watch is not None:
                watch(index, args, values[first:first + count])
            for slot in dead_after.get(index, ()):
                values[slot] = _Meta.of(values[slot])
        return values, closures

    def _values_dead_after(self, steps):
        """{step index: the value slots no later step reads}: a step's outputs that are not
        the graph's, once their last reader has run. The forward drops them (backward
        needs only their shapes; what it needs of the values the closures hold), as the
        imperative path drops an array nothing refers to: holding every intermediate to the
        end of the call kept the allocator from reusing their memory, so each step's
        output was fresh pages, faulted in (resnet18_v1 inference: about 0.3 CPU s a
        step of 16, docs/performance.md)."""
        known = self._dead_after.get(id(steps))
        if known is not None and known[0] is steps:
            return known[1]
        last = {}
        for index, (_, refs, _, first, count) in enumerate(steps):
            for slot in range(first, first + count):
                last[slot] = index
            for kind, ref in refs:
                if kind == "slot" and ref >= self.num_inputs:
                    last[ref] = index
        keep = set(self.output_slots)
        dead = {}
        for slot, index in last.items():
            if slot not in keep:
                dead.setdefault(index, []).append(slot)
        self._dead_after[id(steps)] = (steps, dead)
        return dead

    def __call__(self, inputs, watch=None):
        """Run on NDArrays (one per input name, all on one device); returns NDArrays.

        With `watch`, the steps run as traced and `watch(step index, raw args, raw
        outputs)` is called after each (op_hook.py names them)."""
        ctx = next(x.context for x in inputs if isinstance(x, NDArray))
        raw = [x._data if isinstance(x, NDArray) else x for x in inputs]
        steps = self.steps if watch is None else self.traced_steps
        with ctx.scope():
            values, closures = self._forward(ctx.xp, raw, steps, watch)
        # dense outputs take the class of the dense inputs (mx.np's or legacy)
        cls = next((type(x) for x in inputs if isinstance(x, NDArray) and
                    x.stype == "default"), NDArray)
        outputs = [registry.wrap(values[s], ctx, cls) for s in self.output_slots]
        if autograd.is_recording() and any(
                isinstance(x, NDArray) and autograd.needs_grad(x) for x in inputs):
            self._record(ctx, inputs, steps, values, closures, outputs)
        return outputs

    def _record(self, ctx, inputs, steps, values, closures, outputs):
        need = self._slots_needing_grad(
            [isinstance(x, NDArray) and autograd.needs_grad(x) for x in inputs], steps)

        def backward(*out_grads, on_input_final=None, release=False):
            return self._backward(ctx.xp, steps, values, closures, out_grads, need,
                                  on_input_final, release)
        arrays = [x if isinstance(x, NDArray) else None for x in inputs]
        node = autograd.Node("CachedGraph", backward, arrays,
                             [(o.shape, o._data.dtype, ctx) for o in outputs])
        node.reports_final = node.releases = True
        # the call as an operator, so that autograd.get_symbol can rebuild it
        node.call = (_CACHED_OP, arrays, (), {"graph": self}, None)
        for i, o in enumerate(outputs):
            o._node, o._out_index = node, i

    def _slots_needing_grad(self, input_needs, steps):
        """Per value slot: does a gradient have to reach it (it depends on a variable)?"""
        need = list(input_needs) + [False] * (self.num_slots - self.num_inputs)
        for op, refs, attrs, first, count in steps:
            if any(kind == "slot" and need[ref] for kind, ref in refs):
                need[first:first + count] = [True] * count
        return need

    def _inputs_final_at(self, steps):
        """{step index: the input slots whose earliest reader is that step}: walking the
        steps backward, such an input's gradient is complete once that step has run.
        Slots are listed in the order the step reads them (the tape's order too)."""
        known = self._final_at.get(id(steps))
        if known is not None and known[0] is steps:
            return known[1]
        first = {}
        for index, (_, refs, _, _, _) in enumerate(steps):
            for kind, ref in refs:
                if kind == "slot" and ref < self.num_inputs:
                    first.setdefault(ref, index)
        final_at = {}
        for ref, index in first.items():
            final_at.setdefault(index, []).append(ref)
        self._final_at[id(steps)] = (steps, final_at)
        return final_at

    def _backward(self, xp, steps, values, closures, out_grads, need, on_input_final=None,
                  release=False):
        """The inputs' gradients (None where none reached one). With `on_input_final(input
        position, gradient)`, each input's gradient is offered as soon as it is complete;
        one taken (True) is left out of the result (None there). With `release`, each
        step's closure and outputs are dropped once its backward has run (no second
        backward then): the steps before it never read them."""
        grads = [None] * self.num_slots
        for s, g in zip(self.output_slots, out_grads):
            grads[s] = g if grads[s] is None else grads[s] + g
        final_at = self._inputs_final_at(steps) if on_input_final is not None else {}
        for index in range(len(steps) - 1, -1, -1):
            self._step_backward(xp, steps[index], closures[index], values, grads, need)
            if release:
                # the activations a step saved are freed here, as the tape frees a node's;
                # holding all of them to the end of the walk made every gradient of the
                # walk a fresh allocation (page faults) where the tape reuses that memory
                first, count = steps[index][3], steps[index][4]
                closures[index] = None
                values[first:first + count] = [None] * count
            for ref in final_at.get(index, ()):
                if grads[ref] is not None and on_input_final(ref, grads[ref]):
                    grads[ref] = None
        return [grads[i] for i in range(self.num_inputs)]

    @staticmethod
    def _step_backward(xp, step, closure, values, grads, need):
        """Run one step's backward: its output gradients (taken from `grads`) become
        contributions added into its inputs' slots."""
        op, refs, attrs, first, count = step
        outs = grads[first:first + count]
        grads[first:first + count] = [None] * count     # free them as we go
        if closure is None or not need[first] or all(g is None for g in outs):
            return
        outs = [autograd.dense_grad(g, xp) if g is not None else
                xp.zeros(values[first + k].shape, values[first + k].dtype)
                for k, g in enumerate(outs)]
        kwargs = {"need": tuple(kind == "slot" and need[ref] for kind, ref in refs)} \
            if op.takes_need else {}
        if profiler._running:
            in_grads = profiler.timed(f"{op.name}_backward", "symbolic", closure, *outs,
                                      **kwargs)
        else:
            in_grads = closure(*outs, **kwargs)
        for (kind, ref), g in zip(refs, in_grads):
            if kind != "slot" or g is None or not need[ref]:
                continue
            g = _fit_raw(g, values[ref])
            grads[ref] = g if grads[ref] is None else _sum_grads(grads[ref], g, xp)


@registry.register("_CachedOp", inputs=(), variadic=True, takes_need=True)
def cached_op(xp, *inputs, graph=None):
    """A CachedGraph run as one operator on its inputs (MXNet's `_CachedOp` node)."""
    if not isinstance(graph, CachedGraph):
        raise MXNetError(f"_CachedOp: graph must be a CachedGraph, got {graph!r}")
    if len(inputs) != graph.num_inputs:
        raise MXNetError(f"_CachedOp: the graph takes {graph.num_inputs} inputs "
                         f"{graph.input_names}, got {len(inputs)}")
    values, closures = graph._forward(xp, inputs, graph.steps)
    outputs = tuple(values[s] for s in graph.output_slots)

    def backward(*out_grads, need):
        slot_need = graph._slots_needing_grad(need, graph.steps)
        return graph._backward(xp, graph.steps, values, closures, out_grads, slot_need)
    return (outputs if len(outputs) > 1 else outputs[0]), backward


_CACHED_OP = registry.get("_CachedOp")


class _Shape:
    __slots__ = ("shape", "_data")

    def __init__(self, arr):
        self.shape, self._data = arr.shape, arr


class _Meta:
    """What the backward walk reads of a dropped value: its shape and dtype."""
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype

    @classmethod
    def of(cls, value):
        """The value's _Meta; a value without a dtype (none expected) stays as it is."""
        return cls(value.shape, value.dtype) if hasattr(value, "dtype") else value


def _sum_grads(a, b, xp):
    """a + b of two gradients of one value: two big host arrays split over the compute
    threads (DenseNet's concatenations, each layer's map), an Embedding's row_sparse
    weight gradient kept sparse (autograd.sum_grads)."""
    if xp is np and isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return sample_parts.add(a, b)
    return autograd.sum_grads(a, b, xp)


def _fit_raw(grad, value):
    """Sum a broadcast gradient back to the shape (and dtype) of the value it is for."""
    if not hasattr(value, "shape"):
        return grad
    return autograd.fit_grad(grad, _Shape(value))
