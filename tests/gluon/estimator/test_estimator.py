"""Estimator.fit and evaluate: the same training as a hand-written loop, the default metrics
and handlers MXNet 1.9 adds and their order, stopping by epochs or batches, and the errors."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon
from minigluon.gluon.contrib.estimator import (BatchEnd, Estimator,
                                               GradientUpdateHandler, LoggingHandler,
                                               MetricHandler, StoppingHandler,
                                               ValidationHandler)

from estimator_kit import BATCH, SAMPLES, classifier, loader, params, sgd

CE = gluon.loss.SoftmaxCrossEntropyLoss


def _estimator(net=None, **kwargs):
    net = net or classifier()
    return Estimator(net, CE(), trainer=sgd(net), **kwargs)


def test_fit_matches_a_hand_written_loop():
    est = _estimator()
    est.fit(loader(), epochs=2)
    net = classifier()
    trainer, loss_fn = sgd(net), CE()
    for _ in range(2):
        for data, label in loader():
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(data.shape[0])
    for ours, theirs in zip(params(est.net), params(net), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_default_metrics_are_named_as_in_mxnet():
    est = _estimator()
    assert [m.name for m in est.train_metrics] == ["training accuracy",
                                                   "training softmaxcrossentropyloss"]
    assert [m.name for m in est.val_metrics] == ["validation accuracy",
                                                 "validation softmaxcrossentropyloss"]
    assert isinstance(est.train_metrics[1], mx.metric.Loss)


def test_evaluate_gives_the_accuracy_numpy_computes():
    est = _estimator()
    est.fit(loader(), epochs=3)
    est.evaluate(loader(seed=1))
    data, label = (np.stack(x) for x in zip(*[(d.asnumpy(), l.asnumpy())
                                               for d, l in loader(seed=1)]))
    predicted = est.net(mx.nd.array(data.reshape(-1, data.shape[-1]))).asnumpy().argmax(1)
    expected = (predicted == label.reshape(-1)).mean()
    assert est.val_metrics[0].get()[1] == pytest.approx(expected)
    assert expected > 0.8    # the clusters are separable: training did something


class _Count(BatchEnd):
    def __init__(self):
        self.batches = 0

    def batch_end(self, estimator, *args, **kwargs):
        self.batches += 1


def test_fit_by_batches_stops_mid_epoch():
    count = _Count()
    est = _estimator()
    est.fit(loader(), batches=SAMPLES // BATCH + 2, event_handlers=[count])
    assert count.batches == SAMPLES // BATCH + 2


def test_default_handlers_and_their_order():
    est = _estimator()
    est.max_epoch, est.max_batch = 1, None
    handlers = est._prepare_default_handlers(loader(), [_Count()])
    kinds = [type(h) for h in handlers]
    # by priority: the update, then metrics and validation, the caller's and the stopper
    # (priority 0, in that order), logging last
    assert kinds == [GradientUpdateHandler, MetricHandler, ValidationHandler, _Count,
                     StoppingHandler, LoggingHandler]


def test_a_handler_watching_a_foreign_metric_is_refused():
    est = _estimator()
    stranger = mx.metric.Accuracy(name="mine")
    with pytest.raises(ValueError, match="'mine'.*estimator.train_metrics"):
        est.fit(loader(), epochs=1, event_handlers=[LoggingHandler(metrics=[stranger])])


@pytest.mark.parametrize("kwargs, message", [
    ({"epochs": 1, "batches": 2}, "exactly one of them, got epochs=1, batches=2"),
    ({}, "exactly one of them, got epochs=None, batches=None"),
])
def test_fit_needs_epochs_or_batches(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _estimator().fit(loader(), **kwargs)


def test_bad_arguments_say_what_to_pass():
    net = classifier()
    with pytest.raises(ValueError, match="train_data must be a gluon.data.DataLoader, got list"):
        _estimator(net).fit([mx.nd.ones((2, 6))], epochs=1)
    with pytest.raises(ValueError, match="loss must be a gluon.loss.Loss, got 'ce'"):
        Estimator(net, "ce", trainer=sgd(net))
    with pytest.raises(ValueError, match="context must be a Context.*got 'cpu'"):
        Estimator(net, CE(), trainer=sgd(net), context="cpu")
    with pytest.raises(AssertionError, match="gpu\\(100\\) is not available"):
        Estimator(net, CE(), trainer=sgd(net), context=[mx.gpu(100)])
    with pytest.raises(ValueError, match="trainer must be a gluon.Trainer, got 'sgd'"):
        Estimator(net, CE(), trainer="sgd")
    with pytest.raises(ValueError, match="log_interval must be 'epoch' or a positive"):
        LoggingHandler(log_interval=0)


def test_an_uninitialized_net_is_initialized_on_the_context():
    net = gluon.nn.Dense(3)
    with pytest.warns(UserWarning, match="No trainer specified"):
        est = Estimator(net, CE(), initializer=mx.init.One())
    est.fit(loader(), batches=1)
    assert net.weight.list_ctx() == [mx.cpu()]
