"""EarlyStoppingHandler: stop training when a monitored metric stops improving."""
import warnings

import numpy as np

from .events import EpochEnd, TrainBegin, TrainEnd
from .utils import check_monitor, improvement_op


class EarlyStoppingHandler(TrainBegin, EpochEnd, TrainEnd):
    """Stop when `monitor` has not improved by more than `min_delta` for `patience`
    epochs in a row.

    Parameters
    ----------
    monitor : EvalMetric
        One of `estimator.train_metrics` or `estimator.val_metrics`.
    min_delta : float, default 0
        The smallest change that counts as an improvement.
    patience : int, default 0
        Epochs without improvement to wait before stopping.
    mode : {'auto', 'min', 'max'}, default 'auto'
        Whether smaller or larger is better; 'auto' takes larger for accuracies and F1.
    baseline : float, default None
        Values must beat this to count as improvements.

    >>> stop = EarlyStoppingHandler(monitor=est.val_metrics[0], patience=3)
    """

    def __init__(self, monitor, min_delta=0, patience=0, mode="auto", baseline=None):
        self.monitor = check_monitor(monitor, "EarlyStoppingHandler")
        self.monitor_op = improvement_op(monitor, mode, "EarlyStoppingHandler")
        # the delta is added in the direction of "better"
        self.min_delta = abs(min_delta) if self.monitor_op is np.greater else -abs(min_delta)
        self.baseline = baseline
        self.patience = patience
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        self.best = None

    def train_begin(self, estimator, *args, **kwargs):
        self.wait = self.stopped_epoch = self.current_epoch = 0
        self.stop_training = False
        worst = -np.inf if self.monitor_op is np.greater else np.inf
        self.best = worst if self.baseline is None else self.baseline

    def epoch_end(self, estimator, *args, **kwargs):
        name, value = self.monitor.get()
        if np.isnan(value):
            warnings.warn(f"EarlyStoppingHandler: {name!r} has no value at the end of epoch "
                          f"{self.current_epoch}; monitor one of estimator.train_metrics or "
                          "estimator.val_metrics", RuntimeWarning)
        elif self.monitor_op(value - self.min_delta, self.best):
            self.best, self.wait = value, 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = self.current_epoch
                self.stop_training = True
        self.current_epoch += 1
        return self.stop_training

    def train_end(self, estimator, *args, **kwargs):
        if self.stopped_epoch > 0:
            estimator.logger.info("[Epoch %d] EarlyStoppingHandler: early stopping due to %s "
                                  "not improving", self.stopped_epoch, self.monitor.get()[0])
