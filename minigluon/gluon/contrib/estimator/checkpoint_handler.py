"""CheckpointHandler: parameters and trainer states written to real files every few epochs
or batches, the newest `max_checkpoints` kept, the best one kept aside, and training
resumed from the newest."""
import os
import re
import warnings

import numpy as np

from .events import BatchEnd, EpochEnd, TrainBegin
from .utils import check_monitor, improvement_op


class CheckpointHandler(TrainBegin, BatchEnd, EpochEnd):
    """Save `<model_prefix>-epoch<E>batch<B>.params` (`net.save_parameters`) and `.states`
    (`trainer.save_states`) in `model_dir`, and `<model_prefix>-symbol.json` after the
    first batch of a hybridized net.

    Parameters
    ----------
    model_dir : str
        Folder of the checkpoints; created when missing.
    model_prefix : str, default 'model'
    monitor : EvalMetric, default None
        The metric that decides the best checkpoint (with `save_best`).
    verbose : int, default 0
        1 logs every save.
    save_best : bool, default False
        Also keep the best checkpoint so far as `<model_prefix>-best.params/.states`.
    mode : {'auto', 'min', 'max'}, default 'auto'
        Whether a larger or smaller monitored value is better; 'auto' takes larger for
        accuracies and F1 scores.
    epoch_period : int or None, default 1
    batch_period : int or None, default None
        Save every this many epochs / batches.
    max_checkpoints : int, default 5
        Older checkpoints are deleted; the best one does not count.
    resume_from_checkpoint : bool, default False
        At train begin, load the newest checkpoint in `model_dir` and train only the
        epochs (or batches) left of `fit`'s `epochs` (or `batches`).

    >>> est.fit(train_data, epochs=10, event_handlers=[
    ...     CheckpointHandler('ckpt', epoch_period=1, resume_from_checkpoint=True)])
    """

    def __init__(self, model_dir, model_prefix="model", monitor=None, verbose=0,
                 save_best=False, mode="auto", epoch_period=1, batch_period=None,
                 max_checkpoints=5, resume_from_checkpoint=False):
        self.monitor = monitor
        self.verbose = verbose
        self.save_best = save_best
        if save_best:
            check_monitor(monitor, "CheckpointHandler(save_best=True)")
            self.monitor_op = improvement_op(monitor, mode, "CheckpointHandler")
        os.makedirs(model_dir, exist_ok=True)
        self.model_dir = model_dir
        self.model_prefix = model_prefix
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.max_checkpoints = max_checkpoints
        self.resume_from_checkpoint = resume_from_checkpoint
        self.current_batch = self.current_epoch = 0
        self.trained_epoch = self.trained_batch = -1
        self.saved_checkpoints = []
        self.best = None

    def train_begin(self, estimator, *args, **kwargs):
        self.current_epoch = self.current_batch = 0
        if self.save_best:
            self.best = -np.inf if self.monitor_op is np.greater else np.inf
        if self.resume_from_checkpoint:
            self._check_resume_periods(estimator)
            self._resume(estimator)

    def batch_end(self, estimator, *args, **kwargs):
        if self.current_batch == 0:
            self._save_symbol(estimator)
        if self.batch_period and (self.current_batch + 1) % self.batch_period == 0:
            self._save_checkpoint(estimator)
        self.current_batch += 1

    def epoch_end(self, estimator, *args, **kwargs):
        if self.epoch_period and (self.current_epoch + 1) % self.epoch_period == 0:
            self._save_checkpoint(estimator)
        self.current_epoch += 1

    # ---- saving --------------------------------------------------------------------------
    def _numbers(self, estimator):
        """(epoch, batch) of the checkpoint saved now, counted over the resumed run too."""
        if self.trained_epoch < 0:
            return self.current_epoch, self.current_batch
        # at an epoch's end the batch counter has already moved past the last batch
        batch_offset = 0 if estimator.max_epoch else 1
        return (self.current_epoch + self.trained_epoch + 1,
                self.current_batch + self.trained_batch + batch_offset)

    def _save_checkpoint(self, estimator):
        epoch, batch = self._numbers(estimator)
        prefix = f"{self.model_prefix}-epoch{epoch}batch{batch}"
        self._save_files(estimator, prefix)
        self.saved_checkpoints.append(prefix)
        while len(self.saved_checkpoints) > self.max_checkpoints:
            self._remove(self.saved_checkpoints.pop(0))
        if self.verbose > 0:
            estimator.logger.info("[Epoch %d] CheckpointHandler: trained total %d batches, "
                                  "saving model at %s with prefix: %s", self.current_epoch,
                                  self.current_batch + 1, self.model_dir, prefix)
        if self.save_best:
            self._save_if_best(estimator)

    def _save_if_best(self, estimator):
        name, value = self.monitor.get()
        if np.isnan(value):
            warnings.warn(f"CheckpointHandler: skipping save_best because {name!r} has no "
                          "value; monitor one of estimator.train_metrics or val_metrics",
                          RuntimeWarning)
            return
        if not self.monitor_op(value, self.best):
            return
        prefix = f"{self.model_prefix}-best"
        self._save_files(estimator, prefix)
        if self.verbose > 0:
            estimator.logger.info("[Epoch %d] CheckpointHandler: %s improved from %.5f to "
                                  "%.5f, updating best model at %s with prefix: %s",
                                  self.current_epoch, name, self.best, value, self.model_dir,
                                  prefix)
        self.best = value

    def _save_files(self, estimator, prefix):
        path = os.path.join(self.model_dir, prefix)
        estimator.net.save_parameters(path + ".params")
        estimator.trainer.save_states(path + ".states")

    def _remove(self, prefix):
        for ext in (".params", ".states"):
            path = os.path.join(self.model_dir, prefix + ext)
            if os.path.exists(path):
                os.remove(path)

    def _save_symbol(self, estimator):
        path = os.path.join(self.model_dir, self.model_prefix + "-symbol.json")
        graph = getattr(estimator.net, "_export_sym", None)
        if graph is None:
            estimator.logger.info("Model architecture (symbol file) is not saved: build the "
                                  "model from HybridBlocks and call net.hybridize() before "
                                  "passing it to the Estimator to have it saved as %s", path)
            return
        graph.save(path)

    # ---- resuming ------------------------------------------------------------------------
    def _check_resume_periods(self, estimator):
        # the checkpoint's name counts what fit counts: epochs or batches, not both
        by_epoch = bool(estimator.max_epoch)
        if by_epoch != bool(self.epoch_period) or by_epoch == bool(self.batch_period):
            unit = "epochs" if by_epoch else "batches"
            raise ValueError(
                f"CheckpointHandler(resume_from_checkpoint=True): fit counts {unit}, but "
                f"epoch_period={self.epoch_period!r} and batch_period={self.batch_period!r}; "
                f"help: save by {unit} only (set the other period to None)")

    def _resume(self, estimator):
        found = _checkpoints(self.model_dir, self.model_prefix)
        self.saved_checkpoints = [prefix for _, prefix in found]
        if not found:
            total = estimator.max_epoch or estimator.max_batch
            unit = "epochs" if estimator.max_epoch else "batches"
            estimator.logger.info("CheckpointHandler: no checkpoint found in %s, training from "
                                  "scratch for %d %s", self.model_dir, total, unit)
            return
        (self.trained_epoch, self.trained_batch), prefix = found[-1]
        self._shorten_fit(estimator, prefix)
        path = os.path.join(self.model_dir, prefix)
        if not os.path.exists(path + ".states"):
            raise FileNotFoundError(f"CheckpointHandler: {path}.params has no {prefix}.states "
                                    "beside it; help: restore it, or remove the .params file")
        estimator.net.load_parameters(path + ".params", ctx=estimator.context)
        estimator.trainer.load_states(path + ".states")
        estimator.logger.warning("CheckpointHandler: checkpoint resumed from epoch %d batch %d, "
                                 "continue to train for %s", self.trained_epoch,
                                 self.trained_batch,
                                 f"{estimator.max_epoch} epochs" if estimator.max_epoch
                                 else f"{estimator.max_batch} batches")

    def _shorten_fit(self, estimator, prefix):
        """Leave fit only the epochs (or batches) the checkpoint has not trained."""
        done, total = ((self.trained_epoch, estimator.max_epoch) if estimator.max_epoch
                       else (self.trained_batch, estimator.max_batch))
        if done >= total - 1:
            unit = "epochs" if estimator.max_epoch else "batches"
            raise ValueError(f"CheckpointHandler: checkpoint {prefix} in {self.model_dir} has "
                             f"already trained the {total} {unit} fit asks for; help: ask for "
                             "more, or pass resume_from_checkpoint=False to train from scratch")
        if estimator.max_epoch:
            estimator.max_epoch = total - done - 1
        else:
            estimator.max_batch = total - done - 1


def _checkpoints(model_dir, model_prefix):
    """[((epoch, batch), prefix)] of the checkpoints in `model_dir`, oldest first."""
    pattern = re.compile(re.escape(model_prefix) + r"-epoch(\d+)batch(\d+)\.params")
    found = []
    for name in os.listdir(model_dir):
        match = pattern.fullmatch(name)
        if match:
            found.append(((int(match[1]), int(match[2])), name[:-len(".params")]))
    return sorted(found)
