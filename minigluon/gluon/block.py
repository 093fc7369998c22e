"""Block and HybridBlock: the building blocks of Gluon models.

A Block owns Parameters and child Blocks, registered by assigning them as attributes.
A HybridBlock writes its computation once, in `hybrid_forward(F, x, ...)`, where F is
`mx.nd` for arrays or `mx.sym` while tracing, under `mx.name.Prefix(block.prefix)`, so
that its operators are named `<prefix><name>` as in MXNet. `hybridize()` traces that
function once into a graph (an mx.nd.CachedOp, symbol/cached_op.py) and replays the graph
on every call, the first included.
"""
from collections import OrderedDict
import json
import threading
import warnings

import numpy as np

from .. import autograd, initializer
from .. import ndarray as nd
from .. import symbol as sym
from .. import numpy_extension  # noqa: F401  (F.npx in hybrid_forward: it sets nd.npx, sym.npx)
from ..base import MXNetError
from ..name import Prefix
from ..ndarray.ndarray import NDArray
from ..numpy import symbol as _np_symbol  # noqa: F401  (F.np while tracing: it sets sym.np)
from ..numpy.methods import NumpyMethods
from ..symbol.cached_op import CachedOp, parse_flags
from ..symbol.op_hook import OpHook
from ..symbol.symbol import Symbol
from .parameter import (DeferredInitializationError, Parameter, ParameterDict,
                        StorageTypeError, assign_loaded)


def _own_params(prefix, shared):
    """A block's ParameterDict: fresh under `prefix`, or looking parameters up in `shared`
    under that dict's own prefix (so `Net(params=other.collect_params())` reuses other's
    weights by their names)."""
    if shared is None:
        return ParameterDict(prefix)
    return ParameterDict(shared.prefix, shared=shared)


class _BlockScope:
    """Hands out unique name prefixes (`dense0_`, `dense1_`, ...) within the current scope.

    Inside it, symbols are named under the block's prefix too (`mx.name.Prefix`), as in
    MXNet: a block traced on Symbols names its operators `<prefix><name>`. A block made
    with prefix='' keeps the names of the scope around it."""

    _local = threading.local()

    def __init__(self, block, names_symbols=True):
        self._block = block
        self._counter = {}
        self._names_symbols = names_symbols
        self._entered = []     # (previous scope, name manager or None) per open `with`

    @staticmethod
    def create(prefix, params, hint):
        current = getattr(_BlockScope._local, "value", None)
        if current is None:
            if prefix is None:
                counter = _BlockScope._global_counter()
                count = counter.get(hint, 0)
                counter[hint] = count + 1
                prefix = f"{hint}{count}_"
            return prefix, _own_params(prefix, params)
        if prefix is None:
            count = current._counter.get(hint, 0)
            current._counter[hint] = count + 1
            prefix = f"{hint}{count}_"
        parent = current._block
        if params is None:
            # a child of a block built on shared parameters shares from the same dict, under
            # the names the sharing block's own children would have had
            params = ParameterDict(parent.params.prefix + prefix, shared=parent.params._shared)
        else:
            params = _own_params(prefix, params)
        return parent.prefix + prefix, params

    @staticmethod
    def _global_counter():
        if not hasattr(_BlockScope._local, "counter"):
            _BlockScope._local.counter = {}
        return _BlockScope._local.counter

    def __enter__(self):
        names = Prefix(self._block.prefix) if self._names_symbols else None
        self._entered.append((getattr(_BlockScope._local, "value", None), names))
        _BlockScope._local.value = self
        if names is not None:
            names.__enter__()
        return self

    def __exit__(self, *exc):
        previous, names = self._entered.pop()
        if names is not None:
            names.__exit__(*exc)
        _BlockScope._local.value = previous


class Block:
    """Base class of all layers and models. Subclass it and define `forward`.

    Example::

        class Net(gluon.Block):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                with self.name_scope():
                    self.dense = nn.Dense(10)
            def forward(self, x):
                return self.dense(x)
    """

    def __init__(self, prefix=None, params=None):
        hint = self._alias()
        object.__setattr__(self, "_children", OrderedDict())
        object.__setattr__(self, "_reg_params", OrderedDict())
        self._prefix, self._params = _BlockScope.create(prefix, params, hint)
        self._name = self._prefix[:-1] if self._prefix.endswith("_") else self._prefix
        self._scope = _BlockScope(self, names_symbols=prefix != "")
        self._forward_hooks = OrderedDict()
        self._forward_pre_hooks = OrderedDict()

    def __setattr__(self, name, value):
        existing = getattr(self, name, None)
        if isinstance(existing, (Block, Parameter)) and not isinstance(value, type(existing)) \
                and value is not None:
            raise TypeError(f"changing attribute {name!r} of {self.name} from "
                             f"{type(existing).__name__} to {type(value).__name__} is not allowed")
        if isinstance(value, Block):
            self.register_child(value, name)
        elif isinstance(value, Parameter):
            self._reg_params[name] = value
        object.__setattr__(self, name, value)

    # ---- naming -------------------------------------------------------------------------
    def _alias(self):
        """The name hint for automatic prefixes (`dense` gives dense0_, dense1_, ...)."""
        return type(self).__name__.lower()

    @property
    def prefix(self):
        return self._prefix

    @property
    def name(self):
        return self._name

    @property
    def params(self):
        """This block's own parameters (not its children's)."""
        return self._params

    def name_scope(self):
        """A scope in which child blocks get names prefixed by this block's prefix."""
        return self._scope

    def __repr__(self):
        lines = [f"{type(self).__name__}("]
        for key, child in self._children.items():
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({key}): {body}")
        return "\n".join(lines) + "\n)" if len(lines) > 1 else f"{type(self).__name__}()"

    # ---- structure ----------------------------------------------------------------------
    def register_child(self, block, name=None):
        """Register `block` as a child (done automatically on attribute assignment)."""
        self._children[name if name is not None else str(len(self._children))] = block

    def collect_params(self, select=None):
        """A ParameterDict of this block's and all its children's parameters.

        `select` is a regular expression (or '|'-joined ones) that names must match.
        """
        out = ParameterDict(self._params.prefix)
        self._collect_into(out)
        return out if select is None else out.select(f"(?:{select})$|(?:{select})")

    def _collect_into(self, out):
        self._warn_unregistered_blocks()
        for name, param in self._params.items():
            out._params.setdefault(name, param)
        for param in self._reg_params.values():
            out._params.setdefault(param.name, param)
        for child in self._children.values():
            child._collect_into(out)

    def _warn_unregistered_blocks(self):
        """Warn about Blocks kept in a plain list, tuple or dict attribute: they are not
        children, so their parameters would be silently left out."""
        registered = {id(c) for c in self._children.values()}
        for name, value in vars(self).items():
            if isinstance(value, (list, tuple, dict)) and any(
                    id(b) not in registered for b in _blocks_in(value)):
                warnings.warn(f"{type(self).__name__}.{name} is a {type(value).__name__} "
                              "holding Blocks, which are not registered as children, so their "
                              "parameters are not collected; use nn.Sequential / "
                              "nn.HybridSequential or register_child()", stacklevel=3)

    def _collect_params_with_prefix(self, prefix=""):
        """Parameters by structural name (`features.0.weight`), for save/load_parameters."""
        if prefix:
            prefix += "."
        out = {prefix + key: p for key, p in self._reg_params.items()}
        for name, child in self._children.items():
            out.update(child._collect_params_with_prefix(prefix + name))
        return out

    def apply(self, fn):
        """Call `fn(block)` on every child (recursively) and then on this block."""
        for child in self._children.values():
            child.apply(fn)
        fn(self)
        return self

    def initialize(self, init=initializer.Uniform(), ctx=None, verbose=False,
                   force_reinit=False):
        """Initialize all parameters (see Parameter.initialize)."""
        self.collect_params().initialize(init, ctx, verbose, force_reinit)

    def hybridize(self, active=True, **kwargs):
        """Hybridize every HybridBlock child (a plain Block itself stays imperative)."""
        for child in self._children.values():
            child.hybridize(active, **kwargs)

    def cast(self, dtype):
        """Cast all parameters to `dtype`."""
        for child in self._children.values():
            child.cast(dtype)
        for param in self._reg_params.values():
            param.cast(dtype)

    def zero_grad(self):
        """Set all gradients to zero."""
        self.collect_params().zero_grad()

    def reset_ctx(self, ctx):
        self.collect_params().reset_ctx(ctx)

    # ---- saving ------------------------------------------------------------------------
    def save_parameters(self, filename, deduplicate=False):
        """Save parameter values by structural name, in mx.nd.save's format."""
        params = self._collect_params_with_prefix()
        arrays, seen = {}, {}
        for name, param in params.items():
            if deduplicate and id(param) in seen:
                continue
            seen[id(param)] = name
            arrays[name] = param._reduce()
        nd.save(filename, arrays)

    def load_parameters(self, filename, ctx=None, allow_missing=False, ignore_extra=False,
                        cast_dtype=False, dtype_source="current"):
        """Load values written by save_parameters; shapes must match exactly.

        A name missing from the file is an error unless allow_missing; a name in the file
        that this block lacks is an error unless ignore_extra.
        """
        loaded = nd.load(filename)
        if not isinstance(loaded, dict):
            raise MXNetError(f"{filename}: holds a list of arrays, not named parameters")
        params = self._collect_params_with_prefix()
        loaded = _fill_shared(params, loaded)
        if loaded and not any("." in k for k in loaded) and not set(loaded) & set(params):
            # a file of full names (save_params, MXNet's legacy format), not structural ones
            params = dict(self.collect_params().items())
            loaded = {self.prefix + k: v for k, v in loaded.items()}
        assign_loaded(params, loaded, filename, ctx, allow_missing, ignore_extra, cast_dtype,
                      dtype_source)

    def save_params(self, filename):
        """Deprecated (MXNet's legacy format): values by full parameter name less this
        block's prefix. Prefer save_parameters; load_parameters reads both."""
        warnings.warn("save_params is deprecated; use save_parameters", DeprecationWarning,
                      stacklevel=2)
        self.collect_params().save(filename, strip_prefix=self.prefix)

    def load_params(self, filename, ctx=None, allow_missing=False, ignore_extra=False):
        """Deprecated: load_parameters, which also reads save_params' files."""
        warnings.warn("load_params is deprecated; use load_parameters", DeprecationWarning,
                      stacklevel=2)
        self.load_parameters(filename, ctx, allow_missing, ignore_extra)

    def save(self, prefix):
        """Save the block tree and the parameters: `<prefix>-model.json` holds each block's
        class, name, child keys and whether it was hybridized; `<prefix>-model.params` the
        values (save_parameters). `load` restores them into a block built the same way."""
        with open(f"{prefix}-model.json", "w") as f:
            json.dump(_describe_tree(self), f)
        self.save_parameters(f"{prefix}-model.params")

    def load(self, prefix):
        """Load what `save(prefix)` wrote into this block, which must be built with the same
        classes in the same order: its blocks get their saved names and child keys back,
        hybridized ones are hybridized again, then the parameters are loaded."""
        with open(f"{prefix}-model.json") as f:
            tree = json.load(f)
        _restore_tree(self, tree, f"{prefix}-model.json", "model")
        self.load_parameters(f"{prefix}-model.params")

    # ---- calling -----------------------------------------------------------------------
    def register_op_hook(self, callback, monitor_all=False):
        """Install `callback` on every hybridized block below (see HybridBlock's)."""
        for child in self._children.values():
            child.register_op_hook(callback, monitor_all)

    def register_forward_pre_hook(self, hook):
        """Call `hook(block, inputs)` before each forward."""
        key = len(self._forward_pre_hooks)
        self._forward_pre_hooks[key] = hook
        return _HookHandle(self._forward_pre_hooks, key)

    def register_forward_hook(self, hook):
        """Call `hook(block, inputs, outputs)` after each forward."""
        key = len(self._forward_hooks)
        self._forward_hooks[key] = hook
        return _HookHandle(self._forward_hooks, key)

    def __call__(self, *args):
        for hook in list(self._forward_pre_hooks.values()):
            hook(self, args)
        out = self.forward(*args)
        for hook in list(self._forward_hooks.values()):
            hook(self, args, out)
        return out

    def forward(self, *args):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def summary(self, *inputs):
        """Print each layer's output shape and parameter count for a forward on `inputs`."""
        from .summary import summarize
        print(summarize(self, inputs))


class _HookHandle:
    def __init__(self, hooks, key):
        self._hooks, self._key = hooks, key

    def detach(self):
        self._hooks.pop(self._key, None)


class HybridBlock(Block):
    """A Block whose `hybrid_forward(F, x, *args, **params)` works on both NDArrays and
    Symbols, so `hybridize()` can trace it once and replay the traced graph."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix, params)
        self._active = False
        self._cached = {}
        self._needs_shape_key = None
        self._flags = parse_flags(())
        self._op_hook = None      # the OpHook given to each cached graph

    def hybridize(self, active=True, backend=None, clear=True, static_alloc=False,
                  static_shape=False, inline_limit=2, forward_bulk_size=None,
                  backward_bulk_size=None, **kwargs):
        """Trace on the next call and replay the graph afterwards (active=False undoes it),
        here and in every HybridBlock below.

        The flags are mx.nd.CachedOp's: while recording, a graph of at most `inline_limit`
        operators runs operator by operator on the tape (not with static_alloc);
        static_shape needs static_alloc. `clear=False` keeps graphs already traced.
        """
        if backend is not None or kwargs:
            raise MXNetError(f"hybridize: minigluon has no subgraph backends, so backend="
                             f"{backend!r} and backend options {sorted(kwargs)} cannot be "
                             "used; leave them out")
        flags = dict(static_alloc=static_alloc, static_shape=static_shape,
                     inline_limit=inline_limit, forward_bulk_size=forward_bulk_size,
                     backward_bulk_size=backward_bulk_size)
        self._flags = parse_flags(flags)
        self._active = active
        if clear:
            self._cached = {}
            self._needs_shape_key = None
        super().hybridize(active, **flags)

    def register_op_hook(self, callback, monitor_all=False):
        """Call `callback(name, op_name, array)` for every operator output (and input, with
        monitor_all) while this block's hybridized graph runs, here and in the blocks below;
        names are bytes, as MXNet gives them (see symbol/op_hook.py)."""
        self._op_hook = OpHook(callback, monitor_all)     # checks the callback now
        for cached_op, _, _ in self._cached.values():
            cached_op.register_op_hook(callback, monitor_all)
        super().register_op_hook(callback, monitor_all)

    def cast(self, dtype):
        self._cached = {}
        super().cast(dtype)

    def register_child(self, block, name=None):
        """Register `block` as a child; a graph traced before no longer holds, so it is
        traced again on the next call."""
        super().register_child(block, name)
        self._cached = {}
        self._needs_shape_key = None

    def infer_shape(self, *args):
        """Fill in unknown parameter shapes from the inputs; layers with deferred
        parameters override this."""
        unknown = [p.name for p in self._reg_params.values()
                   if p.shape is None or 0 in p.shape]
        if unknown:
            raise DeferredInitializationError(
                f"{type(self).__name__} cannot infer the shapes of {unknown}; give their full "
                "shapes, or define infer_shape(self, *inputs) to set them from the inputs")

    def _deferred_pending(self):
        return [p for p in self._reg_params.values() if p._data is None and p._deferred_init]

    def _ensure_initialized(self, *args):
        pending = self._deferred_pending()
        if not pending:
            return
        if any(p.shape is None or 0 in p.shape for p in pending):
            self.infer_shape(*args)
        for p in pending:
            p._finish_deferred_init()

    def forward(self, x, *args):
        first = _first_array(_flatten([x, *args])[0], type(self).__name__)
        if isinstance(first, Symbol):
            params = {name: _symbol_like(first, p.var()) for name, p in self._reg_params.items()}
            with self.name_scope():     # operators named under this block's prefix
                return self.hybrid_forward(sym, x, *args, **params)
        if self._active and not _shape_pass.active:
            return self._call_cached(first, [x, *args])
        return self._call_imperative(first.context, x, *args)

    def _call_imperative(self, ctx, *args):
        self._ensure_initialized(*args)
        params = {name: p.data(ctx) for name, p in self._reg_params.items()}
        return self.hybrid_forward(nd, *args, **params)

    # a block whose traced graph depends on its inputs' shapes (a recurrent layer unrolls
    # over the sequence length) sets this; hybridized blocks holding one trace per shape
    _shape_dependent = False

    def _cache_key(self, flat):
        """What besides the inputs' nesting decides the traced graph: the input shapes when
        this block or one inside it is shape dependent."""
        if not self._cache_key_shapes():
            return ()
        return tuple(a.shape for a in flat if isinstance(a, NDArray))

    def _cache_key_shapes(self):
        """Whether this block or one inside it traces a graph per input shape."""
        if self._needs_shape_key is None:
            self._needs_shape_key = _any_block(self, lambda b: b._shape_dependent)
        return self._needs_shape_key

    def _call_cached(self, first, args):
        # inputs may be nested lists (a recurrent cell's states) and None (absent)
        flat, in_structure = _flatten(args)
        _check_graph_inputs(flat, first, type(self).__name__)
        # Nones at the end are arguments left to their defaults: f(x, None) is f(x)
        given = list(args)
        while given and given[-1] is None:
            given.pop()
        given_flat, given_structure = _flatten(given)
        key = (_frozen(given_structure), tuple(a is None for a in given_flat),
               self._cache_key(flat))
        entry = self._cached.get(key)
        if entry is None:
            self._check_argument_layout(key)
            if self._needs_shape_pass():
                # an imperative run on the inputs gives deferred parameters their shapes and
                # shape-dependent blocks their sizes (hybridized blocks inside run
                # imperatively too, and no op hook fires); in predict mode, so that no
                # running statistic is updated twice
                with _shape_pass, autograd.pause(train_mode=False):
                    self._call_imperative(first.context, *args)
            entry = self._cached[key] = self._trace(first, flat, in_structure)
        cached_op, params, structure = entry
        inputs = [a for a in flat if a is not None] + [p.data(first.context) for p in params]
        return _regroup(cached_op.run(inputs), structure)

    def _check_argument_layout(self, key):
        """Refuse a call whose nesting or absent (None) arguments differ from the graph
        already traced, as MXNet does: the cached graph has fixed inputs, and a silently
        traced second graph would hide a caller's mistake (an argument left out)."""
        if not self._cached:
            return
        old = next(iter(self._cached))
        if old[:2] != key[:2]:
            raise ValueError(
                f"{self.name}: the arguments' layout {_describe_layout(key)} differs from the "
                f"one its hybridized graph was traced with, {_describe_layout(old)}; pass the "
                "same arguments (None in the same places), or call hybridize() again to "
                "trace anew")

    def _needs_shape_pass(self):
        """Whether tracing needs an imperative run first: a block below has parameters
        waiting for their shapes, or traces a graph that depends on the input shapes."""
        return bool(self._cache_key_shapes()) or _any_block(
            self, lambda b: any(p._data is None for p in b._reg_params.values()))

    def _trace(self, first, flat, in_structure):
        """Trace hybrid_forward with Symbols into a CachedOp."""
        names = ["data"] if len(flat) == 1 else [f"data{i}" for i in range(len(flat))]
        sym_args = _regroup([None if a is None else _symbol_like(first, sym.var(n))
                             for n, a in zip(names, flat)], in_structure)
        out = self.forward(*sym_args)
        flat_out, structure = _flatten(out)
        graph_sym = sym.Group(flat_out)
        used = [n for n, a in zip(names, flat) if a is not None]
        by_name = {p.name: p for p in self.collect_params().values()}
        params = []
        for arg in graph_sym.list_arguments():
            if arg in used:
                continue
            if arg not in by_name:
                raise MXNetError(f"hybridize: the traced graph of {self.name} uses {arg!r}, "
                                 "which is neither an input nor one of its parameters")
            params.append(by_name[arg])
        cached_op = CachedOp(graph_sym, self._flags, used + [p.name for p in params])
        if self._op_hook is not None:
            cached_op.register_op_hook(self._op_hook.callback, self._op_hook.monitor_all)
        self._export_sym = graph_sym
        return cached_op, params, structure

    def export(self, path, epoch=0, remove_amp_cast=True):
        """Write `path-symbol.json` and `path-%04d.params` (call the hybridized block once
        first). Load them back with `SymbolBlock.imports`."""
        if not self._cached:
            raise MXNetError("export: hybridize() the block and run one forward pass first, so "
                             "there is a traced graph to write")
        graph_sym = self._export_sym
        graph_sym.save(f"{path}-symbol.json")
        by_name = {p.name: p for p in self.collect_params().values()}
        arrays = {}
        for arg in graph_sym.list_arguments():
            if arg in by_name:
                kind = "aux" if arg.endswith(("moving_mean", "moving_var", "running_mean",
                                              "running_var")) else "arg"
                arrays[f"{kind}:{arg}"] = by_name[arg]._reduce()
        param_file = f"{path}-{epoch:04d}.params"
        nd.save(param_file, arrays)
        return f"{path}-symbol.json", param_file

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define hybrid_forward()")


class _ShapePass(threading.local):
    """`with _shape_pass:` marks the imperative run that gives deferred parameters their
    shapes before a first trace; hybridized blocks run imperatively inside it."""

    depth = 0

    @property
    def active(self):
        return self.depth > 0

    def __enter__(self):
        self.depth += 1

    def __exit__(self, *exc):
        self.depth -= 1


_shape_pass = _ShapePass()


def _first_array(flat, block):
    """The first NDArray or Symbol among a call's (flattened) inputs; a ValueError, as in
    MXNet, when there is none or when NDArrays and Symbols are mixed."""
    arrays = [a for a in flat if isinstance(a, (NDArray, Symbol))]
    if not arrays:
        raise InputError(f"{block} needs at least one NDArray or Symbol input, got "
                         f"{[type(a).__name__ for a in flat]}")
    if len({isinstance(a, Symbol) for a in arrays}) > 1:
        raise InputError(f"{block}: inputs mix NDArrays and Symbols "
                         f"{[type(a).__name__ for a in flat]}; pass only one kind")
    return arrays[0]


def _check_graph_inputs(flat, first, block):
    """A hybridized block's inputs: NDArrays (or None) on one device, no Python scalars,
    since the traced graph takes arrays only."""
    for a in flat:
        if a is not None and not isinstance(a, NDArray):
            raise InputError(f"{block} is hybridized: its inputs must be NDArrays or None, got "
                             f"{type(a).__name__} {a!r}; pass an array, or call it without "
                             "hybridize()")
        if a is not None and a.context != first.context:
            raise InputError(f"{block} is hybridized: inputs on {first.context} and "
                             f"{a.context}; put all inputs on one device")


class InputError(MXNetError, ValueError):
    """Inputs a block cannot take (a ValueError, as in MXNet)."""


def _symbol_like(x, symbol):
    """`symbol` with mx.np semantics when `x` (an array or symbol) has them, so a block
    traced on mx.np arrays builds the same ops it runs imperatively."""
    return symbol.as_np_ndarray() if isinstance(x, NumpyMethods) else symbol


def _describe_layout(key):
    """A cache key's argument layout in words: each flat input NDArray or None."""
    return "(" + ", ".join("None" if absent else "array" for absent in key[1]) + ")"


def _flatten(out):
    if isinstance(out, (list, tuple)):
        flat, structure = [], []
        for item in out:
            f, s = _flatten(item)
            flat.extend(f)
            structure.append(s)
        return flat, (type(out), structure)
    if isinstance(out, Symbol) and len(out) > 1:
        return list(out), (list, [None] * len(out))
    return [out], None


def _fill_shared(params, loaded):
    """`loaded` plus, for a parameter shared under several names of which the file holds one
    (save_parameters(deduplicate=True)), its value under the other names too."""
    by_param = {}
    for name, param in params.items():
        if name in loaded:
            by_param.setdefault(id(param), loaded[name])
    shared = {name: by_param[id(p)] for name, p in params.items() if id(p) in by_param}
    return {**shared, **loaded}


def _describe_tree(block):
    """The JSON description `Block.save` writes for `block` and its children, in order."""
    return {"class": type(block).__name__, "name": block.name,
            "hybridized": bool(getattr(block, "_active", False)),
            "children": [[key, _describe_tree(child)] for key, child in block._children.items()]}


def _restore_tree(block, tree, filename, where):
    """Give `block` and its children the names, child keys and hybridization of `tree`."""
    if tree["class"] != type(block).__name__ or len(tree["children"]) != len(block._children):
        raise MXNetError(f"{filename}: {where} was saved as a {tree['class']} with "
                         f"{len(tree['children'])} children, but this model has a "
                         f"{type(block).__name__} with {len(block._children)}; load into a "
                         "model built by the same code, in the same order")
    object.__setattr__(block, "_name", tree["name"])
    children = list(block._children.values())
    block._children.clear()
    for (key, sub), child in zip(tree["children"], children):
        _restore_tree(child, sub, filename, f"{where}.{key}")
        block._children[key] = child
    if tree["hybridized"] and isinstance(block, HybridBlock):
        block._active, block._cached = True, {}


def _blocks_in(container):
    """The Blocks inside a (nested) list, tuple or dict."""
    items = container.values() if isinstance(container, dict) else container
    for item in items:
        if isinstance(item, Block):
            yield item
        elif isinstance(item, (list, tuple, dict)):
            yield from _blocks_in(item)


def _any_block(block, test):
    """True if `test` holds for `block` or any block below it."""
    return test(block) or any(_any_block(child, test) for child in block._children.values())


def _frozen(structure):
    """A hashable copy of a `_flatten` structure (its lists become tuples)."""
    if structure is None:
        return None
    kind, parts = structure
    return kind, tuple(_frozen(p) for p in parts)


def _regroup(outputs, structure):
    return _build(structure, iter(outputs))


def _build(s, it):
    # a module-level function: a nested one calling itself is a reference cycle that
    # kept the outputs (and through their tape node every value of the traced graph)
    # alive until a full garbage collection
    if s is None:
        return next(it)
    kind, parts = s
    return kind(_build(p, it) for p in parts)


class SymbolBlock(HybridBlock):
    """A block that runs a given Symbol graph, e.g. one written by HybridBlock.export.

    `inputs` are the data variables; every other argument becomes a Parameter.
    """

    def __init__(self, outputs, inputs, params=None):
        super().__init__(prefix="", params=params)
        outputs = outputs if isinstance(outputs, Symbol) else sym.Group(list(outputs))
        inputs = [inputs] if isinstance(inputs, Symbol) else list(inputs)
        self._input_names = [s.name for s in inputs]
        self._graph_sym = outputs
        self._export_sym = outputs
        _check_dense_params(outputs, self._input_names)
        for arg in outputs.list_arguments():
            if arg not in self._input_names:
                p = self._params.get(arg, allow_deferred_init=True)
                self._reg_params[arg] = p
        self._graph = self._compile()

    def _compile(self):
        names = self._input_names + [a for a in self._graph_sym.list_arguments()
                                     if a not in self._input_names]
        cached_op = CachedOp(self._graph_sym, self._flags, names)
        if self._op_hook is not None:
            cached_op.register_op_hook(self._op_hook.callback, self._op_hook.monitor_all)
        return cached_op

    def hybridize(self, active=True, **kwargs):
        """Take the CachedOp flags (see HybridBlock.hybridize); the graph always runs."""
        super().hybridize(active, **kwargs)
        self._graph = self._compile()

    def register_op_hook(self, callback, monitor_all=False):
        """Call `callback(name, op_name, array)` for each operator output of the graph (and
        input, with monitor_all), as HybridBlock.register_op_hook."""
        self._op_hook = OpHook(callback, monitor_all)
        self._graph.register_op_hook(callback, monitor_all)

    @staticmethod
    def imports(symbol_file, input_names, param_file=None, ctx=None):
        """Load a block exported by HybridBlock.export."""
        graph = sym.load(symbol_file)
        names = [input_names] if isinstance(input_names, str) else list(input_names)
        block = SymbolBlock(graph, [sym.var(n) for n in names])
        if param_file is not None:
            loaded = {k.split(":", 1)[-1]: v for k, v in nd.load(param_file).items()}
            assign_loaded(dict(block._reg_params), loaded, param_file, ctx, False, False,
                          False, "current")
        return block

    def forward(self, x, *args):
        if isinstance(x, Symbol):
            raise MXNetError("SymbolBlock cannot be traced again; call it on NDArrays")
        ctx = x.context
        params = [p.data(ctx) for p in self._reg_params.values()]
        outs = self._graph.run([x, *args] + params)
        return outs[0] if len(outs) == 1 else outs


def _check_dense_params(graph, input_names):
    """A SymbolBlock reads its parameters with data(), which sparse ones refuse: say so
    when it is built (an AssertionError, as in MXNet)."""
    for name, attrs in graph.attr_dict().items():
        stype_id = attrs.get("__storage_type__", "0")
        if name not in input_names and stype_id != "0":
            raise StorageTypeError(
                f"SymbolBlock: parameter {name!r} has a sparse storage type (id {stype_id}); "
                "a SymbolBlock supports dense parameters only. Declare the variable without "
                "stype, or write the model as a Block that calls row_sparse_data()")
