"""ResNet-18 on CIFAR-10 over several workers, as in d2l's multi-machine training chapter.

Each worker reads its own share of the training set (SplitBatchSampler by kvstore rank),
augments it (resize to 40, random square crop back to 32, horizontal flip), splits every
batch over its devices, and the Trainer sums the gradients through the kvstore, whose
servers run SGD with momentum. The learning rate falls by --lr-decay every --lr-period
epochs. Run it alone (a dist kvstore then starts its own scheduler and server) or launch
a cluster:

    minigluon-launch -n 2 -s 2 python examples/cifar10_dist.py --synthetic --max-batches 2
    python examples/cifar10_dist.py --data-dir datasets/cifar10 --epochs 10 --batch-size 128

--data-dir holds CIFAR-10 as `gluon.data.vision.CIFAR10` reads it, or d2l's image folders
(`train_valid_test/train/<class>/*.png`); without the files it trains on generated data
and says so. See docs/tutorials/cifar10-resnet.md.
"""
import argparse
import sys

import minigluon as mx
from minigluon import gluon, kv
from minigluon.gluon import nn
from minigluon.gluon.data.vision import transforms

import _common


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.add_common_args(ap, kvstore="dist_sync", epochs=1, batch_size=128, lr=0.1,
                            wd=5e-4)
    ap.add_argument("--lr-period", type=int, default=80,
                    help="multiply the learning rate by --lr-decay every this many epochs")
    ap.add_argument("--lr-decay", type=float, default=0.1)
    _common.add_logdir_args(ap)
    args = _common.parse(ap)
    if args.lr_period < 1 or not 0 < args.lr_decay <= 1:
        ap.error(f"--lr-period must be at least 1 and --lr-decay in (0, 1], got "
                 f"--lr-period {args.lr_period} --lr-decay {args.lr_decay}")
    return args


# ---- the model: d2l's ResNet-18 for 32x32 images --------------------------------------------
class Residual(nn.HybridBlock):
    """Two 3x3 convolutions with batch norm, added to the input; a 1x1 convolution brings
    the input to the new shape when `use_1x1conv` (with `strides` 2: half the size)."""

    def __init__(self, num_channels, use_1x1conv=False, strides=1, **kwargs):
        super().__init__(**kwargs)
        self.conv1 = nn.Conv2D(num_channels, kernel_size=3, padding=1, strides=strides)
        self.conv2 = nn.Conv2D(num_channels, kernel_size=3, padding=1)
        if use_1x1conv:
            self.conv3 = nn.Conv2D(num_channels, kernel_size=1, strides=strides)
        else:
            self.conv3 = None
        self.bn1 = nn.BatchNorm()
        self.bn2 = nn.BatchNorm()

    def hybrid_forward(self, F, X):
        Y = F.relu(self.bn1(self.conv1(X)))
        Y = self.bn2(self.conv2(Y))
        if self.conv3 is not None:
            X = self.conv3(X)
        return F.relu(Y + X)


def resnet18(num_classes):
    """A 3x3 stem without pooling, four stages of two residual blocks (64 to 512
    channels), global average pooling and the classifier."""
    net = nn.HybridSequential()
    net.add(nn.Conv2D(64, kernel_size=3, strides=1, padding=1),
            nn.BatchNorm(), nn.Activation("relu"))

    def resnet_block(num_channels, num_residuals, first_block=False):
        blk = nn.HybridSequential()
        for i in range(num_residuals):
            if i == 0 and not first_block:
                blk.add(Residual(num_channels, use_1x1conv=True, strides=2))
            else:
                blk.add(Residual(num_channels))
        return blk

    net.add(resnet_block(64, 2, first_block=True), resnet_block(128, 2),
            resnet_block(256, 2), resnet_block(512, 2))
    net.add(nn.GlobalAvgPool2D(), nn.Dense(num_classes))
    return net


# ---- data ------------------------------------------------------------------------------------
def datasets(args):
    """(train, test, description): CIFAR-10 from --data-dir (an error when absent), else
    from the default folder, else generated images."""
    root = args.data_dir or _common.default_data_dir("cifar10")
    found = None if args.synthetic else _common.cifar10(root)
    if found is not None:
        return (*found, _common.describe(*found, f"CIFAR-10 from {root}"))
    if args.data_dir:
        _common.no_data_error(
            "cifar10_dist.py", "CIFAR-10", root, _common.CIFAR_LAYOUTS,
            "put one of those there, or download it: python -c \"import minigluon as mx; "
            f"mx.gluon.data.vision.CIFAR10(root='{root}')\"")
    if not args.synthetic:
        _common.warn_no_files(
            "cifar10_dist.py", "CIFAR-10", root,
            "put cifar-10-batches-bin/ (or cifar-10-batches-py/, or d2l's train_valid_test/) "
            "there, or pass --data-dir; python -c \"import minigluon as mx; "
            f"mx.gluon.data.vision.CIFAR10(root='{root}')\" downloads it; --synthetic "
            "silences this")
    data = [_common.synthetic_images(train, args.seed) for train in (True, False)]
    return (*data, _common.describe(*data, "SYNTHETIC CIFAR-10-shaped images"))


def loaders(args, store):
    normalize = [transforms.ToTensor(), transforms.Normalize(_common.CIFAR_MEAN,
                                                             _common.CIFAR_STD)]
    augment = transforms.Compose([
        transforms.Resize(40),
        # a square of 64% to 100% of the area, scaled back to 32x32
        transforms.RandomResizedCrop(32, scale=(0.64, 1.0), ratio=(1.0, 1.0)),
        transforms.RandomFlipLeftRight(), *normalize])
    train, test, source = datasets(args)
    # equal shares, and the short last batch dropped: every worker takes as many steps of
    # the same size (the servers keep the gradient scale of the first step)
    sampler = gluon.data.SplitBatchSampler(len(train), args.batch_size, store.num_workers,
                                           store.rank, last_batch="discard", seed=args.seed)
    train_data = gluon.data.DataLoader(train.transform_first(augment), batch_sampler=sampler)
    test_data = gluon.data.DataLoader(test.transform_first(transforms.Compose(normalize)),
                                      args.batch_size, shuffle=False)
    _common.check_enough_data(train_data, len(train), store, args.batch_size)
    return train_data, test_data, source


def main():
    args = parse_args()
    mx.random.seed(args.seed)
    store = kv.create(args.kvstore)
    ctx = _common.contexts(args)
    train_data, test_data, source = loaders(args, store)
    print(f"worker {store.rank} of {store.num_workers}, kvstore {store.type}, devices "
          f"{ctx}, data: {source}", flush=True)
    net = resnet18(10)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net.hybridize()
    # The servers run the optimizer (and so the learning rate): a schedule travels with it
    # and needs no trainer.set_learning_rate call at each epoch.
    steps = _common.steps_per_epoch(train_data, args.max_batches)
    schedule = mx.lr_scheduler.FactorScheduler(step=args.lr_period * steps,
                                               factor=args.lr_decay, base_lr=args.lr)
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": args.lr, "momentum": 0.9, "wd": args.wd,
                             "lr_scheduler": schedule}, kvstore=store)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    curves = _common.Curves(args, store.rank, store.num_workers)
    for epoch in range(1, args.epochs + 1):
        mx.random.seed(args.seed + epoch)        # the augmentations of this epoch
        stats = _common.train_epoch(net, trainer, loss_fn, train_data, ctx, args.max_batches,
                                    bar=_common.show_bar(store), epoch=epoch,
                                    epochs=args.epochs, curves=curves)
        test_acc = _common.evaluate(net, test_data, ctx, args.max_batches)
        _common.end_epoch(store.rank, epoch, args.epochs, stats, test_acc,
                          schedule(epoch * steps), curves)
    curves.close()


if __name__ == "__main__":
    sys.exit(main())
