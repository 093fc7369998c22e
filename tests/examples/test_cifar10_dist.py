"""examples/cifar10_dist.py (d2l's ResNet-18) as real processes, on generated data: alone
with the embedded dist store, and as a two-worker, two-server job under minigluon-launch."""
import importlib
import re

import pytest

import minigluon as mx
from minigluon.gluon.model_zoo import vision

from example_run import EXAMPLES, epochs

TINY = ["--synthetic", "--batch-size", 2, "--max-batches", 1]


@pytest.mark.timeout(120)
def test_alone_with_the_embedded_store_and_lr_decay(run):
    job = run("cifar10_dist.py", *TINY, "--epochs", 2, "--lr", 0.05, "--lr-period", 1,
              "--lr-decay", 0.5)
    assert job.returncode == 0, job.text()
    assert "worker 0 of 1, kvstore dist_sync" in job.out
    assert "SYNTHETIC CIFAR-10-shaped images" in job.out
    assert "TRAINING ON SYNTHETIC DATA" not in job.err        # asked for: no alarm
    found = epochs(job.out)
    assert sorted(found) == [(0, 1), (0, 2)], job.text()
    assert [found[0, e]["lr"] for e in (1, 2)] == [0.05, 0.025]


@pytest.mark.timeout(120)
def test_two_workers_two_servers_under_the_launcher(run):
    job = run("cifar10_dist.py", *TINY, launch=["-n", 2, "-s", 2, "--launcher", "local"],
              timeout=100)
    assert job.returncode == 0, job.text()
    found = epochs(job.out)
    assert sorted(found) == [(0, 1), (1, 1)], job.text()
    # the launcher's prefix numbers the processes it started; kv.rank is given out at
    # rendezvous, so the two may differ
    assert sorted(re.findall(r"^\[worker (\d)\] worker (\d) of 2, kvstore dist_sync",
                             job.out, re.M)) in (
        [("0", "0"), ("1", "1")], [("0", "1"), ("1", "0")]), job.text()
    for rank in (0, 1):
        assert re.search(rf"^\[worker \d\] {re.escape(found[rank, 1]['line'])}$", job.out,
                         re.M), job.text()


def test_the_d2l_network_is_the_model_zoos_cifar_resnet18(monkeypatch):
    monkeypatch.syspath_prepend(EXAMPLES)
    script = importlib.import_module("cifar10_dist")
    x = mx.nd.zeros((1, 3, 32, 32))
    shapes = []
    for net in (script.resnet18(10), vision.cifar_resnet18(classes=10)):
        net.initialize()
        assert net(x).shape == (1, 10)
        shapes.append([p.shape for p in net.collect_params().values()])
    assert shapes[0] == shapes[1] and len(shapes[0]) == 110
