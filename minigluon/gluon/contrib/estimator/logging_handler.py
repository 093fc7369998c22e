"""LoggingHandler: progress lines through `estimator.logger` (stdout by default)."""
import time

from .events import BatchBegin, BatchEnd, EpochBegin, EpochEnd, TrainBegin, TrainEnd
from .utils import check_metrics


def _values(metrics):
    return ", ".join(f"{name}: {value:.4f}" for name, value in (m.get() for m in metrics))


class LoggingHandler(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchBegin, BatchEnd):
    """Log the optimizer and learning rate at train begin, `metrics` at each epoch's end
    (and every `log_interval` batches), and the totals at train end.

    Parameters
    ----------
    log_interval : int or 'epoch', default 'epoch'
        With an integer k, also log a line every k batches.
    metrics : list of EvalMetric
        The metrics to show.
    priority : scalar, default inf
        Runs last, once every other handler has updated its state.

    >>> est.fit(train_data, epochs=2, event_handlers=[LoggingHandler(
    ...     log_interval=10, metrics=est.train_metrics)])
    """

    def __init__(self, log_interval="epoch", metrics=None, priority=float("inf")):
        if log_interval != "epoch" and (not isinstance(log_interval, int) or log_interval < 1):
            raise ValueError(f"log_interval must be 'epoch' or a positive integer, got "
                             f"{log_interval!r}")
        self.metrics = check_metrics(metrics)
        self.log_interval = log_interval
        self.priority = priority
        self.batch_index = 0
        self.current_epoch = 0
        self.processed_samples = 0
        self.log_interval_time = 0
        self.train_start = self.epoch_start = self.batch_start = time.time()

    def _per_batch(self):
        return isinstance(self.log_interval, int)

    def train_begin(self, estimator, *args, **kwargs):
        self.train_start = time.time()
        trainer = estimator.trainer
        estimator.logger.info("Training begin: using optimizer %s with current learning rate "
                              "%.4f ", type(trainer.optimizer).__name__, trainer.learning_rate)
        if estimator.max_epoch:
            estimator.logger.info("Train for %d epochs.", estimator.max_epoch)
        else:
            estimator.logger.info("Train for %d batches.", estimator.max_batch)
        self.current_epoch = self.batch_index = self.processed_samples = 0
        self.log_interval_time = 0

    def train_end(self, estimator, *args, **kwargs):
        seconds = time.time() - self.train_start
        msg = f"Train finished using total {seconds:.0f}s with {self.current_epoch} epochs. "
        estimator.logger.info((msg + _values(self.metrics)).rstrip(", "))

    def batch_begin(self, estimator, *args, **kwargs):
        self.batch_start = time.time()

    def batch_end(self, estimator, *args, **kwargs):
        if self._per_batch():
            self.processed_samples += kwargs["batch"][0].shape[0]
            self.log_interval_time += time.time() - self.batch_start
            if self.batch_index % self.log_interval == 0:
                estimator.logger.info(
                    "[Epoch %d][Batch %d][Samples %d] time/interval: %.3fs %s",
                    self.current_epoch, self.batch_index, self.processed_samples,
                    self.log_interval_time, _values(self.metrics))
                self.log_interval_time = 0
        self.batch_index += 1

    def epoch_begin(self, estimator, *args, **kwargs):
        self.epoch_start = time.time()
        # the estimator names its training metrics 'training ...': without one, this
        # handler is logging an evaluation pass
        if any("training" in m.name for m in self.metrics):
            estimator.logger.info("[Epoch %d] Begin, current learning rate: %.4f",
                                  self.current_epoch, estimator.trainer.learning_rate)
        else:
            estimator.logger.info("Validation Begin")

    def epoch_end(self, estimator, *args, **kwargs):
        seconds = time.time() - self.epoch_start
        line = f"[Epoch {self.current_epoch}] Finished in {seconds:.3f}s, "
        estimator.logger.info((line + _values(self.metrics)).rstrip(", "))
        self.current_epoch += 1
        self.batch_index = 0
