"""Trainer: applies an Optimizer to a set of Parameters, through a kvstore.

Each step sums every parameter's gradients over its devices and updates the weights:
either inside the kvstore (`update_on_kvstore=True`: push gradients, pull weights) or on
each device with its own Updater (`False`: push gradients, pull their sum, update every
copy identically). The Trainer reaches the values only through `kvstore.init/push/pull`
and the Optimizer/Updater, so every kvstore (local, device, distributed) plugs in alike.

Sparse parameters, as in MXNet: a row_sparse weight (`stype='row_sparse'`) lives in the
kvstore, which updates it; a device reads the rows it needs with `row_sparse_pull`
(`Parameter.row_sparse_data`). A row_sparse gradient (`grad_stype='row_sparse'`, e.g.
`nn.Embedding(sparse_grad=True)`) is pushed as such, so only the rows it stores change.

With minigluon-launch --max-restarts, a replacement worker resumes the job: where the
servers update it pulls the weights; where the workers update (update_on_kvstore=False)
it copies a surviving worker's weights and optimizer states (trainer_state.py,
kvstore/statecopy.py, docs/restarts.md).

On a distributed kvstore, gradients are pushed while backward runs (overlap.py,
docs/overlap.md): each parameter's as soon as backward has made it final, and its new
value is pulled before the next forward reads it. The parameters after each step are
bit-identical to those without overlap; `overlap=False` or MINIGLUON_OVERLAP=0 turns it
off.

Out of scope: AMP loss scaling.
"""
from .. import autograd
from .. import config
from .. import kvstore as kvs
from .. import optimizer as opt
from ..base import MXNetError
from ..kvstore.modes import mode_of
from .. import telemetry
from ..ndarray import NDArray
from .overlap import GradientOverlap, OverlapError
from .parameter import Parameter, ParameterDict
from . import trainer_state

__all__ = ["Trainer", "StaleGradientError", "UpdateOnKVStoreError", "OverlapError"]


class StaleGradientError(MXNetError, UserWarning):
    """A parameter's gradient was not written by backward since the last step."""


class UpdateOnKVStoreError(MXNetError, AssertionError):
    """`update()` or `allreduce_grads()` called while the kvstore runs the optimizer (an
    AssertionError, as MXNet raises it)."""


class Trainer:
    """Applies an Optimizer on a set of Parameters; call `step` after `backward`.

    Parameters
    ----------
    params : ParameterDict, dict of str to Parameter, or list of Parameter
        The parameters to optimize (a dict is taken in sorted key order).
    optimizer : str or Optimizer
        The optimizer's name (with `optimizer_params`) or an Optimizer instance.
    optimizer_params : dict, optional
        Keyword arguments of the named optimizer, e.g. `{'learning_rate': 0.1}`.
    kvstore : str, KVStore or None
        How gradients are summed over devices: 'device' (the default), 'local', a kvstore
        object, or None (the Trainer sums them itself). One device and no 'dist' store
        needs no kvstore, and then none is created.
    compression_params : dict, optional
        Gradient compression for the kvstore, e.g. `{'type': '2bit', 'threshold': 0.5}`.
    update_on_kvstore : bool, optional
        Run the optimizer in the kvstore (True) or on every device (False). By default,
        as in MXNet: `MXNET_UPDATE_ON_KVSTORE` (1) for dense parameters, except 'local'
        with a parameter above 16M elements; for row_sparse gradients only on a dist
        store; always for row_sparse weights and dist_async; never for a kvstore without
        the 'optimizer' capability (e.g. a registered KVStoreBase such as 'teststore').
    overlap : bool, optional
        On a synchronous distributed kvstore, push each gradient while backward still runs and pull
        its new value before the next forward reads it (results are bit-identical to
        False, see docs/overlap.md). Default: MINIGLUON_OVERLAP (on). Local stores
        ignore it.

    >>> trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
    >>> with autograd.record():
    ...     loss = loss_fn(net(x), y)
    >>> loss.backward()
    >>> trainer.step(batch_size)
    """

    def __init__(self, params, optimizer, optimizer_params=None, kvstore="device",
                 compression_params=None, update_on_kvstore=None, overlap=None):
        self._params = _param_list(params)
        self._param2idx = {id(p): i for i, p in enumerate(self._params)}
        for param in self._params:
            _check_initialized(param, "creating the Trainer")
            param._set_trainer(self)
        self._num_devices = max((len(p.list_ctx()) for p in self._params), default=1)
        self._init_optimizer(optimizer, optimizer_params)
        self._scale = self._optimizer.rescale_grad
        if kvstore is not None and not isinstance(kvstore, (str, kvs.KVStoreBase)):
            raise MXNetError(f"kvstore must be a str such as 'device', a KVStore or None, "
                             f"got {type(kvstore).__name__}")
        self._kvstore_params = {"kvstore": kvstore, "update_on_kvstore": update_on_kvstore}
        self._overlap_wanted = config.overlap() if overlap is None else bool(overlap)
        self._overlap = None        # a GradientOverlap while a dist store is in use
        self._compression_params = compression_params
        self._kv_initialized = False
        self._kvstore = None
        self._update_on_kvstore = None
        self._distributed = False
        self._params_to_init = self._params_in_store()
        self._rescale_pending = False    # a replacement's servers already have the factor
        self._steps = 0                  # steps of this worker's rank (updates applied)
        self._restored = None            # a replacement's weights copied from a survivor
        self._offering = False           # replacements may copy this worker's state
        step = self._resume_step() if config.restart_count() else 0
        if step:
            self._resume_from_store(step)

    def _resume_step(self):
        """The steps this worker's rank finished before this process replaced it: its
        store's (or, for a store named by a string, the one the script created first)."""
        store = self._kvstore_params["kvstore"]
        if isinstance(store, kvs.KVStoreBase):
            return store.resume_state().step
        return kvs.resume_state().step

    def _resume_from_store(self, step):
        """A replacement worker (minigluon-launch --max-restarts, docs/restarts.md) whose
        rank made `step` steps must compute its next one on the job's current weights,
        not on its own initial values: the store is set up now, and each parameter gets
        them as soon as it has a shape (for a deferred one, inside the first forward).
        Where the servers update, it pulls them, and the servers keep the optimizer and
        the rescale factor the job started with. Where the workers update, the weights
        and the optimizer's states are copied from a surviving worker (statecopy.py).
        (At step 0 it starts as the lost process did.)"""
        self._steps = step
        self._rescale_pending = True
        self._init_kvstore()
        if self._distributed and not self._update_on_kvstore:
            self._copy_survivor_state(step)
        self._prepare()
        for i in self._params_to_init:
            self._params[i]._when_ready.append(lambda _param: self._prepare())

    def _copy_survivor_state(self, step):
        """The weights and optimizer states after `step` from a surviving worker: the
        states now, each weight when its parameter has a shape (`_init_params`)."""
        weights, states = trainer_state.unpack(self._kvstore.fetch_state(step), step)
        self._set_updater_states(states)
        self._restored = weights

    def _state_after(self, step):
        """This worker's training state after `step` steps as bytes, for a replacement
        (kvstore.offer_state); None until this Trainer made them."""
        if self._steps < step or self._restored:    # (a replacement still restoring)
            return None
        if self._steps > step:
            raise MXNetError(f"a replacement asked for the training state after step "
                             f"{step}, but this worker made {self._steps} steps already "
                             "(did the job run steps that do not push every parameter?)")
        weights = {i: p._data[0] for i, p in self._trainable()}
        return trainer_state.pack(step, weights, self._updaters[0])

    def _restore(self, i, param):
        """Give a replacement's parameter the weight copied from a survivor."""
        value = self._restored.pop(i, None)
        if value is None or tuple(value.shape) != tuple(param.shape):
            found = "none" if value is None else f"shape {tuple(value.shape)}"
            raise MXNetError(f"Parameter {param.name!r} (index {i}) has shape "
                             f"{tuple(param.shape)}, but the training state copied from a "
                             f"surviving worker holds {found} for it; every worker must "
                             "train the same network with the same Trainer parameters")
        with autograd.pause():
            for arr in param._data:
                arr[:] = value

    def _reset_kvstore(self):
        """Forget the kvstore; the next step creates it again from the parameters' current
        values. A distributed store cannot be reset (the other workers keep using it)."""
        if self._kvstore is not None and self._distributed:
            raise MXNetError(f"cannot reset the distributed {self._kvstore.type!r} kvstore: "
                             "the other workers and the servers keep its weights. Load "
                             "parameters before creating the Trainer")
        self._keep_sparse_weights()
        self._wait_pulls()
        if self._overlap is not None:
            self._overlap.remove()
            self._overlap = None
        self._kv_initialized = False
        self._kvstore = None
        self._distributed = False
        self._update_on_kvstore = None
        self._params_to_init = self._params_in_store()

    def _keep_sparse_weights(self):
        """A row_sparse weight lives in the store, and its device copies hold only the
        rows last pulled: before the store goes, every row comes back to them (the new
        store starts from them)."""
        if self._kvstore is None:
            return
        for i, param in enumerate(self._params):
            if param.stype != "default" and param._data is not None \
                    and i not in self._params_to_init:
                self._kvstore.pull(i, out=param._data, priority=-i, ignore_sparse=False)

    def _on_param_loaded(self, param):
        """`param` gets new values from a file: a store that holds the weights (update on
        kvstore) would overwrite them with its own, so it is rebuilt."""
        index = next(i for i, p in enumerate(self._params) if p is param)
        if self._kv_initialized and self._update_on_kvstore \
                and index not in self._params_to_init:
            self._reset_kvstore()

    def _init_optimizer(self, optimizer, optimizer_params):
        param_dict = dict(enumerate(self._params))
        if isinstance(optimizer, opt.Optimizer):
            if optimizer_params:
                raise MXNetError(
                    "optimizer_params must be None when optimizer is an Optimizer instance; "
                    "give the hyperparameters to the instance (e.g. mx.optimizer.SGD("
                    "learning_rate=0.1)) or pass the optimizer by name")
            self._optimizer = optimizer
            # shared, not copied: later changes of a parameter's lr_mult/wd_mult take effect
            self._optimizer.param_dict = param_dict
        else:
            self._optimizer = opt.create(optimizer, param_dict=param_dict,
                                         **(optimizer_params or {}))
        self._updaters = [opt.get_updater(self._optimizer) for _ in range(self._num_devices)]

    def _trainable(self):
        return [(i, p) for i, p in enumerate(self._params) if p.grad_req != "null"]

    def _params_in_store(self):
        """The indices of the parameters a kvstore holds: the trained ones, and every
        row_sparse weight (which is read from the store)."""
        return [i for i, p in enumerate(self._params)
                if p.grad_req != "null" or p.stype != "default"]

    # ---- kvstore setup (lazy: deferred parameters get their shapes in the first forward) --
    def _init_kvstore(self):
        if self._kv_initialized:
            return
        sparse_weight = any(p.stype != "default" for p in self._params)
        kvstore = _create_kvstore(self._kvstore_params["kvstore"], self._num_devices,
                                  sparse_weight)
        if kvstore is not None:
            mode = mode_of(kvstore.type)
            self._distributed = mode.distributed
            self._update_on_kvstore = self._updates_in_store(kvstore, mode)
            if self._compression_params:
                kvstore.set_gradient_compression(self._compression_params)
            if self._update_on_kvstore:
                kvstore.set_optimizer(self._optimizer)
            elif config.max_restarts() and hasattr(kvstore, "offer_state"):
                # the workers hold the weights and states: a replacement copies them
                kvstore.offer_state(self._state_after)
                self._offering = True
            # dist_sync only: under dist_async the overlap measurably hurt convergence
            # (docs/overlap.md), and it has no bit-identical twin to be checked against
            if self._overlap_wanted and mode.distributed and mode.sync and \
                    hasattr(kvstore, "push_pull_later"):
                self._overlap = GradientOverlap(self._params, kvstore,
                                                pull_weights=self._update_on_kvstore)
        self._kvstore = kvstore
        self._kv_initialized = True

    def _updates_in_store(self, kvstore, mode):
        """update_on_kvstore: whether the optimizer runs in `kvstore` (True) or on every
        device (False). The one place the Trainer decides it, with MXNet's rules: asked
        for, else the default of the parameters' kind; a store that must update (servers
        applying each push, row_sparse weights) refuses False; a store that cannot run an
        optimizer refuses True; a layer-wise optimizer cannot run on servers that each
        hold a slice of a parameter."""
        requested = self._kvstore_params["update_on_kvstore"]
        must, why = self._store_must_update(mode)
        if must and requested is False:
            raise kvs.KVStoreError(f"update_on_kvstore=False does not work here: {why}; "
                                   "pass update_on_kvstore=True or leave it unset")
        in_store = True if must else \
            bool(requested) if requested is not None else self._default_in_store(mode)
        if in_store and not kvstore.is_capable(kvs.KVStoreBase.OPTIMIZER):
            if requested:
                raise kvs.KVStoreError(
                    f"update_on_kvstore=True needs a kvstore that can run the optimizer, but "
                    f"{type(kvstore).__name__} ({kvstore.type!r}) cannot; pass "
                    "update_on_kvstore=False or leave it unset")
            in_store = False
        if in_store and mode.distributed:
            in_store = self._check_layerwise(kvstore, mode, requested)
        return in_store

    def _store_must_update(self, mode):
        """(True, why) when only the store can run the optimizer."""
        if mode.store_must_update:
            return True, f"the {mode.name!r} kvstore updates on the servers as pushes arrive"
        if any(p.stype != "default" for p in self._params):
            return True, "row_sparse weights are updated in the kvstore"
        if mode.distributed and self._sparse_grad():
            return True, f"row_sparse gradients on the {mode.name!r} kvstore are applied there"
        return False, ""

    def _sparse_grad(self):
        return any(p.grad_stype != "default" for p in self._params)

    def _default_in_store(self, mode):
        if self._sparse_grad():    # only distributed stores take them (_store_must_update)
            return False
        if not config.env_flag("MXNET_UPDATE_ON_KVSTORE", True):
            return False
        name = self._kvstore_params["kvstore"]
        limit = mode_of(name).device_updates_above if isinstance(name, str) else None
        if limit is None:          # a store the user made, or a mode without a size rule
            return True
        sizes = [p._data[0].size for p in self._params if not p._deferred_init]
        return max(sizes, default=0) <= limit

    def _check_layerwise(self, kvstore, mode, requested):
        """update_on_kvstore for a layer-wise optimizer (LAMB, LARS) on a dist store: the
        servers can run it only when no parameter is split over several of them."""
        if not self._optimizer.layerwise:
            return True
        split = [p.name for p in self._params
                 if not p._deferred_init and getattr(kvstore, "splits", lambda n: False)(
                     p._data[0].size)]
        if not split:
            return True
        name = type(self._optimizer).__name__
        if requested or mode.store_must_update:
            raise MXNetError(
                f"{name} needs each parameter whole (it scales by the weight's norm), but "
                f"the {kvstore.type!r} kvstore splits {split[:3]} over its servers, which "
                "would each see a slice; use dist_sync with update_on_kvstore=False (the "
                "default for it), one server, or MXNET_KVSTORE_BIGARRAY_BOUND above the "
                "largest parameter's size")
        return False           # the servers sum; every worker runs the optimizer itself

    def _init_params(self):
        """Give the kvstore each parameter's value and make all device copies equal it."""
        waiting = []
        for i in self._params_to_init:
            param = self._params[i]
            if param._deferred_init:
                waiting.append(i)
            elif self._kvstore is not None and param.stype != "default":
                # the store keeps the weight; devices pull the rows they use
                self._kvstore.init(i, param._data[0])
            elif self._restored is not None:
                # the key's layout; the servers hold sums of gradients, not weights
                self._kvstore.init(i, param._data[0])
                self._restore(i, param)
            elif self._kvstore is not None:
                data = param._data
                self._kvstore.broadcast(i, data[0], out=data, priority=-i)
        self._params_to_init = waiting

    def _row_sparse_pull(self, param, out, row_id, full_idx=False):
        """Copy the rows `row_id` of row_sparse `param` from the kvstore into `out` (one
        array or a list); with `full_idx` (every row) a plain pull of a local store."""
        self._prepare()
        i = self._param2idx.get(id(param))
        if i is None:
            raise MXNetError(f"Parameter {param.name!r} is not one of this Trainer's "
                             "parameters")
        if full_idx and not self._distributed:
            self._kvstore.pull(i, out=out, priority=-i, ignore_sparse=False)
        else:
            self._kvstore.row_sparse_pull(i, out=out, row_ids=row_id, priority=-i)

    def _prepare(self):
        if not self._kv_initialized:
            self._init_kvstore()
        if self._params_to_init:
            self._init_params()
        if self._overlap is not None:
            waiting = set(self._params_to_init)
            self._overlap.install(i for i, _ in self._trainable() if i not in waiting)

    # ---- public API ---------------------------------------------------------------------
    @property
    def learning_rate(self):
        """The optimizer's current learning rate."""
        return self._optimizer.learning_rate

    def set_learning_rate(self, lr):
        """Set the optimizer's learning rate (not allowed with an lr_scheduler); momenta
        and other states are kept. With update_on_kvstore, the kvstore's optimizer (on
        the servers of a dist store) gets it too.

        >>> trainer.set_learning_rate(trainer.learning_rate * 0.1)
        """
        if self._update_on_kvstore:
            self._settle("set_learning_rate")
            self._kvstore.set_learning_rate(lr)
        self._optimizer.set_learning_rate(lr)

    def _settle(self, what):
        """Before a call that reads or changes the servers' optimizer: every update of the
        last step applied there (its pulls answered), and none of the next one pushed
        yet (overlap could not tell on which side of the call the servers apply it)."""
        if self._overlap is not None and self._overlap.pushing():
            raise OverlapError(
                f"trainer.{what}() between backward and trainer.step(): overlap already "
                "pushed some of this step's gradients, and the servers may apply them "
                f"before or after the {what}; call it before the forward pass or after "
                "step, or switch overlap off (overlap=False or MINIGLUON_OVERLAP=0)")
        self._wait_pulls()

    @property
    def optimizer(self):
        """The Optimizer that updates the parameters."""
        return self._optimizer

    def step(self, batch_size, ignore_stale_grad=False):
        """One update: sum gradients over devices, then apply the optimizer with
        `rescale_grad = scale / batch_size` (call it after `loss.backward()`).

        A gradient that backward did not write since the last step is an error unless
        `ignore_stale_grad=True`, which skips that parameter copy instead.
        """
        self._check_and_rescale_grad(self._scale / batch_size)
        self._prepare()
        self._check_ready("step")
        self._wait_pulls()           # a value pulled at the last step that nobody read
        self._check_fresh(ignore_stale_grad)     # before the store applies any update
        telemetry.worker().add_samples(batch_size)  # before the pushes that end the step
        self._allreduce_grads()
        self._update()

    def allreduce_grads(self):
        """Sum each parameter's gradients over its devices (then call `update`); for
        gradient clipping between the two. Needs update_on_kvstore=False."""
        self._prepare()
        self._check_not_on_kvstore("allreduce_grads")
        self._check_ready("allreduce_grads")
        self._allreduce_grads()

    def update(self, batch_size, ignore_stale_grad=False):
        """Apply the optimizer to gradients already summed by `allreduce_grads`.
        Needs update_on_kvstore=False."""
        self._prepare()
        self._check_not_on_kvstore("update")
        self._check_ready("update")
        self._check_fresh(ignore_stale_grad)
        telemetry.worker().add_samples(batch_size)
        self._check_and_rescale_grad(self._scale / batch_size)
        self._update()

    def save_states(self, fname):
        """Save the optimizer and its states (momenta, update counts...) to `fname`."""
        self._prepare()
        if self._update_on_kvstore:
            self._settle("save_states")
            if self._params_to_init:
                raise MXNetError("save_states: some parameters are still waiting for "
                                 "deferred initialization; run a training step first")
            self._kvstore.save_optimizer_states(fname, dump_optimizer=True)
            return
        with open(fname, "wb") as fout:
            fout.write(self._updaters[0].get_states(dump_optimizer=True))

    def load_states(self, fname):
        """Load what `save_states` wrote; training continues exactly where it stopped."""
        self._prepare()
        if self._update_on_kvstore:
            self._settle("load_states")
            self._kvstore.load_optimizer_states(fname)
            self._optimizer = self._kvstore.optimizer
        else:
            with open(fname, "rb") as fin:
                self._set_updater_states(fin.read())
        self._optimizer.param_dict = dict(enumerate(self._params))

    def _set_updater_states(self, states):
        """Every device's Updater takes `states` (Updater.get_states bytes with the
        optimizer), and they share its optimizer."""
        for updater in self._updaters:
            updater.set_states(states)
            updater.optimizer = self._updaters[0].optimizer
        self._optimizer = self._updaters[0].optimizer
        self._optimizer.param_dict = dict(enumerate(self._params))

    # ---- one step ------------------------------------------------------------------------
    def _check_and_rescale_grad(self, scale):
        if self._rescale_pending:        # a replacement's first step
            self._rescale_pending = False
        elif self._update_on_kvstore and self._distributed and self._kv_initialized \
                and self._optimizer.rescale_grad != scale:
            raise MXNetError("the batch size changed since the last step, but with "
                             "update_on_kvstore=True on a distributed kvstore the servers "
                             "keep the first rescale factor; keep the batch size constant")
        self._optimizer.rescale_grad = scale

    def _check_not_on_kvstore(self, what):
        if self._update_on_kvstore:
            raise UpdateOnKVStoreError(f"{what}() is not supported when the parameters are updated in "
                             "the kvstore; create the Trainer with update_on_kvstore=False")

    def _check_ready(self, what):
        if self._params_to_init:
            name = self._params[self._params_to_init[0]].name
            raise MXNetError(
                f"Parameter {name!r} is still waiting for deferred initialization at "
                f"trainer.{what}(); call initialize() on the network and run a forward pass "
                f"(which gives the parameters their shapes) before trainer.{what}()")

    def _check_fresh(self, ignore_stale_grad):
        if ignore_stale_grad:
            return
        for _, param in self._trainable():
            for arr in param._data:
                if not _grad_is_fresh(arr):
                    raise _stale_error(param, arr.context)

    def _wait_pulls(self):
        for _, param in self._trainable():
            param._wait_pull()

    def _allreduce_grads(self):
        early = self._overlap.end_round() if self._overlap is not None else {}
        for i, param in self._trainable():
            grads = param.list_grad()
            if i in early:
                if self._update_on_kvstore:
                    param._pull_later(early[i])     # Parameter.data() waits for it
                else:
                    early[i].wait()                 # the sum, into the gradients
            elif self._kvstore is None:
                _sum_over_devices(grads)
            elif self._update_on_kvstore:
                self._kvstore.push(i, grads, priority=-i)
            elif grads[0].stype != "default":
                # the sum stays row_sparse: pull it back into the row_sparse gradients
                self._kvstore.push(i, grads, priority=-i)
                self._kvstore.pull(i, grads, priority=-i, ignore_sparse=False)
            else:
                self._kvstore.pushpull(i, grads, out=grads, priority=-i)

    def _update(self):
        if self._update_on_kvstore:
            for i, param in self._trainable():
                if param.stype == "default" and param._pending_pull is None:
                    # row_sparse weights are pulled by rows; early pushes pulled already
                    self._kvstore.pull(i, param._data, priority=-i)
                for arr in param._data:
                    _mark_grad_stale(arr)
            if self._distributed:
                # the servers' copy of the optimizer counts the updates; count them here too
                # so `learning_rate` follows an lr_scheduler as it does on the servers
                self._optimizer._update_count([i for i, _ in self._trainable()])
            self._steps += 1
            return
        per_device = [[] for _ in self._updaters]
        for i, param in self._trainable():
            for todo, arr, grad in zip(per_device, param._data, param.list_grad()):
                if _grad_is_fresh(arr):    # stale here only with ignore_stale_grad: skip it
                    todo.append((i, grad, arr))
                _mark_grad_stale(arr)
        for updater, todo in zip(self._updaters, per_device):
            if todo:
                indices, grads, weights = zip(*todo)
                updater(list(indices), list(grads), list(weights))
        self._steps += 1
        if self._offering:          # a replacement may wait for the state after this step
            self._kvstore.answer_state_asks()


def _param_list(params):
    if isinstance(params, (dict, ParameterDict)):
        params = [params[key] for key in sorted(params.keys())]
    if not isinstance(params, (list, tuple)):
        raise MXNetError("Trainer: params must be a ParameterDict, a dict or a list of "
                         f"Parameters, got {type(params).__name__}")
    seen = set()
    for param in params:
        if not isinstance(param, Parameter):
            raise MXNetError("Trainer: params must hold Parameters, got a "
                             f"{type(param).__name__}; pass net.collect_params()")
        if id(param) in seen:
            raise MXNetError(f"Trainer: Parameter {param.name!r} is listed twice; each "
                             "parameter may appear once")
        seen.add(id(param))
    return list(params)


def _check_initialized(param, when):
    if param._data is None and not param._deferred_init:
        raise MXNetError(
            f"Parameter {param.name!r} has not been initialized; call initialize() (e.g. "
            f"net.initialize(ctx=...) or net.collect_params().initialize()) before {when}")


def _create_kvstore(kvstore, num_devices, sparse_weight=False):
    """The kvstore the Trainer uses, or None, with MXNet's rules: one device needs none
    unless the store is distributed or holds row_sparse weights."""
    if isinstance(kvstore, kvs.KVStoreBase):
        return kvstore
    if kvstore is None:
        if sparse_weight:
            raise kvs.KVStoreError(
                "kvstore=None does not work with row_sparse weights: they live in a "
                "kvstore, which updates them; pass kvstore='device' (or 'local', or a "
                "KVStore)")
        return None
    if num_devices == 1 and not sparse_weight and not mode_of(kvstore).distributed:
        return None
    return kvs.create(kvstore)


def _sum_over_devices(grads):
    """Without a kvstore: every device's gradient becomes the sum over the devices."""
    if len(grads) == 1:
        return
    with autograd.pause():
        total = grads[0].copy()
        for grad in grads[1:]:
            total += grad.as_in_context(total.context)
        for grad in grads:
            total.copyto(grad)


# Freshness: autograd.backward marks an array's `_fresh_grad` when it writes its gradient;
# the Trainer clears it after each update. NDArray builds without the flag skip the check.
_TRACKS_FRESHNESS = hasattr(NDArray, "_fresh_grad")


def _grad_is_fresh(arr):
    return bool(getattr(arr, "_fresh_grad", True)) if _TRACKS_FRESHNESS else True


def _mark_grad_stale(arr):
    if _TRACKS_FRESHNESS:
        arr._fresh_grad = False


def _stale_error(param, ctx):
    return StaleGradientError(
        f"the gradient of Parameter {param.name!r} on {ctx} has not been updated by "
        "backward since the last step. Either the network did not use this parameter in "
        "the forward pass (then call step with ignore_stale_grad=True to skip it), or no "
        f"data was computed on {ctx}: split each batch over every context the parameters "
        "were initialized on (gluon.utils.split_and_load(batch, ctx_list)), or initialize "
        "them only on the contexts you use")
