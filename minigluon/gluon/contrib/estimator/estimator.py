"""Estimator: `fit` and `evaluate` loops around a net, a loss and a trainer, with event
handlers for everything around the step (metrics, logging, validation, checkpoints)."""
import copy
import logging
import sys
import warnings

from ....context import Context, cpu, gpu, num_gpus
from ....metric import Loss as LossMetric
from ...data import DataLoader
from ...loss import Loss
from ...trainer import Trainer
from ...utils import split_and_load
from .batch_processor import BatchProcessor
from .events import categorize, check_event_handlers
from .logging_handler import LoggingHandler
from .loop_handlers import GradientUpdateHandler, MetricHandler, StoppingHandler
from .loop_handlers import ValidationHandler
from .utils import check_handler_metric_ref, check_metrics, suggest_metric_for_loss

__all__ = ["Estimator"]


class Estimator:
    """Train and evaluate `net` with `loss`.

    Parameters
    ----------
    net : gluon.Block
    loss : gluon.loss.Loss
    train_metrics, val_metrics : EvalMetric or list of EvalMetric
        Default: Accuracy for SoftmaxCrossEntropyLoss, plus the mean loss; the validation
        metrics default to copies of the training ones. Their names get a 'training ' or
        'validation ' prefix.
    initializer : Initializer
        Initializes the parameters `net` has not initialized yet.
    trainer : gluon.Trainer
        Default: SGD with learning rate 0.001 (with a warning).
    context : Context or list of Context
        Default: gpu(0) when there is a GPU, else cpu().
    val_net, val_loss :
        The net and loss of evaluation; default `net` and `loss`.
    batch_processor : BatchProcessor
        What one batch does (see `BatchProcessor`).

    >>> est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer)
    >>> est.fit(train_data, val_data, epochs=2)
    """

    logger = None  # a logging.Logger of its own that writes INFO and above to stdout

    def __init__(self, net, loss, train_metrics=None, val_metrics=None, initializer=None,
                 trainer=None, context=None, val_net=None, val_loss=None,
                 batch_processor=None):
        self.net = net
        self.loss = _check_loss(loss, "loss")
        self._train_metrics = check_metrics(train_metrics)
        self._val_metrics = check_metrics(val_metrics)
        self._add_default_training_metrics()
        self._add_validation_metrics()
        self.val_loss = self.loss if val_loss is None else _check_loss(val_loss, "val_loss")
        self.val_net = net if val_net is None else val_net
        self.logger = logging.Logger(name="Estimator", level=logging.INFO)
        self.logger.addHandler(logging.StreamHandler(sys.stdout))
        self.context = _check_context(context)
        self._initialize(initializer)
        self.trainer = self._check_trainer(trainer)
        self.batch_processor = _check_batch_processor(batch_processor)
        self.max_epoch = self.max_batch = None
        self.batch_axis = 0

    @property
    def train_metrics(self):
        return self._train_metrics

    @property
    def val_metrics(self):
        return self._val_metrics

    # ---- construction --------------------------------------------------------------------
    def _add_default_training_metrics(self):
        if not self._train_metrics:
            suggested = suggest_metric_for_loss(self.loss)
            self._train_metrics = [suggested] if suggested else []
            # 'softmaxcrossentropyloss0' -> 'softmaxcrossentropyloss', as MXNet 1.9 names it
            self._train_metrics.append(LossMetric(self.loss.name.rstrip("0123456789")))
        # the prefix tells handlers training metrics from validation ones
        for metric in self._train_metrics:
            metric.name = "training " + metric.name

    def _add_validation_metrics(self):
        if not self._val_metrics:
            self._val_metrics = [copy.deepcopy(m) for m in self._train_metrics]
        for metric in self._val_metrics:
            if "training" in metric.name:
                metric.name = metric.name.replace("training", "validation")
            else:
                metric.name = "validation " + metric.name

    def _initialize(self, initializer):
        if not self._is_initialized():
            # only the parameters not initialized yet: fine-tuning keeps pretrained layers
            kwargs = {"init": initializer} if initializer else {}
            self.net.initialize(ctx=self.context, **kwargs)
        elif initializer:
            warnings.warn("Network already fully initialized, skipping initialization. You "
                          "don't need to pass initializer if you already initialized your "
                          "net; net.initialize(init=..., force_reinit=True) re-initializes it")

    def _is_initialized(self):
        try:
            for param in self.net.collect_params().values():
                param.list_ctx()
        except RuntimeError:
            return False
        return True

    def _check_trainer(self, trainer):
        if trainer is None:
            warnings.warn("No trainer specified, default SGD optimizer with learning rate "
                          "0.001 is used.")
            return Trainer(self.net.collect_params(), "sgd", {"learning_rate": 0.001})
        if not isinstance(trainer, Trainer):
            raise ValueError(f"trainer must be a gluon.Trainer, got {trainer!r}; help: "
                             "gluon.Trainer(net.collect_params(), 'sgd', "
                             "{'learning_rate': 0.1})")
        return trainer

    def _get_data_and_label(self, batch, ctx, batch_axis=0):
        data = split_and_load(batch[0], ctx_list=ctx, batch_axis=batch_axis)
        label = split_and_load(batch[1], ctx_list=ctx, batch_axis=batch_axis)
        return data, label

    # ---- the loops -----------------------------------------------------------------------
    def evaluate(self, val_data, batch_axis=0, event_handlers=None):
        """Run `val_net` over `val_data` (a DataLoader) and update `val_metrics`; a
        MetricHandler and a LoggingHandler are added unless `event_handlers` has them."""
        _check_loader(val_data, "val_data")
        for metric in self.val_metrics:
            metric.reset()
        handlers = self._prepare_default_validation_handlers(event_handlers)
        _, epoch_begin, batch_begin, batch_end, epoch_end, _ = categorize(handlers)
        _call(epoch_begin, "epoch_begin", self)
        for batch in val_data:
            _call(batch_begin, "batch_begin", self, batch=batch)
            _, label, pred, loss = self.batch_processor.evaluate_batch(self, batch, batch_axis)
            _call(batch_end, "batch_end", self, batch=batch, pred=pred, label=label, loss=loss)
        _call(epoch_end, "epoch_end", self)

    def fit(self, train_data, val_data=None, epochs=None, event_handlers=None, batches=None,
            batch_axis=0):
        """Train on `train_data` (a DataLoader) for `epochs` epochs or `batches` batches
        (exactly one of them), validating on `val_data` after each epoch when given.

        Besides `event_handlers`, a StoppingHandler, GradientUpdateHandler, MetricHandler,
        LoggingHandler and (with `val_data`) ValidationHandler are added unless one of that
        kind is passed. Handlers run in ascending `priority` (default 0).
        """
        _check_loader(train_data, "train_data")
        if (not epochs) == (not batches):
            raise ValueError(f"fit trains for a number of epochs or of batches: pass exactly "
                             f"one of them, got epochs={epochs!r}, batches={batches!r}")
        self.max_epoch, self.max_batch, self.batch_axis = epochs, batches, batch_axis
        handlers = self._prepare_default_handlers(val_data, event_handlers)
        train_begin, epoch_begin, batch_begin, batch_end, epoch_end, train_end = \
            categorize(handlers)
        _call(train_begin, "train_begin", self)
        stop = False
        while not stop:
            _call(epoch_begin, "epoch_begin", self)
            self._fit_epoch(train_data, batch_begin, batch_end, batch_axis)
            stop = any(_call(epoch_end, "epoch_end", self))
        _call(train_end, "train_end", self)

    def _fit_epoch(self, train_data, batch_begin, batch_end, batch_axis):
        for batch in train_data:
            _call(batch_begin, "batch_begin", self, batch=batch)
            _, label, pred, loss = self.batch_processor.fit_batch(self, batch, batch_axis)
            if any(_call(batch_end, "batch_end", self, batch=batch, pred=pred, label=label,
                         loss=loss)):
                return

    # ---- default handlers ----------------------------------------------------------------
    def _prepare_default_handlers(self, val_data, event_handlers):
        handlers = check_event_handlers(event_handlers)
        defaults = [StoppingHandler(self.max_epoch, self.max_batch)]
        if not _has(handlers, GradientUpdateHandler):
            defaults.append(GradientUpdateHandler())
        if not _has(handlers, MetricHandler):
            defaults.append(MetricHandler(metrics=self.train_metrics))
        if not _has(handlers, ValidationHandler) and val_data:
            defaults.append(ValidationHandler(val_data=val_data, eval_fn=self.evaluate))
        if not _has(handlers, LoggingHandler):
            defaults.append(LoggingHandler(metrics=self.train_metrics))
        return self._merge(handlers, defaults, self.train_metrics + self.val_metrics)

    def _prepare_default_validation_handlers(self, event_handlers):
        handlers = check_event_handlers(event_handlers)
        defaults = []
        if not _has(handlers, MetricHandler):
            defaults.append(MetricHandler(metrics=self.val_metrics))
        if not _has(handlers, LoggingHandler):
            defaults.append(LoggingHandler(metrics=self.val_metrics))
        return self._merge(handlers, defaults, self.val_metrics)

    @staticmethod
    def _merge(handlers, defaults, known_metrics):
        """The caller's handlers then the defaults, sorted by priority (a stable sort: equal
        priorities keep that order). When both kinds are there, the caller's must watch
        the estimator's metrics, which are the ones the defaults update."""
        mixing = bool(handlers) and bool(defaults)
        handlers = handlers + defaults
        if mixing:
            for handler in handlers:
                check_handler_metric_ref(handler, set(known_metrics))
        return sorted(handlers, key=lambda h: getattr(h, "priority", 0))

    def _categorize_handlers(self, event_handlers):
        """Six lists: the handlers acting at train begin, epoch begin, batch begin, batch
        end, epoch end and train end."""
        return categorize(event_handlers)


def _call(handlers, method, estimator, **kwargs):
    return [getattr(h, method)(estimator, **kwargs) for h in handlers]


def _has(handlers, kind):
    return any(isinstance(h, kind) for h in handlers)


def _check_loss(loss, what):
    if not isinstance(loss, Loss):
        raise ValueError(f"{what} must be a gluon.loss.Loss, got {loss!r}; help: pass e.g. "
                         "gluon.loss.SoftmaxCrossEntropyLoss()")
    return loss


def _check_loader(data, what):
    if not isinstance(data, DataLoader):
        raise ValueError(f"{what} must be a gluon.data.DataLoader, got "
                         f"{type(data).__name__}; help: wrap arrays in "
                         "gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size)")


def _check_context(context):
    """A list of usable devices; the default is gpu(0) when there is one, else cpu()."""
    gpus = num_gpus()
    if not context:
        if gpus > 1:
            warnings.warn(f"{gpus} GPUs found, gpu(0) is used; pass context=[mx.gpu(0), "
                          "mx.gpu(1), ...] to train on several")
        return [gpu(0)] if gpus else [cpu()]
    contexts = [context] if isinstance(context, Context) else context
    if not isinstance(contexts, list) or not all(isinstance(c, Context) for c in contexts):
        raise ValueError(f"context must be a Context or a list of Contexts, got {context!r}; "
                         "help: mx.cpu() or [mx.gpu(0), mx.gpu(1)]")
    for ctx in contexts:
        if ctx.device_type == "gpu" and ctx.device_id >= gpus:
            # an AssertionError, as in MXNet, for code that catches it
            raise AssertionError(f"{ctx} is not available: this machine has {gpus} GPUs; "
                                 "help: use mx.cpu() or one of "
                                 f"{[str(gpu(i)) for i in range(gpus)]}")
    return contexts


def _check_batch_processor(batch_processor):
    if batch_processor is None:
        return BatchProcessor()
    for method in ("fit_batch", "evaluate_batch"):
        if not callable(getattr(batch_processor, method, None)):
            raise ValueError(f"batch_processor {batch_processor!r} has no {method}() method; "
                             "help: subclass estimator.BatchProcessor")
    return batch_processor
