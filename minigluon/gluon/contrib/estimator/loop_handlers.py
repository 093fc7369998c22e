"""The handlers that make up the training loop itself: stop after N epochs or batches,
step the trainer, update the metrics, and validate now and then. `Estimator.fit` adds any
of them the caller did not pass."""
from ....metric import Loss as LossMetric
from .events import BatchEnd, EpochBegin, EpochEnd, TrainBegin
from .utils import check_metrics


class StoppingHandler(TrainBegin, BatchEnd, EpochEnd):
    """Stop training once `max_epoch` epochs or `max_batch` batches are done.

    Parameters
    ----------
    max_epoch : int, default None
    max_batch : int, default None
        `Estimator.fit` sets both from its `epochs` and `batches` at train begin.
    """

    def __init__(self, max_epoch=None, max_batch=None):
        self.max_epoch = max_epoch
        self.max_batch = max_batch
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def train_begin(self, estimator, *args, **kwargs):
        self.max_epoch = estimator.max_epoch
        self.max_batch = estimator.max_batch
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def batch_end(self, estimator, *args, **kwargs):
        self.current_batch += 1
        self.stop_training = self.stop_training or self.current_batch == self.max_batch
        return self.stop_training

    def epoch_end(self, estimator, *args, **kwargs):
        self.current_epoch += 1
        self.stop_training = self.stop_training or self.current_epoch == self.max_epoch
        return self.stop_training


class GradientUpdateHandler(BatchEnd):
    """Apply the batch's gradients: `trainer.step(samples in the batch)`.

    Parameters
    ----------
    priority : scalar, default -2000
        Handlers run in ascending priority; the update comes before everything else.
    """

    def __init__(self, priority=-2000):
        self.priority = priority

    def batch_end(self, estimator, *args, **kwargs):
        losses = kwargs["loss"]
        losses = losses if isinstance(losses, list) else [losses]
        estimator.trainer.step(sum(loss.shape[0] for loss in losses))


class MetricHandler(EpochBegin, BatchEnd):
    """Reset `metrics` at each epoch's begin and update them after each batch; a
    `metric.Loss` is updated with the batch's loss values, the others with labels and
    predictions.

    Parameters
    ----------
    metrics : list of EvalMetric
    priority : scalar, default -1000
        Runs before handlers that read the metrics.
    """

    def __init__(self, metrics, priority=-1000):
        self.metrics = check_metrics(metrics)
        self.priority = priority

    def epoch_begin(self, estimator, *args, **kwargs):
        for metric in self.metrics:
            metric.reset()

    def batch_end(self, estimator, *args, **kwargs):
        for metric in self.metrics:
            if isinstance(metric, LossMetric):
                metric.update(0, kwargs["loss"])
            else:
                metric.update(kwargs["label"], kwargs["pred"])


class ValidationHandler(TrainBegin, BatchEnd, EpochEnd):
    """Run `eval_fn(val_data=..., batch_axis=..., event_handlers=...)` every `epoch_period`
    epochs and every `batch_period` batches.

    Parameters
    ----------
    val_data : DataLoader
    eval_fn : callable
        Usually `estimator.evaluate`.
    epoch_period : int or None, default 1
    batch_period : int or None, default None
    priority : scalar, default -1000
        Runs before handlers that read the validation metrics.
    event_handlers : EventHandler or list of them
        Passed on to `eval_fn`.
    """

    def __init__(self, val_data, eval_fn, epoch_period=1, batch_period=None, priority=-1000,
                 event_handlers=None):
        self.val_data = val_data
        self.eval_fn = eval_fn
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.current_batch = 0
        self.current_epoch = 0
        self.priority = priority
        self.event_handlers = event_handlers

    def train_begin(self, estimator, *args, **kwargs):
        self.current_batch = 0
        self.current_epoch = 0

    def batch_end(self, estimator, *args, **kwargs):
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self._validate(estimator)

    def epoch_end(self, estimator, *args, **kwargs):
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self._validate(estimator)

    def _validate(self, estimator):
        self.eval_fn(val_data=self.val_data, batch_axis=estimator.batch_axis,
                     event_handlers=self.event_handlers)
