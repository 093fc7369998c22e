"""The operator registry: every differentiable op is defined once, here or in an ops_* file.

An op is a plain function `fn(xp, *inputs, **attrs) -> (output, backward)` written against
the array module `xp` (numpy or cupy). `output` is an array or a tuple of arrays;
`backward(*output_grads)` returns one gradient per input (None where there is none), or is
None for ops without a gradient. Gradients may keep a broadcast shape: the autograd engine
sums them back to each input's shape.

`invoke` is the one bridge from NDArrays to ops: it checks devices, unwraps, runs the op on
the right device, wraps the result and records a tape node when autograd is recording.
NDArray methods, `mx.nd.*` functions and (later) symbols all go through it. The registry
sits below the array class that calls it: ndarray.py hands it that class once, at import,
with `set_array_class`.

Higher-order gradients: an op whose backward is a `Backward` (a formula written once for the
array module) can also run that formula on recorded arrays, through `TracingXp`, so that
`autograd.grad(..., create_graph=True)` records the backward pass itself.
"""
import functools
import logging

from .. import autograd, config, profiler, threads
from ..base import ContextError, DTypeError, MXNetError, numeric_types
from ..context import current_context
from . import sparse_storage

OPS = {}
_Array = None   # the array class results are wrapped in (NDArray), set by set_array_class
_sparse_classes = {}   # stype -> the class of sparse results, set by set_sparse_classes
_LOG = logging.getLogger("minigluon.ndarray")
_fallbacks_logged = set()   # operators whose storage fallback was logged (once each)
_CONTAINERS = sparse_storage.CONTAINERS


def set_array_class(cls):
    """Make `cls` the class `invoke` unwraps inputs of and wraps results in (by default)."""
    global _Array
    _Array = cls


def set_sparse_classes(classes):
    """Make `classes` (stype -> class, from mx.nd.sparse) wrap sparse results."""
    _sparse_classes.update(classes)


def wrap(raw, ctx, cls=None):
    """A raw result as an array on `ctx`: a sparse container as its stype's class, a dense
    buffer as `cls` (NDArray by default)."""
    if isinstance(raw, _CONTAINERS):
        return _sparse_classes[raw.stype](raw, ctx)
    # asarray: NumPy ufuncs turn 0-d arrays into scalars, which have no buffer to wrap
    return (cls or _Array)(ctx.xp.asarray(raw), ctx)


class OpDef:
    """How to call one op: its function, the names of its array inputs, and aliases.

    `takes_need`: the op's backward accepts `need=(bool per input)` and skips the
    gradients nobody asked for (e.g. the data gradient of a network's first layer).
    `lenient`: keyword attributes are dropped, not passed on (see `register`).
    `sparse`: the op's sparse kernel (see `register_sparse`), or None.
    """

    __slots__ = ("name", "fn", "inputs", "variadic", "cross_device", "takes_need", "lenient",
                 "sparse")

    def __init__(self, name, fn, inputs, variadic=False, cross_device=False, takes_need=False,
                 lenient=False):
        self.name, self.fn, self.inputs = name, fn, tuple(inputs)
        self.variadic, self.cross_device = variadic, cross_device
        self.takes_need, self.lenient = takes_need, lenient
        self.sparse = None


def register(name, inputs=("data",), aliases=(), variadic=False, takes_need=False,
             lenient_aliases=()):
    """Decorator: register `fn` under `name` (and `aliases`) with the given array inputs.

    `lenient_aliases` are names MXNet registers without an attribute parser (its broadcast_*
    operators): there a keyword the op does not take, such as `axis=1` in
    `nd.broadcast_maximum(a, b, axis=1)`, is silently dropped instead of refused. They run
    the same op under the same name, so graphs and tapes are the ones `name` makes.
    """
    def wrap(fn):
        op = OpDef(name, fn, inputs, variadic, takes_need=takes_need)
        lenient = OpDef(name, fn, inputs, variadic, takes_need=takes_need, lenient=True)
        for key, definition in [(k, op) for k in (name,) + tuple(aliases)] + \
                [(k, lenient) for k in lenient_aliases]:
            if key in OPS:
                raise MXNetError(f"operator {key!r} registered twice")
            OPS[key] = definition
        return fn
    return wrap


def register_sparse(name):
    """Decorator: give the registered op `name` a sparse kernel.

    The kernel is called like the op, `kernel(xp, *raw_inputs, **attrs)`, whenever an input
    is sparse (a `sparse_storage` container); it returns `(output, backward)` as the op does,
    an output may be a container, and backward gets and returns dense raw gradients. It
    returns NotImplemented for storage types it does not keep sparse, and the op then runs
    on dense copies of its inputs (the storage fallback of `invoke`).
    """
    def wrap_kernel(kernel):
        op = get(name)
        if op.sparse is not None:
            raise MXNetError(f"operator {name!r} has two sparse kernels")
        for definition in OPS.values():      # the lenient broadcast_* twins run it too
            if definition.name == name:
                definition.sparse = kernel
        return kernel
    return wrap_kernel


def get(name):
    """The OpDef registered as `name`."""
    try:
        return OPS[name]
    except KeyError:
        raise MXNetError(f"unknown operator {name!r}") from None


def split_args(op, args, kwargs):
    """Separate array inputs from attributes, accepting inputs by position or by name."""
    if op.variadic:
        return list(args), (), kwargs
    n = len(op.inputs)
    inputs = list(args[:n])
    for name in op.inputs[len(inputs):]:
        inputs.append(kwargs.pop(name, None))
    if op.lenient:
        # the call's own settings stay; attributes the op has none of are dropped
        kwargs = {k: v for k, v in kwargs.items() if k in _CALL_SETTINGS}
    return inputs, args[n:], kwargs


_CALL_SETTINGS = ("name", "ctx")


_HOST_STAGING = ("cpu_pinned", "cpu_shared")


def _common_context(op, inputs):
    """The one device all array inputs are on.

    Pinned and shared host memory (e.g. DataLoader batches with pin_memory=True) mixes with
    any cpu(i) array, as in MXNet; the result goes to the cpu(i) device.
    """
    ctx = staging = None
    for x in inputs:
        c = getattr(x, "_ctx", None)
        if c is None:
            continue
        if c.device_type in _HOST_STAGING:
            staging = staging or c
            continue
        if ctx is None:
            ctx = c
        elif c != ctx:
            raise ContextError(
                f"{op.name}: inputs are on different devices, {ctx} and {c}; move them "
                "with .as_in_context(ctx) or .copyto(ctx) first")
    if ctx is not None and staging is not None and ctx.device_type != "cpu":
        raise ContextError(f"{op.name}: inputs are on different devices, {ctx} and {staging}; "
                           "move them with .as_in_context(ctx) first")
    return ctx or staging


def invoke(op, args, kwargs, out=None):
    """Run `op` on NDArray (or scalar) arguments; returns NDArray(s)."""
    inputs, extra, attrs = split_args(op, args, kwargs)
    attrs.pop("name", None)
    ctx = _common_context(op, inputs) or attrs.pop("ctx", None) or current_context()
    raw = [x._data if isinstance(x, _Array) else x for x in inputs]
    with ctx.scope():
        try:
            if profiler._running:
                result, backward = profiler.timed(op.name, "operator", compute, op, ctx.xp,
                                                  raw, extra, attrs)
            else:
                result, backward = compute(op, ctx.xp, raw, extra, attrs)
        except MXNetError:
            raise
        except TypeError as err:
            raise MXNetError(f"{op.name}: bad arguments ({err})") from None
    multi = isinstance(result, tuple)
    cls = _result_class(inputs, base=_Array)
    outputs = [wrap(r, ctx, cls) for r in (result if multi else (result,))]
    if backward is not None and autograd.is_recording():
        _record(op, inputs, outputs, backward, extra, attrs, result)
    if out is not None:
        return _write_out(op, outputs, out)
    return outputs if multi else outputs[0]


def compute(op, xp, raw, extra, attrs):
    """Run the op on raw inputs: its sparse kernel when an input is sparse and the kernel
    takes these storage types, else the op itself, on dense copies of sparse inputs."""
    threads.compute_threads()   # every SAMPLE_S at most: holds BLAS to the free cores
    for r in raw:     # a plain loop: this runs on every call of every operator
        if isinstance(r, _CONTAINERS):
            return _compute_sparse(op, xp, raw, extra, attrs)
    return op.fn(xp, *raw, *extra, **attrs)


def _compute_sparse(op, xp, raw, extra, attrs):
    if op.sparse is not None:
        got = op.sparse(xp, *raw, *extra, **attrs)
        if got is not NotImplemented:
            return got
    return op.fn(xp, *_fall_back(op, xp, raw), *extra, **attrs)


def _fall_back(op, xp, raw):
    """Dense copies of the sparse inputs of an op without a kernel for them (MXNet's storage
    fallback); the results are dense. Logged once per operator unless
    MXNET_STORAGE_FALLBACK_LOG_VERBOSE is 0."""
    if op.name not in _fallbacks_logged and config.storage_fallback_log_verbose():
        _fallbacks_logged.add(op.name)
        stypes = [sparse_storage.stype_of(r) for r in raw if hasattr(r, "shape")]
        _LOG.warning("storage fallback: operator %s has no sparse kernel for input storage "
                     "types %s; it runs on dense copies and returns dense results (set "
                     "MXNET_STORAGE_FALLBACK_LOG_VERBOSE=0 to silence this)", op.name, stypes)
    return [sparse_storage.densify(xp, r) for r in raw]


def _result_class(inputs, base):
    """Dense results take the class of the first dense array input: mx.np.ndarray in,
    mx.np.ndarray out (sparse results take their stype's class, see `wrap`)."""
    for x in inputs:
        if isinstance(x, base) and not sparse_storage.is_sparse(x._data):
            return type(x)
    return base


def _record(op, inputs, outputs, backward, extra, attrs, result):
    arrays = [x if isinstance(x, _Array) else None for x in inputs]
    need = tuple(x is not None and autograd.needs_grad(x) for x in arrays)
    if not any(need):
        return
    traced = _traced_backward if isinstance(backward, Backward) else None
    if op.takes_need:
        backward = functools.partial(backward, need=need)
    node = autograd.Node(op.name, backward, arrays,
                         [(o.shape, o._data.dtype, o._ctx) for o in outputs], traced)
    # the call as made (get_symbol replays it) and the op's raw results (a traced
    # backward finds the outputs among its formula's arguments by identity)
    node.call = (op, inputs, extra, attrs, result)
    for i, o in enumerate(outputs):
        o._node, o._out_index = node, i


class Backward(functools.partial):
    """An op's backward written once, as `formula(xp, *args, *out_grads)`, for either module.

    Called with raw gradients it runs `formula` on the op's array module (the fast path of
    every `backward()`; a `functools.partial`, so calling it costs no extra Python frame).
    For `autograd.grad(create_graph=True)` the tape runs the same formula on recorded arrays
    instead (see `_traced_backward`): `args` that are the op's inputs or outputs become those
    arrays on the tape, every other array a constant, and `xp` becomes `TracingXp`, so the
    backward pass is itself differentiable. A formula therefore computes what depends on the
    inputs (reshapes, products) inside itself, from `args`.

    Example, for y = sin(x): ``return out, Backward(lambda xp, x, dy: (dy * xp.cos(x),), xp, x)``
    """

    __slots__ = ()


class TracingXp:
    """The array module of a traced backward: `xp.cos(x)` runs the registered op `cos` on
    arrays, recorded like any other call."""

    _NAMES = {"matmul": "dot"}   # NumPy's spelling -> the registered op

    def __getattr__(self, name):
        op = get(self._NAMES.get(name, name))
        return lambda *args, **kwargs: invoke(op, args, kwargs)

    def where(self, condition, x, y):
        """NumPy's where, scalars included (the `where` op takes two arrays)."""
        like = next(a for a in (x, y, condition) if isinstance(a, _Array))
        x, y = [a if isinstance(a, _Array) else like.zeros_like() + a for a in (x, y)]
        return invoke(get("where"), (condition, x, y), {})


_TRACING_XP = TracingXp()


def _traced_backward(node, *out_grads):
    """Run the node's `Backward` formula on the tape: the gradients are recorded arrays."""
    # a Backward, or for takes_need ops partial(Backward, need=...), which Python may have
    # flattened into one partial of the formula
    backward, kwargs = node.backward, dict(node.backward.keywords)
    if isinstance(backward.func, functools.partial):
        backward = backward.func
    result = node.call[4]
    cls, ctx = type(out_grads[0]), out_grads[0]._ctx
    swap = {id(x._data): x for x in node.inputs if x is not None}
    for i, raw in enumerate(result if isinstance(result, tuple) else (result,)):
        handle = cls(ctx.xp.asarray(raw), ctx)
        handle._node, handle._out_index = node, i
        swap[id(raw)] = handle
    args = [_on_tape(a, swap, cls, ctx) for a in backward.args[1:]]   # args[0] is xp
    return backward.func(_TRACING_XP, *args, *out_grads, **kwargs)


def _on_tape(arg, swap, cls, ctx):
    """A formula argument for the traced run: the op's input or output array on the tape, a
    constant array for any other buffer, and anything else (scalars, axes, flags) as is."""
    if id(arg) in swap:
        return swap[id(arg)]
    is_buffer = hasattr(arg, "shape") and hasattr(arg, "dtype") and not is_scalar(arg)
    return cls(arg, ctx) if is_buffer and not isinstance(arg, _Array) else arg


def _write_out(op, outputs, out):
    outs = out if isinstance(out, (list, tuple)) else [out]
    if len(outs) != len(outputs):
        raise MXNetError(f"{op.name}: got {len(outs)} out arrays for {len(outputs)} outputs")
    for dst, src in zip(outs, outputs):
        if dst.shape != src.shape:
            raise MXNetError(f"{op.name}: out has shape {dst.shape}, result has {src.shape}")
        if sparse_storage.is_sparse(dst._data) or sparse_storage.is_sparse(src._data):
            # a sparse `out` takes the result in its own storage type (as MXNet converts it)
            dst._data = _into_stype(dst, src._data)
        else:
            dst._data[...] = src._data
        dst._node, dst._out_index = src._node, src._out_index
    return out


def _into_stype(dst, raw):
    """`raw` converted to `dst`'s storage type and dtype, on `dst`'s device."""
    xp = dst._ctx.xp
    got = sparse_storage.convert(xp, raw, dst.stype)
    if got.dtype != dst._data.dtype:
        got = got.astype(dst._data.dtype)
    if not sparse_storage.is_sparse(got):
        dst._data[...] = got
        return dst._data
    return got


def is_scalar(x):
    return isinstance(x, numeric_types())


def check_same_dtype(name, *arrays):
    """Raise DTypeError unless all `arrays` share one dtype: MXNet never promotes silently."""
    dtypes = sorted({str(a.dtype) for a in arrays})
    if len(dtypes) > 1:
        shapes = ", ".join(f"{a.shape} {a.dtype}" for a in arrays)
        raise DTypeError(f"{name}: inputs have different dtypes ({shapes}); cast them to one "
                         "dtype with .astype() first")
