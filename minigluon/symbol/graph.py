"""CachedGraph: a traced Symbol compiled into a flat list of steps and run as ONE autograd
node, as MXNet's CachedOp does for hybridized blocks.

Running a step calls the same op function as the imperative path (so results are the same),
but on raw arrays: no NDArray wrappers, no per-op context checks, no per-op tape nodes.
Backward replays the steps' closures in reverse. Before the first run, `rewrite.optimize`
reorders steps where that gives the same values with less work.
"""
from .. import autograd, profiler
from ..base import MXNetError
from ..ndarray import registry
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
        self.input_names = list(input_names)
        self.num_inputs = len(self.input_names)
        for n in nodes:
            if n.is_var:
                slot[(id(n), 0)] = self.input_names.index(n.name)
        self.steps = []   # (op, input refs, attrs, first output slot, num outputs)
        next_slot = self.num_inputs
        for n in nodes:
            if n.is_var:
                continue
            refs = [("slot", slot[(id(i[0]), i[1])]) if isinstance(i, tuple) else ("lit", i)
                    for i in n.inputs]
            self.steps.append((n.op, refs, n.attrs, next_slot, n.num_outputs))
            for k in range(n.num_outputs):
                slot[(id(n), k)] = next_slot + k
            next_slot += n.num_outputs
        self.num_slots = next_slot
        self.output_slots = [slot[(id(node), idx)] for node, idx in symbol._outputs]
        self.steps = rewrite.optimize(self.steps, self.output_slots)

    def _forward(self, xp, raw_inputs):
        values = list(raw_inputs) + [None] * (self.num_slots - self.num_inputs)
        closures = []
        # sparse inputs: every step picks the op's sparse kernel or the storage fallback,
        # as the imperative path does; dense graphs call the ops directly
        sparse = any(is_sparse(r) for r in raw_inputs)
        for op, refs, attrs, first, count in self.steps:
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
        return values, closures

    def __call__(self, inputs):
        """Run on NDArrays (one per input name, all on one device); returns NDArrays."""
        ctx = next(x.context for x in inputs if isinstance(x, NDArray))
        raw = [x._data if isinstance(x, NDArray) else x for x in inputs]
        with ctx.scope():
            values, closures = self._forward(ctx.xp, raw)
        # dense outputs take the class of the dense inputs (mx.np's or legacy)
        cls = next((type(x) for x in inputs if isinstance(x, NDArray) and
                    x.stype == "default"), NDArray)
        outputs = [registry.wrap(values[s], ctx, cls) for s in self.output_slots]
        if autograd.is_recording() and any(
                isinstance(x, NDArray) and autograd.needs_grad(x) for x in inputs):
            self._record(ctx, inputs, values, closures, outputs)
        return outputs

    def _record(self, ctx, inputs, values, closures, outputs):
        need = self._slots_needing_grad(inputs)

        def backward(*out_grads):
            return self._backward(ctx, values, closures, out_grads, need)
        node = autograd.Node("CachedGraph", backward,
                             [x if isinstance(x, NDArray) else None for x in inputs],
                             [(o.shape, o._data.dtype, ctx) for o in outputs])
        for i, o in enumerate(outputs):
            o._node, o._out_index = node, i

    def _slots_needing_grad(self, inputs):
        """Per value slot: does a gradient have to reach it (it depends on a variable)?"""
        need = [isinstance(x, NDArray) and autograd.needs_grad(x) for x in inputs]
        need += [False] * (self.num_slots - self.num_inputs)
        for op, refs, attrs, first, count in self.steps:
            if any(kind == "slot" and need[ref] for kind, ref in refs):
                need[first:first + count] = [True] * count
        return need

    def _backward(self, ctx, values, closures, out_grads, need):
        grads = [None] * self.num_slots
        for s, g in zip(self.output_slots, out_grads):
            grads[s] = g if grads[s] is None else grads[s] + g
        xp = ctx.xp
        for (op, refs, attrs, first, count), closure in zip(reversed(self.steps),
                                                            reversed(closures)):
            outs = grads[first:first + count]
            grads[first:first + count] = [None] * count     # free them as we go
            if closure is None or not need[first] or all(g is None for g in outs):
                continue
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
                # an Embedding's row_sparse weight gradient stays sparse (autograd.sum_grads)
                grads[ref] = g if grads[ref] is None else autograd.sum_grads(grads[ref], g, xp)
        return [grads[i] for i in range(self.num_inputs)]


class _Shape:
    __slots__ = ("shape", "_data")

    def __init__(self, arr):
        self.shape, self._data = arr.shape, arr


def _fit_raw(grad, value):
    """Sum a broadcast gradient back to the shape (and dtype) of the value it is for."""
    if not hasattr(value, "shape"):
        return grad
    return autograd.fit_grad(grad, _Shape(value))
