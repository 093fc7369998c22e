"""Distributed LeNet on MNIST, as in MXNet's "Distributed Training using Gluon" tutorial.

Each worker reads its own part of the training set (SplitSampler by kvstore rank), splits
every batch over its devices (split_and_load), and the Trainer sums gradients through the
kvstore. Run it alone (the dist kvstore then starts its own scheduler and server), or
launch a cluster:

    minigluon-launch -n 2 -s 2 python examples/mnist_dist.py --data-dir ../shared/data/mnist-split
    MINIGLUON_SIMULATED_GPUS=2 python examples/mnist_dist.py --gpus 2 --kvstore device
"""
import argparse
import os
import time

import minigluon as mx
from minigluon import gluon, kv
from minigluon.gluon.data.vision import transforms
from minigluon.gluon.model_zoo import vision

from _common import evaluate, train_batch

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                            "data", "mnist-split")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=DEFAULT_DATA, help="folder with the MNIST IDX files")
    ap.add_argument("--kvstore", default="dist_sync", help="dist_sync, dist_async, local, ...")
    ap.add_argument("--gpus", type=int, default=0, help="GPUs per worker (0: use the CPU)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64, help="per worker")
    ap.add_argument("--lr", type=float, default=0.05,
                    help="the servers sum the workers' gradients, so W workers step W times as far")
    ap.add_argument("--seed", type=int, default=42)
    return ap.parse_args()


def data_loaders(args, store):
    transform = transforms.ToTensor()
    train = gluon.data.vision.MNIST(root=args.data_dir, train=True).transform_first(transform)
    test = gluon.data.vision.MNIST(root=args.data_dir, train=False).transform_first(transform)
    # every worker reads a different, equally long part of the training set
    sampler = gluon.data.SplitSampler(len(train), store.num_workers, store.rank)
    train_data = gluon.data.DataLoader(train, args.batch_size, sampler=sampler,
                                       last_batch="discard")
    test_data = gluon.data.DataLoader(test, 500, shuffle=False)
    return train_data, test_data


def main():
    args = parse_args()
    mx.random.seed(args.seed)
    store = kv.create(args.kvstore)
    print(f"worker {store.rank} of {store.num_workers}, kvstore {store.type}", flush=True)
    ctx = [mx.gpu(i) for i in range(args.gpus)] if args.gpus else [mx.cpu()]
    net = vision.lenet(classes=10)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": args.lr, "momentum": 0.9, "wd": 1e-4},
                            kvstore=store)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    train_data, test_data = data_loaders(args, store)
    for epoch in range(args.epochs):
        start, total, count = time.time(), 0.0, 0
        for batch in train_data:
            total += train_batch(batch, ctx, net, trainer, loss_fn)
            count += batch[0].shape[0]
        accuracy = evaluate(net, test_data, ctx)
        print(f"worker {store.rank} epoch {epoch + 1}: loss {total / count:.4f}, "
              f"test accuracy {accuracy:.4f}, {time.time() - start:.1f}s", flush=True)


if __name__ == "__main__":
    main()
