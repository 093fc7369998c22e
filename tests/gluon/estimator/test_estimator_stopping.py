"""EarlyStoppingHandler and ValidationHandler against metric values recorded epoch by epoch."""
import pytest

import minigluon as mx
from minigluon import gluon
from minigluon.gluon.contrib.estimator import (EarlyStoppingHandler, Estimator,
                                               ValidationHandler)

from estimator_kit import Recorder, classifier, loader, sgd


def _estimator():
    net = classifier()
    return Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=sgd(net))


def test_early_stopping_waits_patience_epochs_without_improvement():
    est = _estimator()
    loss = est.train_metrics[1]
    # the training loss falls every epoch: in 'max' mode it never improves after epoch 0
    stop = EarlyStoppingHandler(monitor=loss, mode="max", patience=2)
    recorder = Recorder()
    est.fit(loader(), epochs=10, event_handlers=[stop, recorder])
    losses = [row["training softmaxcrossentropyloss"] for row in recorder.epochs]
    assert all(a > b for a, b in zip(losses, losses[1:]))
    assert len(losses) == 3 and stop.stopped_epoch == 2


def test_early_stopping_min_delta_and_baseline():
    est = _estimator()
    # 'min' on the falling loss, but no epoch beats a baseline of 0: stop after patience
    stop = EarlyStoppingHandler(monitor=est.train_metrics[1], mode="min", baseline=0.0,
                                patience=1)
    est.fit(loader(), epochs=10, event_handlers=[stop])
    assert stop.current_epoch == 1
    # an improvement must exceed min_delta: a huge one is never reached
    stop = EarlyStoppingHandler(monitor=est.train_metrics[1], mode="min", min_delta=100,
                                patience=3)
    est.fit(loader(), epochs=10, event_handlers=[stop])
    assert stop.current_epoch == 4     # epoch 0 beats inf, then three epochs of waiting


def test_early_stopping_refuses_what_it_cannot_monitor():
    with pytest.raises(ValueError, match="monitor must be an EvalMetric, got 'acc'"):
        EarlyStoppingHandler(monitor="acc")
    with pytest.raises(ValueError, match="is a CompositeEvalMetric"):
        EarlyStoppingHandler(monitor=mx.metric.CompositeEvalMetric([mx.metric.Accuracy()]))


def test_validation_every_epoch_period_matches_evaluate():
    est = _estimator()
    recorder = Recorder()
    val = ValidationHandler(loader(seed=1), est.evaluate, epoch_period=2)
    est.fit(loader(), loader(seed=1), epochs=4, event_handlers=[val, recorder])
    accuracies = [row["validation accuracy"] for row in recorder.epochs]
    # validated after epochs 2 and 4 only; the value after epoch 1 is the reset NaN
    assert accuracies[0] != accuracies[0] and accuracies[1] == accuracies[2]
    est.evaluate(loader(seed=1))
    assert est.val_metrics[0].get()[1] == pytest.approx(accuracies[3])
