"""TensorBoardHandler: the metrics, the loss and the learning rate as TensorBoard scalars,
written with tensorboardX (the optional extra `minigluon[tensorboard]`)."""
import math

from ....metric import Loss as LossMetric
from .events import BatchEnd, EpochEnd, TrainBegin, TrainEnd
from .utils import check_metrics

__all__ = ["TensorBoardHandler", "summary_writer"]

_INSTALL_HELP = 'help: pip install "minigluon[tensorboard]" (or pip install tensorboardX)'


def summary_writer(logdir, **kwargs):
    """A `tensorboardX.SummaryWriter` writing event files into `logdir` (created when
    missing); `kwargs` go to it, e.g. `flush_secs`.

    >>> writer = summary_writer('runs/lenet')
    >>> writer.add_scalar('epoch/train/loss', 0.31, 1)
    >>> writer.close()
    """
    try:
        from tensorboardX import SummaryWriter
    except ImportError as err:
        raise ImportError(f"writing TensorBoard event files to {logdir!r} needs the "
                          f"tensorboardX package, which is not installed ({err}); "
                          f"{_INSTALL_HELP}") from None
    return SummaryWriter(logdir=str(logdir), **kwargs)


def scalar_tag(metric):
    """'epoch/train/accuracy'-style tail for a metric: 'train/accuracy' for 'training
    accuracy', 'val/loss' for the validation loss; spaces become underscores."""
    name = metric.name
    group = "metric"
    for prefix, short in (("training ", "train"), ("validation ", "val")):
        if name.startswith(prefix):
            group, name = short, name[len(prefix):]
    if isinstance(metric, LossMetric):
        name = "loss"
    return f"{group}/{name.replace(' ', '_')}"


class TensorBoardHandler(TrainBegin, BatchEnd, EpochEnd, TrainEnd):
    """Write scalars during `Estimator.fit`:

    - every `log_interval` batches, `batch/<train metric>` (e.g. `batch/train/loss`) and
      `batch/learning_rate`, at step = batches trained so far;
    - at each epoch's end, `epoch/<metric>` for the training and the validation metrics
      (`epoch/train/accuracy`, `epoch/val/loss`, ...) and `epoch/learning_rate`, at
      step = the epoch's index (0, 1, ...).

    Parameters
    ----------
    logdir : str, default None
        Folder of the event files; `tensorboard --logdir` shows it.
    writer : SummaryWriter, default None
        An open writer to use instead of `logdir` (the caller closes it).
    log_interval : int or 'epoch', default 'epoch'
        With an integer k, also write the training metrics every k batches.
    metrics : list of EvalMetric, default None
        Default: all of `estimator.train_metrics` and `estimator.val_metrics`.
    priority : scalar, default inf
        Runs after the handlers that update metrics and validate.

    >>> est.fit(train_data, val_data, epochs=3,
    ...         event_handlers=[TensorBoardHandler('runs/lenet', log_interval=10)])
    """

    def __init__(self, logdir=None, writer=None, log_interval="epoch", metrics=None,
                 priority=float("inf")):
        if (logdir is None) == (writer is None):
            raise ValueError(f"TensorBoardHandler needs exactly one of logdir and writer, got "
                             f"logdir={logdir!r}, writer={writer!r}")
        if log_interval != "epoch" and (not isinstance(log_interval, int) or log_interval < 1):
            raise ValueError(f"log_interval must be 'epoch' or a positive integer, got "
                             f"{log_interval!r}")
        if writer is None:
            _require_tensorboardx(logdir)  # now, not after the first epoch's work
        self.logdir = logdir
        self.writer = writer
        self._owns_writer = writer is None
        self.log_interval = log_interval
        self.metrics = check_metrics(metrics)
        self.priority = priority
        self.current_epoch = 0
        self.global_batch = 0

    def train_begin(self, estimator, *args, **kwargs):
        if self._owns_writer:
            self.writer = summary_writer(self.logdir)
        self.current_epoch = self.global_batch = 0

    def batch_end(self, estimator, *args, **kwargs):
        self.global_batch += 1
        if isinstance(self.log_interval, int) and self.global_batch % self.log_interval == 0:
            training = [m for m in self._watched(estimator)
                        if not m.name.startswith("validation")]
            self._write("batch", training, estimator, self.global_batch)

    def epoch_end(self, estimator, *args, **kwargs):
        self._write("epoch", self._watched(estimator), estimator, self.current_epoch)
        self.current_epoch += 1

    def train_end(self, estimator, *args, **kwargs):
        if self._owns_writer:
            self.writer.close()
            self.writer = None
        else:
            self.writer.flush()

    def _watched(self, estimator):
        return self.metrics or estimator.train_metrics + estimator.val_metrics

    def _write(self, section, metrics, estimator, step):
        if self.writer is None:
            raise RuntimeError("TensorBoardHandler writes during Estimator.fit, which opens "
                               "its writer at train begin; help: pass it to fit(), or pass "
                               "an open writer=SummaryWriter(...) to use it elsewhere")
        for metric in metrics:
            value = float(metric.get()[1])
            # NaN: nothing updated the metric yet (no validation data, say); no point
            if not math.isnan(value):
                self.writer.add_scalar(f"{section}/{scalar_tag(metric)}", value, step)
        self.writer.add_scalar(f"{section}/learning_rate", estimator.trainer.learning_rate,
                               step)


def _require_tensorboardx(logdir):
    try:
        import tensorboardX  # noqa: F401
    except ImportError as err:
        raise ImportError(f"TensorBoardHandler(logdir={logdir!r}) writes event files with the "
                          f"tensorboardX package, which is not installed ({err}); "
                          f"{_INSTALL_HELP}") from None
