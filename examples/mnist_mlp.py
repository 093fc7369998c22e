"""Train a two-layer perceptron on MNIST with the array layer alone.

Uses mx.nd, mx.autograd, mx.init, mx.optimizer and mx.metric — everything below Gluon —
so it is the smallest complete training loop minigluon runs. Reads the standard IDX files
(train-images-idx3-ubyte.gz, ...) from --data-dir.

    python examples/mnist_mlp.py --data-dir ../shared/data/mnist-split --epochs 3

--logdir DIR writes the loss, the accuracies, the learning rate and samples/s as TensorBoard
event files (`tensorboard --logdir DIR` shows them; needs `pip install "minigluon[tensorboard]"`).
"""
import argparse
import gzip
import os
import struct
import time

import numpy as np

import minigluon as mx
from minigluon import autograd, nd

import _common


def read_idx(path):
    """Read an IDX file (optionally gzipped) into a NumPy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        zero, dtype_code, ndim = struct.unpack(">HBB", f.read(4))
        if zero != 0 or dtype_code != 0x08:
            raise ValueError(f"{path}: not an unsigned-byte IDX file")
        shape = struct.unpack(f">{ndim}I", f.read(4 * ndim))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(shape)


def idx_path(data_dir, name):
    """`name` in `data_dir`, gzipped or not, or None when it is not there."""
    for path in (os.path.join(data_dir, name + ".gz"), os.path.join(data_dir, name)):
        if os.path.exists(path):
            return path
    return None


def load_split(data_dir, prefix):
    images = read_idx(idx_path(data_dir, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(idx_path(data_dir, f"{prefix}-labels-idx1-ubyte"))
    return images.reshape(len(images), -1).astype(np.float32) / 255.0, labels.astype(np.float32)


def check_data_dir(parser, data_dir):
    """A usage error naming the IDX files that `data_dir` lacks, if any."""
    names = [f"{p}-{k}-idx{d}-ubyte" for p in ("train", "t10k")
             for k, d in (("images", 3), ("labels", 1))]
    missing = [n + ".gz" for n in names if idx_path(data_dir, n) is None]
    if missing:
        parser.error(f"--data-dir {data_dir!r} lacks {', '.join(missing)}; help: give the "
                     "folder of MNIST's four IDX files, e.g. ../shared/data/mnist-split")


class MLP:
    """784 -> hidden -> 10 with ReLU, parameters as plain NDArrays."""

    def __init__(self, hidden, ctx):
        init = mx.init.Xavier(magnitude=2.24)
        self.params = {
            "fc1_weight": nd.zeros((hidden, 784), ctx=ctx), "fc1_bias": nd.zeros((hidden,), ctx=ctx),
            "fc2_weight": nd.zeros((10, hidden), ctx=ctx), "fc2_bias": nd.zeros((10,), ctx=ctx),
        }
        for name, arr in self.params.items():
            init(mx.init.InitDesc(name), arr)
            arr.attach_grad()

    def __call__(self, x):
        p = self.params
        h = nd.relu(nd.FullyConnected(x, p["fc1_weight"], p["fc1_bias"], num_hidden=p["fc1_bias"].shape[0]))
        return nd.FullyConnected(h, p["fc2_weight"], p["fc2_bias"], num_hidden=10)


def batches(x, y, batch_size, rng):
    order = rng.permutation(len(x))
    for i in range(0, len(x) - batch_size + 1, batch_size):
        idx = order[i:i + batch_size]
        yield x[idx], y[idx]


def evaluate(net, x, y, ctx, batch_size=500):
    metric = mx.metric.Accuracy()
    for i in range(0, len(x), batch_size):
        out = net(nd.array(x[i:i + batch_size], ctx=ctx))
        metric.update([nd.array(y[i:i + batch_size], ctx=ctx)], [out])
    return metric.get()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                          "shared", "data", "mnist-split"))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=42)
    _common.add_logdir_args(parser)
    args = parser.parse_args()
    check_data_dir(parser, args.data_dir)

    mx.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    ctx = mx.cpu()
    train_x, train_y = load_split(args.data_dir, "train")
    test_x, test_y = load_split(args.data_dir, "t10k")
    net = MLP(args.hidden, ctx)
    names = list(net.params)
    updater = mx.optimizer.get_updater(
        mx.optimizer.create("sgd", learning_rate=args.lr, momentum=0.9, wd=1e-4,
                            rescale_grad=1.0 / args.batch_size))
    loss_metric, train_acc = mx.metric.Loss(), mx.metric.Accuracy()
    curves = _common.Curves(args)
    for epoch in range(args.epochs):
        start = time.time()
        loss_metric.reset()
        train_acc.reset()
        for xb, yb in batches(train_x, train_y, args.batch_size, rng):
            data, label = nd.array(xb, ctx=ctx), nd.array(yb, ctx=ctx)
            with autograd.record():
                logits = net(data)
                loss = -nd.pick(nd.log_softmax(logits), label)
            loss.backward()
            for i, name in enumerate(names):
                updater(i, net.params[name].grad, net.params[name])
            loss_metric.update(None, [loss])
            train_acc.update([label], [logits])
            curves.batch(loss_metric.sum_metric, loss_metric.num_inst)
        acc = evaluate(net, test_x, test_y, ctx)
        print(f"epoch {epoch + 1}: train loss {loss_metric.get()[1]:.4f}, "
              f"test accuracy {acc:.4f}, {time.time() - start:.1f}s", flush=True)
        curves.epoch(epoch + 1, _common.EpochStats(loss_metric.get()[1], train_acc.get()[1],
                                                   loss_metric.num_inst, time.time() - start),
                     acc, args.lr)
    curves.close()


if __name__ == "__main__":
    main()
