"""TensorBoardHandler: a real training run writes event files with tensorboardX, and
TensorBoard's own reader (EventAccumulator) finds the tags, steps and values the metrics had.
Without tensorboardX, minigluon still imports and the handler says how to install it."""
import subprocess
import sys

import pytest

from minigluon import gluon
from minigluon.gluon.contrib.estimator import Estimator, TensorBoardHandler

from estimator_kit import BATCH, SAMPLES, Recorder, classifier, loader, sgd

pytest.importorskip("tensorboardX", reason='the test extra installs it: pip install -e ".[test]"')
event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason='the test extra installs tensorboard: pip install -e ".[test]"')

EPOCHS, INTERVAL = 2, 2


def _read(logdir):
    acc = event_accumulator.EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


def test_a_training_run_writes_what_tensorboard_reads(tmp_path):
    net = classifier()
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=sgd(net, lr=0.05))
    recorder = Recorder()
    est.fit(loader(), loader(seed=1), epochs=EPOCHS, event_handlers=[
        TensorBoardHandler(logdir=tmp_path, log_interval=INTERVAL), recorder])
    scalars = _read(tmp_path)
    per_epoch = {"epoch/train/accuracy": "training accuracy",
                 "epoch/train/loss": "training softmaxcrossentropyloss",
                 "epoch/val/accuracy": "validation accuracy",
                 "epoch/val/loss": "validation softmaxcrossentropyloss",
                 "epoch/learning_rate": "lr"}
    batches = EPOCHS * SAMPLES // BATCH
    assert set(scalars) == set(per_epoch) | {"batch/train/accuracy", "batch/train/loss",
                                             "batch/learning_rate"}
    for tag, name in per_epoch.items():
        assert [step for step, _ in scalars[tag]] == list(range(EPOCHS))
        expected = [row[name] for row in recorder.epochs]
        assert [value for _, value in scalars[tag]] == pytest.approx(expected, rel=1e-6)
    assert [step for step, _ in scalars["batch/train/loss"]] == list(
        range(INTERVAL, batches + 1, INTERVAL))
    # the last batch point is the epoch's running value, as the epoch point is
    assert scalars["batch/train/loss"][-1][1] == pytest.approx(scalars["epoch/train/loss"][-1][1])
    lrs = [v for _, v in scalars["batch/learning_rate"]]
    assert lrs == pytest.approx([0.05] * (batches // INTERVAL))


def test_an_open_writer_is_flushed_not_closed(tmp_path):
    from tensorboardX import SummaryWriter
    writer = SummaryWriter(logdir=str(tmp_path))
    net = classifier()
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=sgd(net))
    est.fit(loader(), batches=3, event_handlers=[TensorBoardHandler(writer=writer)])
    writer.add_scalar("after/fit", 1.5, 7)       # still open
    writer.close()
    scalars = _read(tmp_path)
    assert scalars["after/fit"] == [(7, 1.5)]
    assert [step for step, _ in scalars["epoch/train/accuracy"]] == [0]


def test_outside_fit_it_says_where_it_belongs(tmp_path):
    net = classifier()
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=sgd(net))
    with pytest.raises(RuntimeError, match="pass it to fit"):
        est.evaluate(loader(), event_handlers=[TensorBoardHandler(logdir=tmp_path)])


def test_bad_arguments():
    with pytest.raises(ValueError, match="exactly one of logdir and writer, got logdir=None"):
        TensorBoardHandler()
    with pytest.raises(ValueError, match="log_interval must be 'epoch' or a positive integer, "
                                         "got 'batch'"):
        TensorBoardHandler(logdir="x", log_interval="batch")


def test_without_tensorboardx_minigluon_imports_and_the_handler_says_how_to_install():
    # a None entry in sys.modules makes `import tensorboardX` fail as if it were absent
    code = ("import sys; sys.modules['tensorboardX'] = None\n"
            "import minigluon as mx\n"
            "from minigluon.gluon.contrib.estimator import TensorBoardHandler\n"
            "try:\n    TensorBoardHandler(logdir='runs')\n"
            "except ImportError as err:\n    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "TensorBoardHandler(logdir='runs') writes event files with the tensorboardX " \
        "package, which is not installed" in out
    assert 'help: pip install "minigluon[tensorboard]"' in out
