"""What the estimator tests share: a small classifier, a fixed data set, and a handler that
records what the other handlers left in the metrics at every epoch's end."""
import numpy as np

import minigluon as mx
from minigluon import gluon
from minigluon.gluon import nn
from minigluon.gluon.contrib.estimator import EpochEnd

SAMPLES, FEATURES, CLASSES, BATCH = 48, 6, 3, 8     # 6 batches an epoch


def classifier():
    """A two-layer MLP, initialized the same way every call."""
    mx.random.seed(7)
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(16, activation="relu"), nn.Dense(CLASSES))
    net.initialize(mx.init.Xavier())
    return net


def dataset(seed=0):
    """Separable classes: each class is a cluster around its own centre (the same centres
    whatever the seed, which draws the samples)."""
    centres = np.random.RandomState(100).randn(CLASSES, FEATURES) * 3
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, CLASSES, SAMPLES)
    data = centres[labels] + rng.randn(SAMPLES, FEATURES)
    return gluon.data.ArrayDataset(mx.nd.array(data, dtype="float32"),
                                   mx.nd.array(labels, dtype="float32"))


def loader(seed=0, batch_size=BATCH):
    """Batches in a fixed order (no shuffle), so that two runs see the same steps."""
    return gluon.data.DataLoader(dataset(seed), batch_size=batch_size, shuffle=False)


def sgd(net, lr=0.1, **extra):
    return gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr, **extra})


def params(net):
    """The parameter values in order (names differ between instances)."""
    return [p.data().asnumpy() for p in net.collect_params().values()]


class Recorder(EpochEnd):
    """At each epoch's end (after metrics and validation, before logging), the value of
    every estimator metric and the learning rate."""

    def __init__(self, priority=1e9):
        self.priority = priority
        self.epochs = []

    def epoch_end(self, estimator, *args, **kwargs):
        row = {m.name: m.get()[1] for m in estimator.train_metrics + estimator.val_metrics}
        row["lr"] = estimator.trainer.learning_rate
        self.epochs.append(row)
        return False
