"""Distributed LeNet on MNIST, as in MXNet's "Distributed Training using Gluon" tutorial.

Each worker reads its own part of the training set (SplitSampler by kvstore rank), splits
every batch over its devices (split_and_load), and the Trainer pushes the gradients to the
kvstore: a dist store's servers sum them over the workers and run SGD with momentum. The
learning rate warms up over --lr-warmup epochs, then falls by --lr-decay every --lr-period
epochs. Each worker prints one line per epoch (samples/s, loss, train and test accuracy,
time, learning rate); worker 0 shows a progress bar when its output is a terminal. Run it
alone (a dist kvstore then starts its own scheduler and server), or launch a cluster:

    minigluon-launch -n 2 -s 2 python examples/mnist_dist.py --data-dir ../shared/data/mnist-split
    MINIGLUON_SIMULATED_GPUS=2 python examples/mnist_dist.py --gpus 2 --kvstore device \
        --data-dir ../shared/data/mnist-split

--data-dir holds the four MNIST IDX files, gzipped or not; a --data-dir without them is
an error. Without --data-dir the files are looked for in $MINIGLUON_DATA/mnist, else
datasets/mnist, and missing ones are downloaded there; when that fails too (no network),
it says so loudly and trains on generated digits (`gluon.data.vision.SyntheticDigits`)
instead, as --synthetic asks for.
"""
import argparse
import sys

import minigluon as mx
from minigluon import gluon, kv
from minigluon.gluon.data.vision import transforms
from minigluon.gluon.model_zoo import vision

import _common


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # lr: the servers sum the workers' gradients, each scaled by 1/--batch-size, so a step
    # goes as far as W workers' steps would. 0.03 suits 2 workers of 32 (64 per step); a
    # quarter of it in the second epoch gets LeNet to about 98% in two, and the warmup
    # keeps dist_async's first, stale steps from blowing up
    _common.add_common_args(ap, kvstore="dist_sync", epochs=2, batch_size=32, lr=0.03,
                            wd=1e-4)
    _common.add_lr_schedule_args(ap, period=1, decay=0.25, warmup=0.25)
    ap.add_argument("--momentum", type=float, default=0.9)
    _common.add_logdir_args(ap)
    return _common.parse(ap)


def datasets(args):
    """(train, test, description): MNIST from --data-dir (an error when its files are
    missing), else from the default folder (downloaded when missing), else generated
    digits."""
    if args.synthetic:
        data = [_common.synthetic_digits(train, args.seed) for train in (True, False)]
        return (*data, _common.describe(*data, "SYNTHETIC digits"))
    root = args.data_dir or _common.default_data_dir("mnist")
    missing = _common.missing_mnist(root) if args.data_dir else []
    found = None if missing else _common.mnist(root, download=not args.data_dir)
    if found is not None:
        return (*found, _common.describe(*found, f"MNIST from {root}"))
    if args.data_dir:
        _common.no_data_error(
            "mnist_dist.py", "MNIST", root, missing or _common.MNIST_FILES,
            "give the folder of MNIST's four IDX files (e.g. ../shared/data/mnist-split), "
            f"or download them there: python -c \"import minigluon as mx; "
            f"mx.gluon.data.vision.MNIST(root='{root}')\"")
    _common.warn_no_files(
        "mnist_dist.py", "MNIST", root,
        "pass --data-dir with train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
        "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz, or run once where the "
        "network is reachable; --synthetic silences this",
        why=", and downloading them failed")
    data = [_common.synthetic_digits(train, args.seed) for train in (True, False)]
    return (*data, _common.describe(*data, "SYNTHETIC digits"))


def loaders(args, store):
    train, test, source = datasets(args)
    to_tensor = transforms.ToTensor()
    # every worker reads a different, equally long part of the (shuffled) training set, and
    # drops its short last batch: all take as many steps, of the same size
    sampler = gluon.data.SplitSampler(len(train), store.num_workers, store.rank,
                                      seed=args.seed)
    train_data = gluon.data.DataLoader(train.transform_first(to_tensor), args.batch_size,
                                       sampler=sampler, last_batch="discard")
    test_data = gluon.data.DataLoader(test.transform_first(to_tensor), 500, shuffle=False)
    _common.check_enough_data(train_data, len(train), store, args.batch_size)
    return train_data, test_data, source


def main():
    args = parse_args()
    mx.random.seed(args.seed)
    store = kv.create(args.kvstore)
    ctx = _common.contexts(args)
    train_data, test_data, source = loaders(args, store)
    print(f"worker {store.rank} of {store.num_workers}, kvstore {store.type}, devices {ctx}, "
          f"data: {source}", flush=True)
    net = vision.lenet(classes=10)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net.hybridize()
    steps = _common.steps_per_epoch(train_data, args.max_batches)
    schedule, updates = _common.lr_schedule(args, store, steps)
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": args.lr, "momentum": args.momentum,
                             "wd": args.wd, "lr_scheduler": schedule}, kvstore=store)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    curves = _common.Curves(args, store.rank, store.num_workers)
    for epoch in range(1, args.epochs + 1):
        stats = _common.train_epoch(net, trainer, loss_fn, train_data, ctx, args.max_batches,
                                    bar=_common.show_bar(store), epoch=epoch,
                                    epochs=args.epochs, curves=curves)
        test_acc = _common.evaluate(net, test_data, ctx, args.max_batches)
        _common.end_epoch(store.rank, epoch, args.epochs, stats, test_acc,
                          schedule(epoch * updates), curves)
    curves.close()


if __name__ == "__main__":
    sys.exit(main())
