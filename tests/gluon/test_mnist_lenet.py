"""Real data: LeNet on the MNIST split beside the checkout reaches >= 97% test accuracy
within 3 epochs (seeded).

Seeded is not enough: the kernels' sums split over threads, and the adaptive thread count
follows the machine's load, so the rounding, and the accuracy, moved with the load
(0.9745 on 2 fixed threads, 0.9795 on 1, 0.9695 once on a loaded machine). The test holds
the count at one thread, so that the run is the same on every machine."""
import gzip
import os
import struct

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon, nd, threads
from minigluon.gluon.model_zoo import vision

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "mnist-split")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        zero, code, ndim = struct.unpack(">HBB", f.read(4))
        assert zero == 0 and code == 0x08, f"{path}: not an unsigned-byte IDX file"
        shape = struct.unpack(f">{ndim}I", f.read(4 * ndim))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(shape)


def load(prefix):
    images = read_idx(os.path.join(DATA, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(DATA, f"{prefix}-labels-idx1-ubyte.gz"))
    return images[:, None].astype(np.float32) / 255, labels.astype(np.float32)


@pytest.mark.skipif(not os.path.isdir(DATA), reason="../shared/data/mnist-split is not present")
def test_lenet_reaches_97_percent_in_3_epochs(monkeypatch):
    monkeypatch.setenv("MINIGLUON_ADAPTIVE_THREADS", "0")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads.look_again()
    try:
        _train_and_check()
    finally:
        monkeypatch.undo()
        threads.look_again()


def _train_and_check():
    mx.random.seed(7)
    rng = np.random.default_rng(7)
    train_x, train_y = load("train")
    test_x, test_y = load("t10k")
    assert train_x.shape == (8000, 1, 28, 28) and test_x.shape == (2000, 1, 28, 28)
    net = vision.lenet(classes=10)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.05, "momentum": 0.9, "wd": 1e-4})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    batch = 32
    for epoch in range(3):
        order = rng.permutation(len(train_x))
        for i in range(0, len(order) - batch + 1, batch):
            idx = order[i:i + batch]
            data, label = nd.array(train_x[idx]), nd.array(train_y[idx])
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(batch)
    metric = mx.metric.Accuracy()
    for i in range(0, len(test_x), 500):
        metric.update([nd.array(test_y[i:i + 500])], [net(nd.array(test_x[i:i + 500]))])
    accuracy = metric.get()[1]
    assert accuracy >= 0.97, f"LeNet test accuracy {accuracy:.4f} after 3 epochs"
