"""Module: MXNet 1.x's symbolic training API (`mx.mod.Module`) on one device.

A Module binds a Symbol to arrays: the arguments named in `data_names` and `label_names`
are fed from each DataBatch, the other arguments are the parameters, which it creates,
initializes, differentiates and updates with an optimizer.

>>> mod = mx.mod.Module(loss_sym, data_names=('data',), label_names=('label',))
>>> mod.fit(train_iter, num_epoch=10, optimizer='adam', eval_metric=mx.metric.Loss())
>>> mod.save_checkpoint('net', 10)

Out of scope: several devices or a context list (one device only), kvstores (updates run
in the module), bucketing and sequential modules, sparse parameters, monitors.
"""
import logging

from .. import initializer as init_mod
from .. import ndarray as nd
from .. import optimizer as opt_mod
from ..base import MXNetError
from ..context import cpu
from . import checkpoint
from .base_module import BaseModule

__all__ = ["Module"]

_AUX_SUFFIXES = ("moving_mean", "moving_var", "running_mean", "running_var")


def _names(value, what):
    if value is None:
        return []
    if isinstance(value, str) or not all(isinstance(n, str) for n in value):
        raise MXNetError(f"Module: {what} must be a list or tuple of str, got {value!r}")
    return list(value)


def _shape_dict(shapes):
    """{name: shape} from [(name, shape)] pairs or DataDescs."""
    return {desc[0]: tuple(desc[1]) for desc in shapes or []}


class Module(BaseModule):
    """A Symbol bound for training or inference on one device.

    Parameters
    ----------
    symbol : Symbol
        The network; its outputs are the module's outputs (a loss for training).
    data_names, label_names : list of str
        The arguments fed from `DataBatch.data` and `DataBatch.label`; None means none.
    context : Context
        The device (default cpu()); a list must hold exactly one.
    fixed_param_names : list of str
        Parameters that keep their values (no gradient, no update).
    state_names : list of str
        Arguments set by the caller (`set_states`) and never updated.
    """

    def __init__(self, symbol, data_names=("data",), label_names=("softmax_label",),
                 logger=logging, context=None, work_load_list=None, fixed_param_names=None,
                 state_names=None, group2ctxs=None, compression_params=None):
        super().__init__(logger)
        self._symbol = symbol
        self._context = _one_context(context)
        self._data_names = _names(data_names, "data_names")
        self._label_names = _names(label_names, "label_names")
        self._state_names = _names(state_names, "state_names")
        self._fixed_param_names = _names(fixed_param_names, "fixed_param_names")
        self._check_names(symbol.list_arguments())
        inputs = set(self._data_names + self._label_names + self._state_names)
        others = [n for n in symbol.list_arguments() if n not in inputs]
        self._aux_names = [n for n in others if n.endswith(_AUX_SUFFIXES)]
        self._param_names = [n for n in others if n not in self._aux_names]
        self._arg_params = self._aux_params = None
        self._exec = None
        self._optimizer = self._updater = None
        self._preload_opt_states = None
        self._data_shapes = self._label_shapes = None

    def _check_names(self, arguments):
        for what, names in (("data_names", self._data_names),
                            ("label_names", self._label_names),
                            ("state_names", self._state_names)):
            unknown = [n for n in names if n not in arguments]
            if unknown and what != "label_names":
                raise MXNetError(f"Module: {what} {unknown} are not arguments of the symbol; "
                                 f"its arguments are {arguments}")
        self._label_names = [n for n in self._label_names if n in arguments]

    # ---- names and shapes ---------------------------------------------------------------
    symbol = property(lambda self: self._symbol, doc="The bound Symbol.")
    data_names = property(lambda self: list(self._data_names))
    label_names = property(lambda self: list(self._label_names))
    output_names = property(lambda self: self._symbol.list_outputs())
    data_shapes = property(lambda self: self._data_shapes)
    label_shapes = property(lambda self: self._label_shapes)

    @property
    def output_shapes(self):
        """[(name, shape)] of the outputs of the last forward."""
        return list(zip(self.output_names, [o.shape for o in self._exec.outputs]))

    # ---- bind -----------------------------------------------------------------------------
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        """Allocate the arrays for inputs of these shapes: parameters (with gradients when
        `for_training`), data and labels.

        >>> mod.bind(data_shapes=[('data', (32, 10))], label_shapes=[('label', (32,))])
        """
        if self.binded and not force_rebind:
            self.logger.warning("Module.bind: already bound; pass force_rebind=True to rebind")
            return
        if self._exec is not None and self.params_initialized:
            self._arg_params, self._aux_params = self.get_params()   # carried to the new arrays
        shapes = {**_shape_dict(data_shapes), **_shape_dict(label_shapes)}
        arg_shapes, _, _ = self._symbol.infer_shape(**shapes)
        if arg_shapes is None:
            raise MXNetError(f"Module.bind: cannot infer every argument's shape from {shapes}; "
                             f"the arguments are {self._symbol.list_arguments()}")
        shape_of = dict(zip(self._symbol.list_arguments(), arg_shapes))
        args = {n: nd.zeros(s, ctx=self._context) for n, s in shape_of.items()}
        grads = {}
        if for_training:
            trained = [n for n in self._param_names if n not in self._fixed_param_names]
            trained += self._data_names if inputs_need_grad else []
            grads = {n: nd.zeros(shape_of[n], ctx=self._context) for n in trained}
        self._exec = self._symbol.bind(self._context, args, args_grad=grads, grad_req=grad_req)
        self._data_shapes = [(n, shapes[n]) for n in self._data_names]
        self._label_shapes = [(n, shapes[n]) for n in self._label_names if n in shapes]
        self.binded, self.for_training = True, for_training
        self.inputs_need_grad = inputs_need_grad
        if self.params_initialized:
            self._copy_params_in(self._arg_params, self._aux_params)

    # ---- parameters -----------------------------------------------------------------------
    def init_params(self, initializer=None, arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Fill the parameters: from `arg_params` / `aux_params` where given, else with
        `initializer` (default Uniform(0.01)), which a variable's own `init=` overrides."""
        if self.params_initialized and not force_init:
            return
        self._require("init_params")
        initializer = init_mod.Uniform(0.01) if initializer is None else initializer
        attrs = self._symbol.attr_dict()
        for names, given in ((self._param_names, arg_params), (self._aux_names, aux_params)):
            for name in names:
                self._fill(name, given, initializer, attrs, allow_missing)
        self._check_extra(arg_params, aux_params, allow_extra)
        self.params_initialized = True

    def _fill(self, name, given, initializer, attrs, allow_missing):
        """Copy `name` from the `given` dict, or initialize it when no dict is given (or,
        with allow_missing, when the dict lacks it)."""
        target = self._exec.arg_dict[name]
        if given is not None and name in given:
            value = given[name]
            if value.shape != target.shape:
                raise MXNetError(f"Module.init_params: {name!r} has shape {value.shape}, the "
                                 f"bound network needs {target.shape}")
            target[:] = value.as_in_context(target.context)
            return
        if given is not None and not allow_missing:
            raise MXNetError(f"Module.init_params: {name!r} is missing from the given "
                             "parameters; pass it, or allow_missing=True to initialize it")
        if initializer is not None:
            initializer(init_mod.InitDesc(name, attrs.get(name)), target)

    def _check_extra(self, arg_params, aux_params, allow_extra):
        known = set(self._param_names) | set(self._aux_names)
        extra = [n for n in list(arg_params or {}) + list(aux_params or {}) if n not in known]
        if extra and not allow_extra:
            raise MXNetError(f"Module.init_params: {extra} are not parameters of the network; "
                             "pass allow_extra=True to ignore them")

    def get_params(self):
        """(arg_params, aux_params): copies of the current parameters, by name."""
        self._require("get_params", params=True)
        copy = {n: self._exec.arg_dict[n].copy() for n in self._param_names}
        aux = {n: self._exec.arg_dict[n].copy() for n in self._aux_names}
        return copy, aux

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Copy `arg_params` / `aux_params` into the parameters."""
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init,
                         allow_extra=allow_extra)

    def _copy_params_in(self, arg_params, aux_params):
        for name, value in {**(arg_params or {}), **(aux_params or {})}.items():
            if name in self._exec.arg_dict:
                self._exec.arg_dict[name][:] = value

    # ---- optimizer --------------------------------------------------------------------------
    def init_optimizer(self, kvstore="local", optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01),), force_init=False):
        """Create the optimizer (a name or an Optimizer) and its updater. Unless given,
        `rescale_grad` is 1 / batch size, so gradients summed over a batch average out."""
        self._require("init_optimizer", params=True)
        if self.optimizer_initialized and not force_init:
            self.logger.warning("Module.init_optimizer: already initialized; pass "
                                "force_init=True to replace the optimizer")
            return
        if isinstance(optimizer, str):
            params = dict(optimizer_params)
            params.setdefault("rescale_grad", 1.0 / self._batch_size())
            optimizer = opt_mod.create(optimizer, sym=self._symbol, param_idx2name=dict(
                enumerate(self._param_names)), **params)
        elif not isinstance(optimizer, opt_mod.Optimizer):
            raise MXNetError(f"Module.init_optimizer: optimizer must be a name or an "
                             f"Optimizer, got {type(optimizer).__name__}")
        self._optimizer = optimizer
        self._updater = opt_mod.get_updater(optimizer)
        self.optimizer_initialized = True
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def _batch_size(self):
        return self._data_shapes[0][1][0] if self._data_shapes else 1

    # ---- computation ------------------------------------------------------------------------
    def forward(self, data_batch, is_train=None):
        """Run the network on `data_batch` (its data and, when bound, its labels)."""
        self._require("forward", params=True)
        is_train = self.for_training if is_train is None else is_train
        feed = dict(zip(self._data_names, data_batch.data))
        if data_batch.label is not None:
            feed.update(zip(self._label_names, data_batch.label))
        missing = [n for n in self._data_names if n not in feed]
        if missing:
            raise MXNetError(f"Module.forward: the batch has {len(data_batch.data)} data "
                             f"arrays, data_names are {self._data_names}")
        self._exec.forward(is_train=is_train, **feed)

    def backward(self, out_grads=None):
        """Gradients of the outputs (heads of ones when `out_grads` is None)."""
        self._require("backward", params=True)
        if not self.for_training:
            raise MXNetError("Module.backward: bound with for_training=False; rebind with "
                             "for_training=True to compute gradients")
        self._exec.backward(out_grads)

    def update(self):
        """One optimizer step of every trained parameter, from the last backward."""
        self._require("update", params=True, optimizer=True)
        for index, name in enumerate(self._param_names):
            grad = self._exec.grad_dict.get(name)
            if grad is not None:
                self._updater(index, grad, self._exec.arg_dict[name])

    def get_outputs(self, merge_multi_context=True):
        """The outputs of the last forward, a list of NDArrays."""
        return list(self._exec.outputs)

    def get_input_grads(self, merge_multi_context=True):
        """Gradients of the data inputs (bind with inputs_need_grad=True)."""
        if not self.inputs_need_grad:
            raise MXNetError("Module.get_input_grads: bind with inputs_need_grad=True")
        return [self._exec.grad_dict[n] for n in self._data_names]

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Feed the batch's labels and the last outputs to `eval_metric`."""
        eval_metric.update(labels, self.get_outputs())

    # ---- checkpoints ------------------------------------------------------------------------
    def save_checkpoint(self, prefix, epoch, save_optimizer_states=False,
                        remove_amp_cast=True):
        """Write `prefix-symbol.json`, `prefix-EPOCH.params` and, if asked, `.states`."""
        checkpoint.save_checkpoint(prefix, epoch, self._symbol, *self.get_params())
        if save_optimizer_states:
            self.save_optimizer_states(checkpoint.states_file(prefix, epoch))

    def save_optimizer_states(self, fname):
        """Write the optimizer's states (and update counts) to `fname`."""
        self._require("save_optimizer_states", params=True, optimizer=True)
        with open(fname, "wb") as f:
            f.write(self._updater.get_states(dump_optimizer=False))

    def load_optimizer_states(self, fname):
        """Read states written by `save_optimizer_states`."""
        self._require("load_optimizer_states", params=True, optimizer=True)
        with open(fname, "rb") as f:
            self._updater.set_states(f.read())

    @staticmethod
    def load(prefix, epoch, load_optimizer_states=False, **kwargs):
        """A Module from a checkpoint; its parameters are set once it is bound.

        >>> mod = mx.mod.Module.load('net', 10, data_names=('data',), label_names=None)
        """
        symbol, arg_params, aux_params = checkpoint.load_checkpoint(prefix, epoch)
        mod = Module(symbol, **kwargs)
        mod._arg_params, mod._aux_params = arg_params, aux_params
        mod.params_initialized = True
        if load_optimizer_states:
            mod._preload_opt_states = checkpoint.states_file(prefix, epoch)
        return mod


def _one_context(context):
    if context is None:
        return cpu()
    if isinstance(context, (list, tuple)):
        if len(context) != 1:
            raise MXNetError(f"Module: minigluon's Module runs on one device, got context "
                             f"{list(context)}; use gluon.Trainer for several devices")
        return context[0]
    return context
