"""The Optimizer base class and the registry behind `mx.optimizer.create('sgd', ...)`.

An optimizer owns the hyperparameters shared by every rule (learning rate or schedule,
weight decay, gradient rescaling and clipping, per-parameter multipliers) and the update
counts. A concrete rule subclasses `Optimizer`, creates its state in `create_state` and
writes one step in `_step`, on raw numpy/cupy arrays and in place, so a step is never
recorded by autograd and the weight keeps its identity (and every alias of it).

`update(index, weight, grad, state)` also accepts lists of indices, weights, gradients and
states. Custom optimizers written the MXNet way, overriding `update` with NDArray
arithmetic, keep working.

Sparse weights, gradients and states run the same `_step` through
`ndarray/sparse_update.py`: the standard update (every row, the dense result) by default,
or the lazy update (only the rows a row_sparse gradient stores) for the rules whose
`_lazy_rows` says so (SGD and Adam with lazy_update, Ftrl, AdaGrad), as in MXNet; see
docs/sparse-optimizers.md.
"""
import copy
import warnings

import numpy as np

from .. import autograd
from ..base import ContextError, DTypeError, MXNetError, ShapeError, unknown_name
from ..ndarray import NDArray
from ..ndarray import sparse as nd_sparse
from ..ndarray.sparse_storage import is_sparse, stype_of
from ..ndarray.sparse_update import assign, update_rows

__all__ = ["Optimizer", "OptimizerError", "SchedulerConflict", "register", "create",
           "lazy_storage"]


class OptimizerError(MXNetError, ValueError):
    """A bad optimizer argument: a hyperparameter out of range, a negative learning rate..."""


class SchedulerConflict(OptimizerError, UserWarning):
    """set_learning_rate on an optimizer driven by an lr_scheduler. MXNet raises a
    UserWarning here, so this error is one too (`except UserWarning` catches it)."""


def check_range(owner, name, value, low, high, high_open=False):
    """Raise OptimizerError unless `low <= value <= high` (or `< high` if `high_open`)."""
    ok = isinstance(value, (int, float, np.number)) and low <= value and (
        value < high if high_open else value <= high)
    if not ok:
        bound = ")" if high_open else "]"
        raise OptimizerError(f"{owner}: {name} must lie in [{low}, {high}{bound}, got {value!r}")


class Optimizer:
    """Base class of every optimizer.

    Parameters
    ----------
    rescale_grad : float
        Multiply each gradient by this first, often `1.0 / batch_size`.
    param_idx2name : dict of int to str, optional
        Parameter names by index; names not ending in `_weight` or `_gamma` get no weight
        decay (wd_mult 0), as in MXNet.
    wd : float
        Weight decay (L2 penalty) coefficient.
    clip_gradient : float, optional
        Clip the rescaled gradient to `[-clip_gradient, clip_gradient]`; None or <= 0 is off.
    learning_rate : float, optional
        The rate; default the class's `default_learning_rate`, or `lr_scheduler.base_lr`
        when a scheduler is given. Given both, the scheduler's base_lr is set to it.
    lr_scheduler : LRScheduler, optional
        Gives the rate from the update count.
    sym : Symbol, optional
        Reads `__lr_mult__`/`__wd_mult__` attributes of its arguments.
    begin_num_update : int
        The update count to start from (when resuming).
    multi_precision : bool
        For float16 weights, keep a float32 master copy in the state and step on it.
    param_dict : dict of index to Parameter, optional
        Objects with `.lr_mult` and `.wd_mult`, which take precedence over set_lr_mult.

    >>> opt = mx.optimizer.create('sgd', learning_rate=0.1, momentum=0.9)
    >>> state = opt.create_state(0, weight)
    >>> opt.update(0, weight, grad, state)          # weight changes in place
    """

    opt_registry = {}
    default_learning_rate = 0.01
    # True for rules that need a whole parameter at once (norms of the weight, as LAMB and
    # LARS take): a dist kvstore's server that holds only a slice cannot run them
    layerwise = False
    # Where a multi-precision state keeps its float32 master copy: MXNet's SGD, NAG and LARS
    # put it last, `(inner_state, master)`; the other rules put it first
    master_last = False

    def __init__(self, rescale_grad=1., param_idx2name=None, wd=0., clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, sym=None, begin_num_update=0,
                 multi_precision=False, param_dict=None):
        name = type(self).__name__
        if param_idx2name is not None and not isinstance(param_idx2name, dict):
            raise OptimizerError(f"{name}: param_idx2name must be a dict of index to name, "
                                 f"got {type(param_idx2name).__name__}")
        if learning_rate is not None:
            _check_lr(name, learning_rate)
        self.rescale_grad = rescale_grad
        self.lr_scheduler = lr_scheduler
        self.lr = self._initial_lr(learning_rate, lr_scheduler)
        self.wd = wd
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.aggregate_num = 0
        self.idx2name = dict(param_idx2name or {})
        self.sym_info = _sym_info(sym)
        self.param_dict = param_dict if param_dict else {}
        self.set_lr_mult({})
        self.set_wd_mult({})

    def _initial_lr(self, learning_rate, lr_scheduler):
        if lr_scheduler is None:
            return self.default_learning_rate if learning_rate is None else learning_rate
        if learning_rate is not None and lr_scheduler.base_lr != learning_rate:
            warnings.warn(f"{type(self).__name__}: learning_rate={learning_rate} replaces the "
                          f"lr_scheduler's base_lr={lr_scheduler.base_lr}", stacklevel=3)
            lr_scheduler.base_lr = learning_rate
        return lr_scheduler.base_lr

    # ---- registry -----------------------------------------------------------------------
    @staticmethod
    def register(klass):
        """Class decorator: make `klass` creatable by its lower-cased class name.

        >>> @mx.optimizer.register
        ... class MySGD(mx.optimizer.Optimizer): ...
        >>> mx.optimizer.create('mysgd')
        """
        if not (isinstance(klass, type) and issubclass(klass, Optimizer)):
            raise OptimizerError(f"register: expected an Optimizer subclass, got {klass!r}")
        name = klass.__name__.lower()
        old = Optimizer.opt_registry.get(name)
        if old is not None and old is not klass:
            warnings.warn(f"optimizer {klass.__module__}.{klass.__name__} replaces "
                          f"{old.__module__}.{old.__name__} as {name!r}", stacklevel=2)
        Optimizer.opt_registry[name] = klass
        return klass

    @staticmethod
    def create_optimizer(name, **kwargs):
        """An optimizer from its (case-insensitive) name: `create_optimizer('adam', wd=1e-4)`."""
        if not isinstance(name, str):
            raise OptimizerError(f"an optimizer name must be a str, got {type(name).__name__}")
        klass = Optimizer.opt_registry.get(name.lower())
        if klass is None:
            raise unknown_name("optimizer", name, Optimizer.opt_registry)
        return klass(**kwargs)

    # ---- learning rate and multipliers --------------------------------------------------
    @property
    def learning_rate(self):
        """The current global rate: the scheduler's at `num_update`, else `lr`."""
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr):
        """Set the global rate; not allowed when an lr_scheduler drives it (raises
        `SchedulerConflict`, a UserWarning raised as an error, as MXNet does)."""
        if self.lr_scheduler is not None:
            raise SchedulerConflict(f"{type(self).__name__}: the learning rate comes from its "
                                 "lr_scheduler; change the scheduler (e.g. its base_lr) "
                                 "instead of calling set_learning_rate")
        _check_lr(type(self).__name__, lr)
        self.lr = lr

    def set_lr_mult(self, args_lr_mult):
        """Set per-parameter rate multipliers, keyed by index or name."""
        self.lr_mult = self._sym_mults("__lr_mult__")
        self.lr_mult.update(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        """Set per-parameter weight-decay multipliers, keyed by index or name.

        Named parameters other than `*_weight` and `*_gamma` default to 0 (no decay).
        """
        self.wd_mult = {n: 0.0 for n in self.idx2name.values()
                        if not (n.endswith("_weight") or n.endswith("_gamma"))}
        self.wd_mult.update(self._sym_mults("__wd_mult__"))
        self.wd_mult.update(args_wd_mult)

    def _sym_mults(self, key):
        if not self.sym_info:
            return {}
        attrs, arg_names = self.sym_info
        return {n: float(attrs[n][key]) for n in arg_names if key in attrs.get(n, {})}

    def _get_lrs(self, indices):
        base = self.learning_rate
        return [base * self._mult(i, "lr_mult", self.lr_mult) for i in indices]

    def _get_wds(self, indices):
        return [self.wd * self._mult(i, "wd_mult", self.wd_mult) for i in indices]

    def _get_lr(self, index):
        """The rate for parameter `index`: global rate times its lr_mult."""
        return self._get_lrs([index])[0]

    def _get_wd(self, index):
        """The weight decay for parameter `index`: wd times its wd_mult."""
        return self._get_wds([index])[0]

    def _mult(self, index, attr, table):
        if index in self.param_dict:
            return getattr(self.param_dict[index], attr)
        if index in table:
            return table[index]
        if index in self.idx2name:
            return table.get(self.idx2name[index], 1.0)
        return 1.0

    # ---- update counts ------------------------------------------------------------------
    def _set_current_context(self, device_id):
        """Count updates separately per device, so each device's copy sees its own step t."""
        counts = self._all_index_update_counts.setdefault(device_id, {})
        self._index_update_count = counts

    def _update_count(self, index):
        """Count one more update of `index` (or of each index in a list)."""
        for idx in index if isinstance(index, (list, tuple)) else [index]:
            count = self._index_update_count.get(idx, self.begin_num_update) + 1
            self._index_update_count[idx] = count
            self.num_update = max(count, self.num_update)

    def update_counts(self):
        """A copy of the update counts, `{device_id: {index: updates so far}}`.

        >>> opt.update_counts()
        {0: {0: 3, 1: 3}}
        """
        return copy.deepcopy(self._all_index_update_counts)

    def set_update_counts(self, counts, num_update=None):
        """Continue counting from `counts` (as `update_counts` returns them); `num_update`
        defaults to the largest count (at least `begin_num_update`)."""
        self._all_index_update_counts = copy.deepcopy(counts)
        self._index_update_count = self._all_index_update_counts.setdefault(0, {})
        if num_update is None:
            num_update = max([self.begin_num_update] +
                             [c for per in counts.values() for c in per.values()])
        self.num_update = num_update

    # ---- states -------------------------------------------------------------------------
    def create_state(self, index, weight):
        """The auxiliary state (momentum, moments, ...) for `weight`; None if the rule has none."""
        return None

    def create_state_multi_precision(self, index, weight):
        """Like create_state, plus a float32 master copy for float16 weights when
        multi_precision is on: the state is then `(master_weight, inner_state)`, or
        `(inner_state, master_weight)` for the rules with `master_last` (SGD, NAG, LARS)."""
        if weight.dtype == np.float16 and self.multi_precision:
            with weight.context.scope():
                raw = weight._data.astype(np.float32)
                master = type(weight)(raw, weight.context) if is_sparse(raw) else \
                    NDArray(raw, weight.context)
            inner = self.create_state(index, master)
            return (inner, master) if self.master_last else (master, inner)
        if weight.dtype == np.float16:
            warnings.warn(f"{type(self).__name__}: accumulating updates in float16 can hurt "
                          "accuracy; pass multi_precision=True to step on a float32 copy",
                          stacklevel=2)
        return self.create_state(index, weight)

    @staticmethod
    def _zeros_like(weight, dtype=None, stype="default"):
        """A zero state array on the weight's device (a helper for create_state), dense or
        in storage type `stype` (MXNet keeps some states in the weight's stype)."""
        ctx = weight.context
        if stype != "default":
            return nd_sparse.zeros(stype, weight.shape, ctx, dtype or weight.dtype)
        with ctx.scope():
            return NDArray(ctx.xp.zeros(weight.shape, dtype=dtype or weight.dtype), ctx)

    # ---- updates ------------------------------------------------------------------------
    def update(self, index, weight, grad, state):
        """Update `weight` in place from `grad`, using and updating `state`.

        `index` is an int or str (or a list of them, with lists of weights, gradients and
        states): it selects the parameter's lr_mult, wd_mult and update count.
        """
        self._apply(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index, weight, grad, state):
        """`update`, stepping on the float32 master copy for float16 weights when
        multi_precision is on (state from `create_state_multi_precision`)."""
        if type(self).update is not Optimizer.update:
            return self._legacy_multi_precision(index, weight, grad, state)
        self._apply(index, weight, grad, state, multi_precision=self.multi_precision)

    def _apply(self, index, weight, grad, state, multi_precision):
        items = _as_items(type(self).__name__, index, weight, grad, state)
        for idx, w, g, _ in items:
            self._check_inputs(idx, w, g)
        indices = [it[0] for it in items]
        self._update_count(indices)
        for (idx, w, g, s), lr, wd in zip(items, self._get_lrs(indices), self._get_wds(indices)):
            self._check_step_lr(idx, w, lr)
            with w.context.scope():
                if multi_precision and w.dtype == np.float16:
                    self._step_master(idx, w, g, s, lr, wd)
                else:
                    self._run(w.context.xp, idx, w._data, g._data, _raw(s), lr, wd)

    def _split_master(self, state):
        """`(master, inner)` from a multi-precision state, whichever order the rule keeps."""
        return (state[1], state[0]) if self.master_last else (state[0], state[1])

    def _step_master(self, index, weight, grad, state, lr, wd):
        master, inner = self._split_master(state)
        grad32 = grad._data.astype(np.float32)
        xp = weight.context.xp
        self._run(xp, index, master._data, grad32, _raw(inner), lr, wd)
        if is_sparse(weight._data):
            assign(xp, weight._data, master._data.to_dense(xp) if is_sparse(master._data)
                   else master._data)
        else:
            weight._data[...] = master._data.astype(weight._data.dtype)

    def _run(self, xp, index, weight, grad, state, lr, wd):
        """One step on raw arrays: `_step` itself when all are dense (every dense step comes
        here: keep it short), else `_sparse_step`."""
        if _plain(xp.ndarray, weight, grad, state):
            self._step(xp, index, weight, grad, state, float(lr), float(wd))
        else:
            self._sparse_step(xp, index, weight, grad, state, lr, wd)

    def _sparse_step(self, xp, index, weight, grad, state, lr, wd):
        """`_step` on raw arrays of which some may be sparse containers: the lazy or the
        standard update of ndarray/sparse_update.py (see `_lazy_rows`)."""
        lr, wd = float(lr), float(wd)
        lazy = stype_of(grad) == "row_sparse" and self._lazy_rows(weight, state)
        update_rows(xp, lambda w, g, s: self._step(xp, index, w, g, s, lr, wd),
                    weight, grad, state, lazy,
                    lambda w, rows, g, s: self._step_rows(xp, index, w, rows, g, s, lr, wd))

    def _step_rows(self, xp, index, weight, rows, grad, state, lr, wd):
        """A lazy update done in place on the rows `rows` of the whole `weight` and
        `state` (dense raw arrays; `grad` holds one row per id), when this rule has a
        kernel for it: True if done. The default has none: the rows are gathered, run
        through `_step` and scattered back."""
        return False

    def _lazy_rows(self, weight, state):
        """Whether a row_sparse gradient updates only its own rows of `weight` and `state`
        (raw arrays or sparse containers). No by default: the rule runs on every row, which
        gives the dense result, as MXNet's storage fallback does."""
        return False

    def _step(self, xp, index, weight, grad, state, lr, wd):
        """One update on raw arrays, in place: `weight` and the arrays in `state` change."""
        raise NotImplementedError(f"{type(self).__name__} must define _step (or override "
                                  "update, as MXNet optimizers do)")

    def _legacy_multi_precision(self, index, weight, grad, state):
        """MXNet's protocol for subclasses that override `update` with NDArray arithmetic."""
        with autograd.pause():
            if not (self.multi_precision and weight.dtype == np.float16):
                return self.update(index, weight, grad, state)
            master, inner = self._split_master(state)
            self.update(index, master, grad.astype(np.float32), inner)
            weight._data[...] = master._data.astype(weight._data.dtype)

    def _check_inputs(self, index, weight, grad):
        where = f"{type(self).__name__} update of index {index!r}"
        for role, arr in (("weight", weight), ("grad", grad)):
            if not isinstance(arr, NDArray):
                raise OptimizerError(f"{where}: {role} must be an NDArray, "
                                     f"got {type(arr).__name__}")
        if weight.shape != grad.shape:
            raise ShapeError(f"{where}: grad shape {grad.shape} does not match weight shape "
                             f"{weight.shape}")
        if weight.dtype != grad.dtype:
            raise DTypeError(f"{where}: grad dtype {np.dtype(grad.dtype).name} does not match "
                             f"weight dtype {np.dtype(weight.dtype).name}; cast the gradient")
        if weight.context != grad.context:
            raise ContextError(f"{where}: weight is on {weight.context} but grad is on "
                               f"{grad.context}; move the gradient with as_in_context")

    def _check_step_lr(self, index, weight, lr):
        if lr < 0:
            raise OptimizerError(
                f"{type(self).__name__} update of index {index!r} (weight shape "
                f"{weight.shape}): learning rate is {lr}, must be >= 0; check learning_rate, "
                "lr_mult and the lr_scheduler")

    # ---- gradient preprocessing shared by the rules -------------------------------------
    def _clip_arg(self):
        """clip_gradient as the fused operators take it: -1 (off) unless set and positive."""
        return self.clip_gradient if self.clip_gradient else -1.0

    def _clip(self, xp, grad):
        """Clip `grad` in place to [-clip_gradient, clip_gradient] when clipping is on."""
        if self.clip_gradient is not None and self.clip_gradient > 0:
            xp.clip(grad, -self.clip_gradient, self.clip_gradient, out=grad)
        return grad

    def _rescaled(self, xp, grad):
        """A new array: `clip(rescale_grad * grad)`; the caller's gradient is left alone."""
        return self._clip(xp, grad * float(self.rescale_grad))

    def _rescaled_decayed(self, xp, grad, weight, wd):
        """A new array: `clip(rescale_grad * grad + wd * weight)`, weight decay before the
        clipping, as MXNet's Adam-family rules take it."""
        g = grad * float(self.rescale_grad)
        if wd:
            g += wd * weight
        return self._clip(xp, g)

    # ---- pickling (the Updater dumps the optimizer with its states) ---------------------
    def __getstate__(self):
        state = self.__dict__.copy()
        del state["param_dict"]       # Parameters belong to the model, not the checkpoint
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.param_dict = {}

    def __repr__(self):
        return f"{type(self).__name__}(learning_rate={self.learning_rate}, wd={self.wd})"


def _check_lr(owner, lr):
    if not isinstance(lr, (int, float, np.number)) or not lr >= 0:
        raise OptimizerError(f"{owner}: learning_rate must be a number >= 0, got {lr!r}")


def _sym_info(sym):
    if sym is None or not hasattr(sym, "attr_dict"):
        return ()
    return (sym.attr_dict(), sym.list_arguments())


def lazy_storage(weight, state):
    """MXNet's storage condition for a lazy update: the raw `weight` is dense or row_sparse
    and every array in `state` (raw, or a nested tuple; None agrees) has its storage type."""
    return stype_of(weight) in ("default", "row_sparse") and _same_stype(weight, state)


def _same_stype(weight, state):
    if isinstance(state, (tuple, list)):
        return all(_same_stype(weight, s) for s in state)
    return state is None or stype_of(state) == stype_of(weight)


def _plain(array_type, weight, grad, state):
    """True when weight, grad and each state are raw arrays of exactly `array_type` (or
    None): the dense path. Anything else (a sparse container, nested states) takes
    `_sparse_step`, which is right for dense arrays too, only slower. Exact type tests, as
    this runs on every dense step (isinstance against the container classes costs more)."""
    if type(weight) is not array_type or type(grad) is not array_type:
        return False
    if state is None or type(state) is array_type:
        return True
    if type(state) is not tuple:
        return False
    for s in state:
        if s is not None and type(s) is not array_type:
            return False
    return True


def _raw(state):
    """The raw arrays inside a state: None, an NDArray, or a (nested) tuple/list of them."""
    if isinstance(state, NDArray):
        return state._data
    if isinstance(state, (tuple, list)):
        return tuple([_raw(s) for s in state])     # a list is built faster than a generator
    return state


def _as_items(owner, index, weight, grad, state):
    """(index, weight, grad, state) tuples from one parameter or from parallel lists."""
    if not isinstance(index, (list, tuple)):
        return [(index, weight, grad, state)]
    lists = {"weight": weight, "grad": grad, "state": state}
    for role, value in lists.items():
        if not isinstance(value, (list, tuple)) or len(value) != len(index):
            got = len(value) if isinstance(value, (list, tuple)) else type(value).__name__
            raise OptimizerError(f"{owner} update of {len(index)} indices: {role} must be a "
                                 f"list of the same length, got {got}")
    return list(zip(index, weight, grad, state))


register = Optimizer.register
create = Optimizer.create_optimizer
