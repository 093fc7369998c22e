"""Reverse-mode automatic differentiation on a tape.

While `record()` is active, every operator whose inputs need gradients appends a `Node`
(its backward closure and its inputs) to the outputs it produced. `backward()` walks those
nodes from the heads in reverse topological order and sums gradients into the variables
marked with `attach_grad()`.

autograd is the ground floor of the math: it never imports ndarray. What it records is
duck-typed: an array is anything with a raw buffer `_data`, a `context` (whose `xp` is the
array module), `shape`/`dtype`, and the tape slots `_node`, `_out_index`, `_grad`,
`_grad_req` that this module reads and writes. New arrays are built with the type of an
array at hand, so mx.nd, mx.np and any other front end record alike.

Sparse arrays (mx.nd.sparse) keep a container, not a buffer, in `_data`; gradients still
travel as dense raw buffers. Where the tape meets a caller's array it goes through three
methods every array has: `_dense_raw()` (a head gradient's buffer), `_write_dense(raw, add)`
(storing a variable's gradient, in the gradient buffer's own storage type) and
`_wrap_dense(raw)` (a gradient returned by `grad`).

One exception keeps sparse gradients sparse: an operator's backward may return a sparse
container for an input (Embedding with sparse_grad=True gives its weight a row_sparse
gradient of the rows it looked up). The tape recognizes one by its `to_dense(xp)` method,
sums two with its `plus(xp, other)`, and hands it densified to any other operator's
backward; a variable receives it as it is.
"""
import collections
import functools
import itertools
import threading

from . import profiler
from .base import AutogradError

_state = threading.local()


def _get(name, default):
    return getattr(_state, name, default)


def is_recording():
    """True inside `record()` (and not inside a nested `pause()`)."""
    return _get("recording", False)


def is_training():
    """True when layers such as Dropout and BatchNorm should act in training mode."""
    return _get("training", False)


def set_recording(is_record):
    """Set the recording flag; returns the previous value."""
    prev = is_recording()
    _state.recording = bool(is_record)
    return prev


def set_training(train_mode):
    """Set the training flag; returns the previous value."""
    prev = is_training()
    _state.training = bool(train_mode)
    return prev


class _Scope:
    """Sets recording and/or training on enter and restores both on exit."""

    def __init__(self, recording, training):
        self._want = (recording, training)
        self._prev = None

    def __enter__(self):
        recording, training = self._want
        prev_r = set_recording(recording) if recording is not None else None
        prev_t = set_training(training) if training is not None else None
        self._prev = (prev_r, prev_t)
        return self

    def __exit__(self, *exc):
        prev_r, prev_t = self._prev
        if prev_r is not None:
            set_recording(prev_r)
        if prev_t is not None:
            set_training(prev_t)


def record(train_mode=True):
    """Record operators for a later `backward()`: `with autograd.record(): y = f(x)`."""
    return _Scope(True, train_mode)


def pause(train_mode=False):
    """Stop recording inside a `record()` block, e.g. for metric computations."""
    return _Scope(False, train_mode)


def train_mode():
    """Run layers in training mode without changing whether ops are recorded."""
    return _Scope(None, True)


def predict_mode():
    """Run layers in inference mode without changing whether ops are recorded."""
    return _Scope(None, False)


_node_seq = itertools.count()


class Node:
    """One recorded operator: how to map output gradients to input gradients."""

    __slots__ = ("op_name", "backward", "inputs", "out_meta", "seq", "traced", "call",
                 "reports_final", "releases")

    def __init__(self, op_name, backward, inputs, out_meta, traced=None):
        self.seq = next(_node_seq)    # recording order: backward runs it in reverse
        self.op_name = op_name
        self.backward = backward      # f(*out_grads) -> tuple of input grads (None = no grad)
        # NDArray or None per input position; a freed result is a constant here (None)
        self.inputs = [None if x is not None and _freed(x) else x for x in inputs]
        self.out_meta = out_meta      # (shape, dtype, context) per output, to build zeros
        # f(node, *out_grads as arrays) -> input grads as recorded arrays, for
        # create_graph=True; None where the op's backward is not itself differentiable
        self.traced = traced
        self.call = None    # (op, inputs, extra args, attrs, results) as the registry ran it
        # True when backward takes on_input_final=report: a whole graph run as one node (a
        # hybridized block) hands each input's gradient on as soon as its own walk has
        # made it complete, so hooks need not wait for the end of the graph
        self.reports_final = False
        # True when backward takes release=True (given without retain_graph): a whole graph
        # run as one node drops each step's saved arrays once its walk is past that step,
        # as the tape drops a node's, so memory comes back during the walk, not after it
        self.releases = False

    def __repr__(self):
        return f"<Node {self.op_name}>"


def _is_array(x):
    """True if `x` is an array autograd can record (it has a place on the tape)."""
    return hasattr(x, "_node")


def needs_grad(array):
    """True if gradients must flow into `array` (a variable or a recorded result)."""
    node = array._node
    return (node is not None and node.backward is not None) or \
        (array._grad_req not in (None, "null"))


def _freed(array):
    """True for a result of a graph freed by a backward without retain_graph. As in MXNet,
    which clears that history, operators recorded later take it as a constant."""
    node = array._node
    return node is not None and node.backward is None


def mark_variables(variables, gradients, grad_reqs="write"):
    """Mark arrays as variables whose gradients go into the given buffers."""
    variables, gradients = _as_list(variables), _as_list(gradients)
    if isinstance(grad_reqs, str):
        grad_reqs = [grad_reqs] * len(variables)
    if not len(variables) == len(gradients) == len(grad_reqs):
        raise AutogradError(
            f"mark_variables: got {len(variables)} variables, {len(gradients)} gradients and "
            f"{len(grad_reqs)} grad_reqs; pass one of each per variable")
    for var, grad, req in zip(variables, gradients, grad_reqs):
        _check_grad_req(req)
        var._grad, var._grad_req, var._node = grad, req, None


def _check_grad_req(req):
    if req not in ("write", "add", "null"):
        raise AutogradError(f"grad_req must be 'write', 'add' or 'null', got {req!r}")


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _topological_order(heads):
    """Nodes reachable from the heads, latest recorded first.

    Reverse recording order is a valid order for backward (a node is recorded after the
    nodes that produced its inputs), and it is the order a hybridized block's CachedGraph
    uses too, so both add up gradient contributions in the same order, bit for bit.
    """
    found, stack = {}, [h._node for h in heads if h._node is not None]
    while stack:
        node = stack.pop()
        if id(node) in found:
            continue
        found[id(node)] = node
        for inp in node.inputs:
            if inp is not None and inp._node is not None and id(inp._node) not in found:
                stack.append(inp._node)
    return sorted(found.values(), key=lambda n: n.seq, reverse=True)


def _var_key(array):
    """A variable is its gradient buffer: handles that share one (an mx.np view of an
    NDArray from as_np_ndarray(), say) add their contributions into one gradient."""
    return id(array._grad) if array._grad is not None else id(array)


def _accumulate(store, key, grad, xp):
    prev = store.get(key)
    store[key] = grad if prev is None else sum_grads(prev, grad, xp)


def is_sparse_grad(grad):
    """True for a sparse container among gradients (see the module docstring)."""
    return hasattr(grad, "to_dense")


def sum_grads(a, b, xp):
    """a + b of two gradients, either of which may be a sparse container."""
    if is_sparse_grad(a):
        return a.plus(xp, b)
    if is_sparse_grad(b):
        return b.plus(xp, a)
    return a + b


def dense_grad(grad, xp):
    """`grad` as a dense raw buffer: what operators' backward functions take."""
    return grad.to_dense(xp) if is_sparse_grad(grad) else grad


def _head_grad(head, hgrad, graph):
    """The starting gradient of one head: ones, or the caller's head gradient."""
    xp = head.context.xp
    if hgrad is None:
        raw = xp.ones(head.shape, dtype=head.dtype)
    elif _is_array(hgrad) and graph is not None:
        raw = hgrad    # keep it on the tape: the head gradient may itself be recorded
    else:
        raw = hgrad._dense_raw() if _is_array(hgrad) else xp.asarray(hgrad)
    if raw.shape != head.shape:
        raise AutogradError(
            f"head_grads shape {raw.shape} does not match head shape {head.shape}")
    return raw if graph is None else graph.wrap(raw, head)


class _GraphPass:
    """A backward pass with create_graph: gradients are arrays recorded on the tape (each
    op's backward runs as recorded operators), so that a later pass differentiates them."""

    @staticmethod
    def wrap(raw, like):
        """`raw` as an array of `like`'s type (arrays pass unchanged)."""
        return raw if _is_array(raw) else type(like)(raw, like.context)

    def run(self, node, *outs):
        if node.traced is not None:
            return _keep_on_tape(node, outs, node.traced(node, *outs))
        return self._untraced(node, outs)

    def _untraced(self, node, outs):
        """Run a backward that cannot be recorded; its results refuse a further gradient."""
        with pause():
            raw = node.backward(*[o._data for o in outs])
        raw = [dense_grad(g, inp.context.xp) if inp is not None else g
               for inp, g in zip(node.inputs, raw)]
        grads = [None if g is None or inp is None else type(inp)(g, inp.context)
                 for inp, g in zip(node.inputs, raw)]
        sources = [x for x in list(outs) + list(node.inputs) if x is not None and needs_grad(x)]
        if sources:
            refuse = Node(f"_backward_{node.op_name}", _no_higher_order(node.op_name), sources,
                          [(g.shape, g._data.dtype, g.context) for g in grads if g is not None])
            for i, g in enumerate(x for x in grads if x is not None):
                g._node, g._out_index = refuse, i
        return grads


def _keep_on_tape(node, outs, grads):
    """Put gradients that came out constant (relu's dy * (x > 0), radians' dy * c) on the tape
    as functions of the node's inputs, with zero derivative: differentiating them again
    gives zeros, as it does in MXNet, instead of a 'not recorded' error."""
    sources = [x for x in list(outs) + list(node.inputs) if x is not None and needs_grad(x)]
    loose = [i for i, g in enumerate(grads) if g is not None and not needs_grad(g)]
    if not (sources and loose):
        return grads
    grads = list(grads)
    zero = Node(f"_backward_{node.op_name}", lambda *g: (None,) * len(sources), sources,
                [(grads[i].shape, grads[i]._data.dtype, grads[i].context) for i in loose],
                lambda n, *g: (None,) * len(sources))
    for k, i in enumerate(loose):
        # a fresh handle: the constant may be the caller's own array (a head gradient)
        grads[i] = type(grads[i])(grads[i]._data, grads[i].context)
        grads[i]._node, grads[i]._out_index = zero, k
    return grads


def _freed_error(node):
    return AutogradError(
        f"the graph through {node.op_name} was already freed by an earlier backward; "
        "pass retain_graph=True to the first backward to run it again")


def _no_higher_order(op_name):
    def backward(*out_grads):
        raise AutogradError(
            f"operator {op_name} has no higher-order gradient in minigluon: its backward "
            "cannot be differentiated again; leave it out of the graph you pass to "
            "autograd.grad(create_graph=True), or compute that derivative by finite "
            "differences")
    return backward


def _is_variable(array):
    """True for a leaf that receives a gradient (marked with attach_grad)."""
    return array._node is None and array._grad_req not in (None, "null")


def _pending_sends(order):
    """{variable key: how many (node, input) pairs of `order` still send it a gradient}.
    A variable's gradient is final once every one of them has run."""
    pending = {}
    for node in order:
        for inp in node.inputs:
            if inp is not None and _is_variable(inp):
                key = _var_key(inp)
                pending[key] = pending.get(key, 0) + 1
    return pending


class _Finisher:
    """Hands each variable's summed gradient to `on_final(var, grad)` as soon as the last
    node that contributes to it has run (so a hook can use it while backward goes on)."""

    def __init__(self, order, var_grads, on_final):
        self.pending = _pending_sends(order)
        self.var_grads, self.on_final = var_grads, on_final

    def ready(self):
        """Give out what the heads alone made final (a head that is itself a variable)."""
        for key in [k for k in self.var_grads if not self.pending.get(k)]:
            self._give(key)

    def ran(self, node, done=()):
        """`node` has sent its gradients: its variables have one sender less (those at
        the positions `done` were counted when the node reported them early)."""
        for pos, inp in enumerate(node.inputs):
            if inp is not None and _is_variable(inp) and pos not in done:
                self.sent(inp)

    def sent(self, var):
        """One node has sent `var` its gradient (or had none for it)."""
        key = _var_key(var)
        self.pending[key] -= 1
        if self.pending[key] == 0:
            self._give(key)

    def _give(self, key):
        entry = self.var_grads.pop(key, None)     # None: every sender gave no gradient
        if entry is not None:
            self.on_final(*entry)


class _EarlyReports:
    """The `on_input_final` of one node that reports inputs' gradients before its backward
    returns: a variable's gradient is sent at once and its sender counted, so the
    Finisher can run its hooks while the node's backward goes on."""

    def __init__(self, node, send, finisher):
        self.node, self.send, self.finisher = node, send, finisher
        keys = [_var_key(x) if x is not None and _is_variable(x) else None
                for x in node.inputs]
        # a variable at two positions of the node is summed in position order at the end,
        # as it is without hooks (a changed order of float additions changes bits)
        counts = collections.Counter(keys)
        self.once = {k for k in keys if k is not None and counts[k] == 1}
        self.keys, self.done = keys, set()

    def __call__(self, pos, grad):
        """Take input `pos`'s complete gradient; False leaves it in the node's result."""
        inp = self.node.inputs[pos]
        if self.keys[pos] not in self.once or grad is None:
            return False
        self.send(inp, fit_grad(grad, inp))
        self.done.add(pos)
        self.finisher.sent(inp)
        return True


def _run_backward(heads, head_grads, retain_graph, create_graph=False, on_final=None):
    """Propagate from the heads; returns {key: (var, grad)} for reached variables.

    Gradients are raw buffers, or recorded arrays when `create_graph` is set. With
    `on_final(var, grad)`, each variable's gradient goes there as soon as it is final
    instead (in the order the variables become final) and is left out of the result.
    """
    node_grads, var_grads = {}, {}
    graph = _GraphPass() if create_graph else None

    def send(array, grad):
        xp = array.context.xp
        if array._node is not None:
            _accumulate(node_grads, (id(array._node), array._out_index), grad, xp)
        elif array._grad_req not in (None, "null"):
            prev = var_grads.get(_var_key(array))
            var_grads[_var_key(array)] = \
                (array, grad if prev is None else sum_grads(prev[1], grad, xp))

    for head, hgrad in zip(heads, head_grads):
        if _freed(head):
            raise _freed_error(head._node)
        if not needs_grad(head):
            raise AutogradError(
                "cannot differentiate: the head array was not computed inside "
                "autograd.record() from an array with attach_grad(); record the forward "
                "pass with `with autograd.record():`")
        send(head, _head_grad(head, hgrad, graph))

    order = _topological_order(heads)
    for node in order:
        if node.backward is None:
            raise _freed_error(node)
    finisher = None if on_final is None else _Finisher(order, var_grads, on_final)
    if finisher is not None:
        finisher.ready()
    for node in order:
        early = None
        outs = [node_grads.pop((id(node), i), None) for i in range(len(node.out_meta))]
        if any(g is not None for g in outs):
            outs = [dense_grad(g, meta[2].xp) if g is not None
                    else _zeros(meta, graph, heads[0]) for g, meta in zip(outs, node.out_meta)]
            run = node.backward if graph is None else functools.partial(graph.run, node)
            if finisher is not None and graph is None and node.reports_final:
                early = _EarlyReports(node, send, finisher)
                run = functools.partial(node.backward, on_input_final=early)
            if graph is None and node.releases and not retain_graph:
                run = functools.partial(run, release=True)
            if profiler._running and node.op_name != "CachedGraph":  # a graph times its steps
                in_grads = profiler.timed(f"{node.op_name}_backward", "backward", run, *outs)
            else:
                in_grads = run(*outs)
            for inp, grad in zip(node.inputs, in_grads):
                if inp is not None and grad is not None and needs_grad(inp):
                    send(inp, fit_grad(grad if graph is None else graph.wrap(grad, inp), inp))
            if not retain_graph:
                node.backward = node.traced = None
        if finisher is not None:
            finisher.ran(node, early.done if early is not None else ())
    return var_grads


def _zeros(meta, graph, like):
    shape, dtype, ctx = meta
    raw = ctx.xp.zeros(shape, dtype=dtype)
    return raw if graph is None else graph.wrap(raw, like)


def fit_grad(grad, array):
    """Sum the raw gradient `grad` (which may keep a broadcast shape) back to the shape and
    dtype of `array`, the input it belongs to; `array` needs only `shape` and `_data.dtype`.

    Ops return broadcast gradients; the tape and a hybridized graph's replay both fit them
    here, so their sums agree bit for bit.
    """
    # written with methods raw buffers and recorded arrays share, for create_graph passes
    shape = array.shape
    if grad.shape != shape:
        extra = len(grad.shape) - len(shape)
        if extra > 0:
            grad = grad.sum(axis=tuple(range(extra)))
        axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
        if axes:
            grad = grad.sum(axis=axes, keepdims=True)
        grad = grad.reshape(shape)
    if grad.dtype != array._data.dtype:
        grad = grad.astype(array._data.dtype)
    return grad


def backward(heads, head_grads=None, retain_graph=False, train_mode=True):
    """Compute gradients of `heads` and store them in each variable's `.grad`.

    `grad_req='write'` overwrites the gradient, `'add'` accumulates into it.
    """
    heads = _as_list(heads)
    head_grads = [None] * len(heads) if head_grads is None else _as_list(head_grads)
    if len(head_grads) != len(heads):
        raise AutogradError(f"got {len(heads)} heads but {len(head_grads)} head_grads")
    # with hooks somewhere, each gradient is stored as soon as it is final (for them);
    # without, all are stored after the pass, which spares the counting
    on_final = functools.partial(_store_grad, retain_graph) if HookHandle.live else None
    with _Scope(False, train_mode):
        left = _run_backward(heads, head_grads, retain_graph, on_final=on_final)
    for var, grad in left.values():
        _store_grad(retain_graph, var, grad)


def _store_grad(retain_graph, var, grad):
    """Write a variable's final gradient, then run its post-accumulate hooks."""
    if var._grad is None:
        return
    var._grad._write_dense(grad, add=var._grad_req == "add")
    var._fresh_grad = True
    hooks = getattr(var, "_grad_hooks", None)
    if hooks:
        _state.retaining = retain_graph
        try:
            for hook in list(hooks.values()):
                hook(var)
        finally:
            _state.retaining = False


def is_retaining_graph():
    """True inside a post-accumulate-grad hook run by `backward(retain_graph=True)`: the
    graph stays, so another backward may still change the gradient before it is used."""
    return _get("retaining", False)


class HookHandle:
    """What `register_post_accumulate_grad_hook` returns; `remove()` unregisters."""

    _ids = itertools.count()
    live = 0        # hooks registered and not removed, in this process

    def __init__(self, hooks):
        self._hooks, self.id = hooks, next(self._ids)
        HookHandle.live += 1

    def remove(self):
        """Unregister the hook (a second call does nothing)."""
        if self._hooks.pop(self.id, None) is not None:
            HookHandle.live -= 1


def register_post_accumulate_grad_hook(variable, hook):
    """Call `hook(variable)` in every `backward()` as soon as `variable`'s gradient is
    final: written into `variable.grad` (added to it for grad_req='add') after the last
    recorded operator that contributes to it ran, while backward goes on with the rest of
    the graph. PyTorch's name and shape; Gluon's Trainer pushes gradients from it. A
    variable no gradient reached in a pass gets no call; `autograd.grad` calls no hooks.
    Returns a handle whose `remove()` unregisters the hook::

        w.attach_grad()
        handle = autograd.register_post_accumulate_grad_hook(w, lambda v: print(v.grad))
    """
    if not _is_array(variable) or not _is_variable(variable):
        raise AutogradError(
            "register_post_accumulate_grad_hook: the array is not a variable; call "
            "attach_grad() on it first (hooks run when a variable's gradient is written)")
    if not callable(hook):
        raise AutogradError(f"register_post_accumulate_grad_hook: hook must be callable, "
                            f"got {type(hook).__name__}")
    if getattr(variable, "_grad_hooks", None) is None:
        variable._grad_hooks = {}
    handle = HookHandle(variable._grad_hooks)
    variable._grad_hooks[handle.id] = hook
    return handle


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False,
         train_mode=True):
    """Return the gradients of `heads` with respect to `variables` (no `.grad` is touched),
    as a list, one per variable, even for a single variable (as MXNet 1.x returns them).

    `create_graph=True` records the backward pass itself, so the returned gradients can be
    differentiated again (higher-order gradients); `retain_graph` then defaults to True::

        with autograd.record():
            y = nd.sin(x)
            dy_dx = autograd.grad(y, x, create_graph=True)[0]  # cos(x), on the tape
        dy_dx.backward()                                        # x.grad = -sin(x)
    """
    variables, heads = _as_list(variables), _as_list(heads)
    if not variables:
        raise AutogradError("autograd.grad: variables is an empty list; pass the arrays to "
                            "differentiate with respect to")
    head_grads = [None] * len(heads) if head_grads is None else _as_list(head_grads)
    if len(head_grads) != len(heads):
        raise AutogradError(f"got {len(heads)} heads but {len(head_grads)} head_grads")
    for v in variables:
        if v._node is None and v._grad_req in (None, "null"):
            raise AutogradError("autograd.grad: every variable needs attach_grad() before "
                                "the forward pass that uses it")
    retain = create_graph if retain_graph is None else retain_graph
    with _Scope(bool(create_graph), train_mode):
        var_grads = _run_backward(heads, head_grads, retain, create_graph)
    out = []
    for v in variables:
        entry = var_grads.get(_var_key(v))
        raw = entry[1] if entry else v.context.xp.zeros(v.shape, dtype=v.dtype)
        out.append(raw if _is_array(raw) else v._wrap_dense(dense_grad(raw, v.context.xp)))
    return out


_symbol_builder = None   # set by minigluon.symbol at import: array -> Symbol


def set_symbol_builder(builder):
    """Let `get_symbol` build Symbols with `builder(array)` (minigluon.symbol calls this)."""
    global _symbol_builder
    _symbol_builder = builder


def get_symbol(x):
    """The recorded computation that produced `x`, as a Symbol.

    Arrays marked with `attach_grad()` become variables `var0`, `var1`, ...; other arrays
    the graph read become variables `null0`, ... (as in MXNet)::

        with autograd.record():
            y = x * x + 2 * x - 1
        autograd.get_symbol(y).list_arguments()     # ['var0']
    """
    if _symbol_builder is None:
        raise AutogradError("autograd.get_symbol needs minigluon.symbol; import minigluon "
                            "(or minigluon.symbol) first")
    if not _is_array(x) or x._node is None:
        raise AutogradError("autograd.get_symbol: the array was not computed inside "
                            "autograd.record() from an array with attach_grad()")
    return _symbol_builder(x)


class Function:
    """A custom differentiable operation written with NDArrays.

    Subclass it and define `forward(self, *inputs)` and `backward(self, *output_grads)`;
    keep what backward needs with `self.save_for_backward(...)`::

        class Sigmoid(autograd.Function):
            def forward(self, x):
                y = 1 / (1 + nd.exp(-x))
                self.save_for_backward(y)
                return y
            def backward(self, dy):
                y, = self.saved_tensors
                return dy * y * (1 - y)
    """

    def __init__(self):
        self.saved_tensors = ()

    def save_for_backward(self, *args):
        self.saved_tensors = args

    def __call__(self, *inputs):
        with pause(train_mode=is_training()):
            outputs = self.forward(*inputs)
        single = _is_array(outputs)
        outputs = [outputs] if single else list(outputs)
        if is_recording() and any(_is_array(x) and needs_grad(x) for x in inputs):
            self._attach(inputs, outputs)
        return outputs[0] if single else outputs

    def _attach(self, inputs, outputs):
        # backward() sees legacy NDArrays (as in MXNet 1.x) whatever the outputs' flavour:
        # as_nd_ndarray() gives that type, detach() a handle outside the graph
        fresh = [o.as_nd_ndarray().detach() for o in outputs]

        def backward_fn(*out_grads):
            with pause():
                grads = self.backward(*[type(f)(g, f.context) for g, f in zip(out_grads, fresh)])
            grads = [grads] if _is_array(grads) else list(grads)
            if len(grads) != len(inputs):
                raise AutogradError(f"{type(self).__name__}.backward returned {len(grads)} "
                                    f"gradients for {len(inputs)} inputs")
            return tuple(g._data if _is_array(g) else None for g in grads)

        node = Node(type(self).__name__, backward_fn,
                    [x if _is_array(x) else None for x in inputs],
                    [(o.shape, o._data.dtype, o.context) for o in outputs])
        for i, o in enumerate(outputs):
            o._node, o._out_index = node, i
