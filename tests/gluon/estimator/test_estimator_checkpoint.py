"""CheckpointHandler: real .params/.states files that load back, the newest max_checkpoints
kept, the best one kept aside, the hybridized graph saved, and a resumed run that ends
exactly where an uninterrupted one does."""
import os

import numpy as np
import pytest

import minigluon as mx
from minigluon import gluon
from minigluon.gluon.contrib.estimator import CheckpointHandler, Estimator

from estimator_kit import classifier, loader, params, sgd


def _fit(model_dir, epochs, **handler_kwargs):
    net = classifier()
    net.hybridize()
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(),
                    trainer=sgd(net, momentum=0.9))
    handler = CheckpointHandler(str(model_dir), **handler_kwargs)
    est.fit(loader(), epochs=epochs, event_handlers=[handler])
    return est, handler


def test_a_resumed_run_ends_where_an_uninterrupted_one_does(tmp_path):
    straight, _ = _fit(tmp_path / "straight", 4)
    _fit(tmp_path / "resumed", 2, max_checkpoints=2)
    resumed, _ = _fit(tmp_path / "resumed", 4, max_checkpoints=2, resume_from_checkpoint=True)
    assert resumed.max_epoch == 2                        # only the epochs left
    for ours, theirs in zip(params(resumed.net), params(straight.net), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    # 6 batches an epoch; the older checkpoints found at resume count against the limit
    assert sorted(os.listdir(tmp_path / "resumed")) == [
        "model-epoch2batch18.params", "model-epoch2batch18.states",
        "model-epoch3batch24.params", "model-epoch3batch24.states", "model-symbol.json"]


def test_the_files_load_back(tmp_path):
    est, _ = _fit(tmp_path, 2, model_prefix="mlp", monitor=None)
    net = classifier()
    net.load_parameters(str(tmp_path / "mlp-epoch1batch12.params"))
    for ours, theirs in zip(params(net), params(est.net), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    graph = mx.sym.load(str(tmp_path / "mlp-symbol.json"))
    assert len(graph.list_arguments()) == 5               # data and two (weight, bias)
    trainer = sgd(net, momentum=0.9)
    trainer.load_states(str(tmp_path / "mlp-epoch1batch12.states"))
    assert trainer.optimizer.momentum == 0.9


def test_save_best_and_batch_period(tmp_path):
    net = classifier()
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=sgd(net))
    handler = CheckpointHandler(str(tmp_path), monitor=est.train_metrics[0], save_best=True,
                                epoch_period=None, batch_period=4, max_checkpoints=1)
    est.fit(loader(), batches=8, event_handlers=[handler])
    assert sorted(os.listdir(tmp_path)) == ["model-best.params", "model-best.states",
                                            "model-epoch1batch7.params",
                                            "model-epoch1batch7.states"]
    assert handler.best == pytest.approx(est.train_metrics[0].get()[1])


def test_resume_needs_the_period_fit_counts(tmp_path):
    with pytest.raises(ValueError, match="fit counts epochs, but epoch_period=None and "
                                         "batch_period=2"):
        _fit(tmp_path, 1, epoch_period=None, batch_period=2, resume_from_checkpoint=True)


def test_resume_past_the_end_says_how_to_go_on(tmp_path):
    _fit(tmp_path, 2)
    with pytest.raises(ValueError, match="already trained the 2 epochs fit asks for"):
        _fit(tmp_path, 2, resume_from_checkpoint=True)


def test_save_best_needs_a_metric(tmp_path):
    with pytest.raises(ValueError, match="monitor must be an EvalMetric, got None"):
        CheckpointHandler(str(tmp_path), save_best=True)
    with pytest.raises(ValueError, match="mode must be 'auto', 'min' or 'max', got 'up'"):
        CheckpointHandler(str(tmp_path), save_best=True, monitor=mx.metric.Accuracy(),
                          mode="up")
