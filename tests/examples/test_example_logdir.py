"""--logdir: a two-worker mnist_dist.py job under minigluon-launch writes TensorBoard event
files, one folder per worker, and TensorBoard's own reader finds in them the values each
worker printed in its epoch lines."""
import pytest

from example_run import epochs

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason='the test extra installs tensorboard: pip install -e ".[test]"')
pytest.importorskip("tensorboardX", reason='the test extra installs it: pip install -e ".[test]"')

DEADLINE = 120          # seconds; a quiet machine needs about 10
BATCHES, EPOCHS, EVERY = 4, 2, 2


def _scalars(logdir):
    acc = event_accumulator.EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


@pytest.mark.timeout(DEADLINE + 30)
def test_each_worker_writes_curves_tensorboard_reads(run, tmp_path):
    logdir = tmp_path / "curves"
    job = run("mnist_dist.py", "--synthetic", "--max-batches", BATCHES, "--epochs", EPOCHS,
              "--logdir", logdir, "--logdir-interval", EVERY,
              launch=["-n", 2, "-s", 1, "--launcher", "local"], timeout=DEADLINE)
    assert job.returncode == 0, job.text()
    printed = epochs(job.out)
    assert sorted(p.name for p in logdir.iterdir()) == ["worker-0", "worker-1"]
    for rank in (0, 1):
        scalars = _scalars(logdir / f"worker-{rank}")
        assert set(scalars) == {"batch/train_loss", "epoch/train_loss", "epoch/train_acc",
                                "epoch/test_acc", "epoch/learning_rate",
                                "epoch/samples_per_sec"}, scalars
        assert [s for s, _ in scalars["batch/train_loss"]] == list(
            range(EVERY, BATCHES * EPOCHS + 1, EVERY))
        for tag, key in (("train_loss", "loss"), ("train_acc", "train_acc"),
                         ("test_acc", "test_acc"), ("learning_rate", "lr")):
            points = scalars[f"epoch/{tag}"]
            assert [s for s, _ in points] == list(range(1, EPOCHS + 1))
            # the epoch line prints 4 decimals (the learning rate with %g)
            assert [v for _, v in points] == pytest.approx(
                [printed[rank, e][key] for e in range(1, EPOCHS + 1)], abs=1e-4), tag
        assert all(v > 0 for _, v in scalars["epoch/samples_per_sec"])
