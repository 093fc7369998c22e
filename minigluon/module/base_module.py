"""BaseModule: the training loop (`fit`), evaluation (`score`) and `predict` of MXNet's
module API, written against the step methods a concrete module provides (bind,
init_params, init_optimizer, forward, backward, update, get_outputs, update_metric)."""
import logging
import time
from collections import namedtuple

from .. import metric as metric_mod
from .. import ndarray as nd
from ..base import MXNetError

__all__ = ["BaseModule", "BatchEndParam"]

# what batch_end_callback receives, as in MXNet's mx.model.BatchEndParam
BatchEndParam = namedtuple("BatchEndParam", ["epoch", "nbatch", "eval_metric", "locals"])


def _call_each(callbacks, *args):
    if callbacks is None:
        return
    for cb in callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]:
        cb(*args)


class BaseModule:
    """The loops shared by modules; see `Module` for the steps."""

    def __init__(self, logger=logging):
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False

    def forward_backward(self, data_batch):
        """forward(is_train=True) then backward()."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None,
              score_end_callback=None, reset=True, epoch=0, sparse_row_id_fn=None):
        """Run `eval_data` forward and return `eval_metric`'s [(name, value)].

        >>> mod.score(val_iter, mx.metric.Loss())[0][1]
        """
        self._require("score", params=True)
        if reset:
            eval_data.reset()
        eval_metric = metric_mod.create(eval_metric)
        eval_metric.reset()
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.forward(batch, is_train=False)
            self.update_metric(eval_metric, batch.label)
            _call_each(batch_end_callback, BatchEndParam(epoch, nbatch, eval_metric, locals()))
        _call_each(score_end_callback, BatchEndParam(epoch, None, eval_metric, locals()))
        return eval_metric.get_name_value()

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True,
                always_output_list=False, sparse_row_id_fn=None):
        """The outputs over `eval_data` (pad samples dropped), concatenated by batch."""
        self._require("predict", params=True)
        if reset:
            eval_data.reset()
        outputs = []
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.forward(batch, is_train=False)
            keep = [o.shape[0] - (batch.pad or 0) for o in self.get_outputs()]
            outputs.append([o[:k].copy() for o, k in zip(self.get_outputs(), keep)])
        if not merge_batches:
            return outputs
        merged = [nd.concat(*parts, dim=0) for parts in zip(*outputs)] if outputs else []
        return merged if always_output_list or len(merged) != 1 else merged[0]

    def fit(self, train_data, eval_data=None, eval_metric="acc", epoch_end_callback=None,
            batch_end_callback=None, kvstore="local", optimizer="sgd",
            optimizer_params=(("learning_rate", 0.01),), eval_end_callback=None,
            eval_batch_end_callback=None, initializer=None, arg_params=None,
            aux_params=None, allow_missing=False, force_rebind=False, force_init=False,
            begin_epoch=0, num_epoch=None, validation_metric=None, monitor=None,
            sparse_row_id_fn=None):
        """Train for `num_epoch` epochs over `train_data`: bind, init_params and
        init_optimizer (each only if not done yet), then forward, backward and update per
        batch, scoring `eval_data` after each epoch.

        >>> mod.fit(train_iter, num_epoch=10, optimizer='adam',
        ...         optimizer_params={'learning_rate': 1e-3}, eval_metric=mx.metric.Loss())
        """
        if num_epoch is None:
            raise MXNetError("fit: num_epoch is required; pass num_epoch=<number of epochs>")
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        self.init_params(initializer=initializer, arg_params=arg_params,
                         aux_params=aux_params, allow_missing=allow_missing,
                         force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)
        eval_metric = metric_mod.create(eval_metric)
        validation_metric = eval_metric if validation_metric is None else validation_metric
        for epoch in range(begin_epoch, num_epoch):
            self._fit_epoch(epoch, train_data, eval_metric, batch_end_callback)
            _call_each(epoch_end_callback, epoch, self.symbol, *self.get_params())
            if eval_data is not None:
                for name, value in self.score(eval_data, validation_metric,
                                              batch_end_callback=eval_batch_end_callback,
                                              score_end_callback=eval_end_callback,
                                              epoch=epoch):
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, value)
            train_data.reset()

    def _fit_epoch(self, epoch, train_data, eval_metric, batch_end_callback):
        start = time.time()
        eval_metric.reset()
        for nbatch, batch in enumerate(train_data):
            self.forward_backward(batch)
            self.update()
            self.update_metric(eval_metric, batch.label)
            _call_each(batch_end_callback, BatchEndParam(epoch, nbatch, eval_metric, locals()))
        for name, value in eval_metric.get_name_value():
            self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, value)
        self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - start)

    def _require(self, what, params=False, optimizer=False):
        """Raise unless bind (and init_params / init_optimizer when asked) ran."""
        steps = [("bind", self.binded), ("init_params", not params or self.params_initialized),
                 ("init_optimizer", not optimizer or self.optimizer_initialized)]
        for step, done in steps:
            if not done:
                raise MXNetError(f"Module.{what}: call {step}() first")
