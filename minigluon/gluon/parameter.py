"""Parameter: a named weight that lives on one or more devices, and ParameterDict.

A Parameter keeps one copy of its value per context (data parallelism) and one gradient
buffer per copy. Its shape may be partly unknown (0 entries) until the first forward pass
tells the layer the input size: initialization is then deferred to that moment.

`assign_loaded` puts saved values into parameters; Block.load_parameters,
ParameterDict.load and SymbolBlock.imports all load through it.
"""
from collections import OrderedDict
import re

import numpy as np

from .. import autograd, initializer
from ..base import MXNetError, ShapeError
from ..context import Context, cpu, current_context
from ..ndarray import NDArray, zeros
from .. import ndarray as nd
from ..numpy.mode import in_array_mode, is_np_array


class DeferredInitializationError(MXNetError, RuntimeError):
    """A parameter's value was requested before its deferred initialization happened."""


def _ctx_list(ctx):
    if ctx is None:
        return [current_context()]
    if isinstance(ctx, Context):
        return [ctx]
    ctx = list(ctx)
    if not ctx or not all(isinstance(c, Context) for c in ctx):
        raise MXNetError(f"ctx must be a Context or a non-empty list of them, got {ctx!r}")
    return ctx


def _in_mode(array):
    """A dense array as the type of the current mode (mx.np after npx.set_np()); sparse
    arrays exist only as mx.nd's."""
    return array if array.stype != "default" else in_array_mode(array)


def _shape_known(shape):
    return shape is not None and all(s > 0 for s in shape)


class StorageTypeError(MXNetError, AssertionError):
    """An unknown storage type; an AssertionError too, as MXNet asserts it."""


class RowIdTypeError(MXNetError, TypeError):
    """row_sparse_data was given row ids that are not an NDArray."""


_STYPES = ("default", "row_sparse", "csr")


def _check_stype(name, what, stype):
    if stype not in _STYPES:
        raise StorageTypeError(f"Parameter {name!r}: {what} must be one of {list(_STYPES)}, "
                               f"got {stype!r}")
    return stype


class Parameter:
    """A weight of a Block: `Parameter('weight', shape=(10, 0), init='xavier')`.

    Entries of 0 in `shape` are unknown until the first forward pass (deferred init).
    """

    def __init__(self, name, grad_req="write", shape=None, dtype=np.float32, lr_mult=1.0,
                 wd_mult=1.0, init=None, allow_deferred_init=False, differentiable=True,
                 stype="default", grad_stype="default"):
        self.name = name
        self._shape = None if shape is None else \
            ((shape,) if isinstance(shape, int) else tuple(shape))
        self.dtype = np.dtype(dtype).type
        self.lr_mult, self.wd_mult = lr_mult, wd_mult
        self.init = init
        self.allow_deferred_init = allow_deferred_init
        self._differentiable = differentiable
        self._grad_req = grad_req if differentiable else "null"
        self._data = None          # list of NDArray, one per context
        self._grad = None
        self._ctx_list = None
        self._deferred_init = ()   # (init, ctx_list, default_init, data) while waiting
        self._when_ready = []      # callables(param) run once its deferred init finished
        self._var = None
        self.stype = _check_stype(name, "stype", stype)
        self.grad_stype = _check_stype(name, "grad_stype", grad_stype)
        self._trainer = None       # the Trainer updating this parameter (_set_trainer)
        self._pending_pull = None  # the new value on its way from a dist kvstore (overlap)

    def __repr__(self):
        stypes = "".join(f", {what}={value}" for what, value in
                         (("stype", self.stype), ("grad_stype", self.grad_stype))
                         if value != "default")
        return (f"Parameter {self.name} (shape={self.shape}, "
                f"dtype={np.dtype(self.dtype).name}{stypes})")

    # ---- attributes -----------------------------------------------------------------
    @property
    def shape(self):
        return self._shape

    @shape.setter
    def shape(self, new_shape):
        new_shape = tuple(new_shape)
        if self._shape is not None:
            ok = len(self._shape) == len(new_shape) and all(
                a == b or a == 0 for a, b in zip(self._shape, new_shape))
            if not ok:
                raise ShapeError(f"Parameter {self.name!r}: cannot change shape from "
                                 f"{self._shape} to {new_shape} (only unknown 0 entries can "
                                 "be filled in)")
        self._shape = new_shape

    @property
    def grad_req(self):
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req):
        if req not in ("write", "add", "null"):
            raise MXNetError(f"grad_req must be 'write', 'add' or 'null', got {req!r}")
        if not self._differentiable:
            req = "null"
        if self._grad_req == req:
            return
        self._grad_req = req
        if req == "null":
            self._grad = None
            if self._data is not None:
                self._data = [d.detach() for d in self._data]
        elif self._data is not None:
            self._init_grad()

    def _set_trainer(self, trainer):
        """Remember the Trainer that updates this parameter (None forgets it); a
        row_sparse weight is read through its Trainer's kvstore, so it may have only one."""
        if self.stype != "default" and trainer is not None and \
                self._trainer is not None and self._trainer is not trainer:
            raise MXNetError(f"Parameter {self.name!r} (stype {self.stype!r}) already has a "
                             "Trainer; a sparse parameter can be updated by one Trainer only. "
                             "Call _set_trainer(None) to detach it first")
        self._trainer = trainer

    # ---- initialization ---------------------------------------------------------------
    def initialize(self, init=None, ctx=None, default_init=initializer.Uniform(),
                   force_reinit=False):
        """Create the value on each context of `ctx`, using `init`, else this parameter's
        own init, else `default_init`. Deferred when the shape is not known yet."""
        if self._data is not None and not force_reinit:
            return
        self._data = self._grad = None
        ctx = _ctx_list(ctx)
        if init is None:
            init = default_init if self.init is None else self.init
        if not _shape_known(self._shape):
            if self.allow_deferred_init:
                self._deferred_init = (init, ctx, default_init, None)
                return
            raise MXNetError(f"cannot initialize Parameter {self.name!r}: its shape "
                             f"{self._shape} is not fully known; give the layer its input "
                             "size (e.g. in_units / in_channels) or run a forward pass")
        self._deferred_init = (init, ctx, default_init, None)
        self._finish_deferred_init()

    def _finish_deferred_init(self):
        if not self._deferred_init:
            return
        init, ctx, default_init, data = self._deferred_init
        if not _shape_known(self._shape):
            raise DeferredInitializationError(
                f"Parameter {self.name!r} still has unknown shape {self._shape}; the layer "
                "could not infer it from its input")
        self._deferred_init = ()
        with autograd.pause():
            if data is None:
                self._check_array_mode("stype", self.stype)
                data = zeros(self._shape, ctx=cpu(), dtype=self.dtype, stype=self.stype)
                desc = initializer.InitDesc(self.name, {"__init__": init})
                initializer.create(default_init)(desc, data)
            self._init_impl(data, ctx)
        hooks, self._when_ready = self._when_ready, []
        for hook in hooks:
            hook(self)

    def _init_impl(self, data, ctx_list):
        self._ctx_list = list(ctx_list)
        if data.stype != self.stype:        # a dense file loaded into a sparse parameter
            data = data.tostype(self.stype)
        # every context gets its own buffer holding the same value; mx.np arrays after
        # npx.set_np() (as in MXNet, the mode at initialization decides what data() returns)
        self._data = [_in_mode(data.copyto(c)) for c in self._ctx_list]
        self._init_grad()

    def _init_grad(self):
        if self._grad_req == "null":
            self._grad = None
            return
        self._check_array_mode("grad_stype", self.grad_stype)
        self._grad = [_in_mode(zeros(d.shape, ctx=d.context, dtype=d.dtype,
                                     stype=self.grad_stype)) for d in self._data]
        autograd.mark_variables(self._data, self._grad, self._grad_req)

    def _check_array_mode(self, what, stype):
        """mx.np arrays are dense: a sparse parameter cannot live in NumPy mode."""
        if stype != "default" and is_np_array():
            raise StorageTypeError(
                f"Parameter {self.name!r}: {what} {stype!r} is not available after "
                "npx.set_np() (mx.np arrays are dense); use stype='default' or leave "
                "NumPy mode (npx.reset_np())")

    def _check_initialized(self, ctx=None):
        if self._data is not None:
            if ctx is None:
                return
            if ctx in self._ctx_list:
                return
            raise MXNetError(
                f"Parameter {self.name!r} was not initialized on {ctx}; it lives on "
                f"{self._ctx_list}. Move the input there, or initialize/reset_ctx the "
                "parameters on every context you use")
        if self._deferred_init:
            raise DeferredInitializationError(
                f"Parameter {self.name!r} has not been initialized yet: its initialization "
                "was deferred until its shape is known from the first forward pass")
        raise MXNetError(
            f"Parameter {self.name!r} has not been initialized; call "
            "net.initialize() (or net.collect_params().initialize()) before using it, and "
            "create the Trainer from net.collect_params()")

    # ---- access -----------------------------------------------------------------------
    def _pull_later(self, pending):
        """The Trainer's step started pulling the new value (`pending`, a PendingPull of
        the kvstore): it reaches the devices when the value is next read."""
        self._wait_pull()
        self._pending_pull = pending

    def _wait_pull(self):
        """Wait for the value a step pulls (overlap.py), so that every read sees it."""
        pending, self._pending_pull = self._pending_pull, None
        if pending is not None:
            pending.wait()

    def _pick(self, arrays, ctx, what):
        if ctx is None:
            if len(self._ctx_list) == 1:
                return arrays[0]
            ctx = current_context()
        self._check_initialized(ctx)
        return arrays[self._ctx_list.index(ctx)]

    def data(self, ctx=None):
        """The value on `ctx` (the only context, or the current one, when None).
        A row_sparse parameter is read with `row_sparse_data` instead."""
        self._check_dense("data", "row_sparse_data(row_id)")
        self._check_initialized()
        if self._pending_pull is not None:
            self._wait_pull()
        return self._pick(self._data, ctx, "data")

    def list_data(self):
        """The values on every context, in list_ctx() order."""
        self._check_dense("list_data", "list_row_sparse_data(row_id)")
        self._check_initialized()
        if self._pending_pull is not None:
            self._wait_pull()
        return list(self._data)

    def _check_dense(self, what, instead):
        if self.stype != "default":
            raise MXNetError(
                f"Parameter {self.name!r} has stype {self.stype!r}: {what}() would give the "
                f"local copy, which the Trainer does not keep up to date; use {instead} to "
                "pull the rows you need from the Trainer's kvstore")

    def row_sparse_data(self, row_id):
        """The value on row_id's context, holding the rows `row_id` (an NDArray of row ids)
        pulled from the Trainer's kvstore (only for stype 'row_sparse').

        >>> w = gluon.Parameter('w', shape=(10, 4), stype='row_sparse')
        >>> w.initialize(); trainer = gluon.Trainer([w], 'sgd')
        >>> w.row_sparse_data(mx.nd.array([1, 3])).indices     # rows 1 and 3
        """
        self._check_row_sparse("row_sparse_data", "data()")
        self._check_row_id(row_id)
        self._check_initialized()
        return self._pull_rows(self._pick(self._data, row_id.context, "data"), row_id)

    def list_row_sparse_data(self, row_id):
        """The values on every context (list_ctx() order), each holding the rows `row_id`
        pulled from the Trainer's kvstore (only for stype 'row_sparse')."""
        self._check_row_sparse("list_row_sparse_data", "list_data()")
        self._check_row_id(row_id)
        self._check_initialized()
        return self._pull_rows(list(self._data), row_id)

    def _check_row_sparse(self, what, instead):
        if self.stype != "row_sparse":
            raise MXNetError(f"Parameter {self.name!r} has stype {self.stype!r}: {what}() is "
                             f"only for row_sparse parameters; use {instead} instead")

    def _check_row_id(self, row_id):
        if not isinstance(row_id, NDArray):
            raise RowIdTypeError(f"Parameter {self.name!r}: row_id must be an NDArray of row "
                                 f"ids, got {type(row_id).__name__}; e.g. mx.nd.array([0, 3])")

    def _pull_rows(self, out, row_id):
        """Fill `out` (one array or a list) with the rows `row_id` from the Trainer."""
        if self._trainer is None:
            raise MXNetError(
                f"cannot read row_sparse Parameter {self.name!r}: its current rows live in "
                "the kvstore of a Trainer, and none has been created with it; create one "
                "first, e.g. gluon.Trainer(net.collect_params(), 'sgd')")
        self._trainer._row_sparse_pull(self, out, row_id)
        return out

    def grad(self, ctx=None):
        """The gradient buffer on `ctx`."""
        self._check_initialized()
        if self._grad is None:
            raise MXNetError(f"Parameter {self.name!r} has no gradient because its grad_req "
                             "is 'null'")
        return self._pick(self._grad, ctx, "grad")

    def list_grad(self):
        """The gradient buffers on every context."""
        self._check_initialized()
        if self._grad is None:
            raise MXNetError(f"Parameter {self.name!r} has no gradient because its grad_req "
                             "is 'null'")
        return list(self._grad)

    def list_ctx(self):
        """The contexts this parameter lives on."""
        if self._data is None:
            if self._deferred_init:
                return list(self._deferred_init[1])
            raise MXNetError(f"Parameter {self.name!r} has not been initialized")
        return list(self._ctx_list)

    def set_data(self, data):
        """Set the value on every context (keeps the copies identical)."""
        self.shape = data.shape
        if self._data is None:
            if not self._deferred_init:
                raise MXNetError(f"Parameter {self.name!r} has not been initialized")
            init, ctx, default_init, _ = self._deferred_init
            self._deferred_init = (init, ctx, default_init, data)
            return
        self._wait_pull()                   # its value must not land on the new one
        if self._trainer is not None:       # a store holding the old weights must forget them
            self._trainer._on_param_loaded(self)
        for arr in self._data:
            if not isinstance(data, NDArray):
                arr[:] = data
            elif "default" == data.stype == arr.stype:
                arr[:] = data.as_in_context(arr.context)
            else:
                data.copyto(arr)             # converted into arr's own storage type

    def zero_grad(self):
        """Set every gradient buffer to 0 (a sparse one then stores nothing)."""
        for g in self._grad or []:
            if g.stype == "default":
                g[:] = 0
            else:
                nd.zeros(g.shape, ctx=g.context, dtype=g.dtype, stype=g.stype).copyto(g)

    def reset_ctx(self, ctx):
        """Move the parameter to other contexts, keeping its value."""
        ctx = _ctx_list(ctx)
        if self._data is not None:
            with autograd.pause():
                self._init_impl(self._reduce(), ctx)   # _reduce waits for a pending pull
        elif self._deferred_init:
            init, _, default_init, data = self._deferred_init
            self._deferred_init = (init, ctx, default_init, data)
        else:
            raise MXNetError(f"cannot reset_ctx of uninitialized Parameter {self.name!r}")

    def cast(self, dtype):
        """Change the dtype of the value and gradient on every context."""
        self.dtype = np.dtype(dtype).type
        if self._data is None:
            return
        self._wait_pull()
        with autograd.pause():
            self._data = [d.astype(dtype) for d in self._data]
            self._init_grad()

    def var(self):
        """The symbol variable that stands for this parameter while tracing."""
        if self._var is None:
            from .. import symbol
            self._var = symbol.var(self.name, shape=self.shape, dtype=self.dtype,
                                   lr_mult=self.lr_mult, wd_mult=self.wd_mult, init=self.init,
                                   stype=None if self.stype == "default" else self.stype)
        return self._var

    def _reduce(self):
        """The value gathered on cpu(0), for saving. A row_sparse parameter with a Trainer
        takes every row from its kvstore, which holds the current weights."""
        self._check_initialized()
        self._wait_pull()
        if self.stype == "default" or self._trainer is None:
            return self._data[0].copyto(cpu())
        out = zeros(self.shape, ctx=cpu(), dtype=self.dtype, stype=self.stype)
        all_rows = nd.arange(0, self.shape[0], ctx=cpu(), dtype="int64")
        self._trainer._row_sparse_pull(self, out, all_rows, full_idx=True)
        return out


class Constant(Parameter):
    """A parameter that never changes (grad_req 'null'), initialized to `value`."""

    def __init__(self, name, value):
        value = value if isinstance(value, NDArray) else nd.array(value)
        self.value = value

        class _Init(initializer.Initializer):
            def _init_weight(self, _, arr):
                arr[:] = value.as_in_context(arr.context)

            _init_default = _init_weight
        super().__init__(name, grad_req="null", shape=value.shape, dtype=value.dtype,
                         init=_Init())


class ParameterDict:
    """An ordered mapping of names to Parameters, with a shared name prefix."""

    def __init__(self, prefix="", shared=None):
        self._prefix = prefix
        self._params = OrderedDict()
        self._shared = shared

    @property
    def prefix(self):
        return self._prefix

    def __getitem__(self, key):
        return self._params[key]

    def __contains__(self, key):
        return key in self._params

    def __iter__(self):
        return iter(self._params)

    def __len__(self):
        return len(self._params)

    def keys(self):
        return self._params.keys()

    def values(self):
        return self._params.values()

    def items(self):
        return self._params.items()

    def __repr__(self):
        body = "\n".join(f"  {p!r}" for p in self._params.values())
        return f"{self._prefix} (\n{body}\n)"

    def _get_impl(self, name):
        if name in self._params:
            return self._params[name]
        if self._shared is not None and name in self._shared._params:
            self._params[name] = self._shared._params[name]
            return self._params[name]
        return None

    def get(self, name, **kwargs):
        """The parameter `prefix + name`, created with `kwargs` if it does not exist yet."""
        name = self._prefix + name
        param = self._get_impl(name)
        if param is None:
            param = Parameter(name, **kwargs)
            self._params[name] = param
            return param
        for key, value in kwargs.items():
            self._merge_attr(param, key, value)
        return param

    @staticmethod
    def _merge_attr(param, key, value):
        if key == "shape" and value is not None:
            if param.shape is None:
                param.shape = value
            else:
                merged = tuple(b if a == 0 else a for a, b in zip(param.shape, value))
                param.shape = merged
            return
        existing = getattr(param, key, None)
        if value is not None and existing is None:
            setattr(param, key, value)

    def get_constant(self, name, value=None):
        """The constant `prefix + name`, created from `value` if new."""
        name = self._prefix + name
        param = self._get_impl(name)
        if param is None:
            if value is None:
                raise MXNetError(f"no constant named {name!r}; give its value")
            param = Constant(name, value)
            self._params[name] = param
        return param

    def update(self, other):
        """Add the parameters of `other`; a different object under the same name is an error."""
        for name, param in other.items():
            if name in self._params and self._params[name] is not param:
                raise MXNetError(f"cannot update: a different Parameter named {name!r} "
                                 "already exists")
            self._params[name] = param

    def initialize(self, init=initializer.Uniform(), ctx=None, verbose=False,
                   force_reinit=False):
        """Initialize every parameter (see Parameter.initialize)."""
        for param in self.values():
            param.initialize(None, ctx, init, force_reinit=force_reinit)

    def zero_grad(self):
        for param in self.values():
            param.zero_grad()

    def reset_ctx(self, ctx):
        for param in self.values():
            param.reset_ctx(ctx)

    def list_ctx(self):
        seen = []
        for param in self.values():
            for c in param.list_ctx():
                if c not in seen:
                    seen.append(c)
        return seen

    def setattr(self, name, value):
        """Set attribute `name` (e.g. grad_req, lr_mult) on every parameter."""
        for param in self.values():
            setattr(param, name, value)

    def select(self, pattern):
        """The parameters whose names match the regular expression `pattern`."""
        regex = re.compile(pattern)
        out = ParameterDict(self._prefix)
        for name, param in self.items():
            if regex.match(name):
                out._params[name] = param
        return out

    def save(self, filename, strip_prefix=""):
        """Save values by name (with `strip_prefix` removed) in mx.nd.save's format."""
        arrays = {}
        for name, param in self.items():
            if strip_prefix and not name.startswith(strip_prefix):
                raise MXNetError(f"cannot strip prefix {strip_prefix!r} from parameter {name!r}")
            arrays[name[len(strip_prefix):]] = param._reduce()
        nd.save(filename, arrays)

    def load(self, filename, ctx=None, allow_missing=False, ignore_extra=False,
             restore_prefix="", cast_dtype=False, dtype_source="current"):
        """Load values saved by `save`; see Block.load_parameters for the checks."""
        loaded = {restore_prefix + k: v for k, v in nd.load(filename).items()}
        assign_loaded(dict(self.items()), loaded, filename, ctx, allow_missing, ignore_extra,
                      cast_dtype, dtype_source)


def assign_loaded(params, loaded, filename, ctx, allow_missing, ignore_extra, cast_dtype,
                  dtype_source):
    """Copy `loaded` arrays into `params` (both keyed by name), with clear mismatch errors.

    The one loader behind Block.load_parameters, ParameterDict.load and
    SymbolBlock.imports; `filename` only names the source in errors.
    """
    _check_names(params, loaded, filename, allow_missing, ignore_extra)
    for name, param in params.items():
        if name in loaded:
            value = _fit_value(name, param, loaded[name], filename, cast_dtype, dtype_source)
            _load_into(param, value, ctx)


def _check_names(params, loaded, filename, allow_missing, ignore_extra):
    if not allow_missing:
        missing = [n for n in params if n not in loaded]
        if missing:
            raise MXNetError(
                f"parameters {missing[:5]}{' ...' if len(missing) > 5 else ''} are missing from "
                f"{filename!r}, which holds {sorted(loaded)[:5]}...; it may be another "
                "network's file. Pass allow_missing=True to keep those parameters as they are")
    if not ignore_extra:
        extra = [n for n in loaded if n not in params]
        if extra:
            raise MXNetError(
                f"{filename!r} holds parameters {extra[:5]}{' ...' if len(extra) > 5 else ''} "
                "that this block does not have; it may be another network's file. Pass "
                "ignore_extra=True to skip them")


def _fit_value(name, param, value, filename, cast_dtype, dtype_source):
    """Check `value` against `param`'s shape (filling its unknown dims) and dtype."""
    if param.shape is not None and len(param.shape) == value.ndim and all(
            a in (0, b) for a, b in zip(param.shape, value.shape)):
        param.shape = value.shape
    elif param.shape is not None:
        raise ShapeError(f"parameter {name!r}: {filename!r} has shape {value.shape} but "
                         f"the block expects {param.shape}")
    if cast_dtype:
        if dtype_source == "current":
            return value.astype(param.dtype)
        param.cast(value.dtype)
    elif np.dtype(value.dtype) != np.dtype(param.dtype):
        raise MXNetError(f"parameter {name!r}: {filename!r} has dtype "
                         f"{np.dtype(value.dtype).name} but the block uses "
                         f"{np.dtype(param.dtype).name}; pass cast_dtype=True")
    return value


def _load_into(param, value, ctx):
    if param._data is None:
        if param._deferred_init:
            ctx = param._deferred_init[1] if ctx is None else _ctx_list(ctx)
        param._deferred_init = ()
        param._shape = value.shape
        param._init_impl(value, _ctx_list(ctx))
    else:
        param.set_data(value)
