"""Train a model-zoo network on MNIST or CIFAR-10, on one device, several, or several
workers: the script MXNet's distributed-training FAQ launches.

    python examples/image_classification.py --dataset cifar10 --model vgg11 --epochs 1
    minigluon-launch -n 2 -s 2 python examples/image_classification.py --dataset cifar10 \
        --model vgg11 --epochs 1 --kvstore dist_sync

Models are `gluon.model_zoo.vision.get_model` names (lenet, mlp, cifar_resnet18,
resnet18_v1 ... resnet152_v2, vgg11 ... vgg19_bn, alexnet, densenet121, inceptionv3,
mobilenet1.0, mobilenetv2_0.5, squeezenet1.1, ...). Images smaller than a model needs
(VGG's five poolings want 32x32, Inception v3 75x75) are resized, and the script says so. --save-params PATH writes, after each epoch, the parameters (PATH), the trainer
states (PATH.states) and the epoch (PATH.json), from worker 0; --resume PATH loads them on
every worker and trains on up to --epochs. Without the data files it trains on generated
data and says so.
"""
import argparse
import json
import os
import sys

import minigluon as mx
from minigluon import gluon, kv
from minigluon.base import MXNetError
from minigluon.gluon.data.vision import transforms
from minigluon.gluon.model_zoo import vision

import _common

SIDE = {"mnist": 28, "cifar10": 32}            # the data sets' image size
# model-name prefix -> smallest input side (measured: the largest side each fails at + 1)
MIN_SIDE = {"vgg": 32, "alexnet": 63, "densenet": 32, "squeezenet1.0": 32, "inceptionv3": 75}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=sorted(SIDE), default="cifar10")
    ap.add_argument("--model", default="resnet18_v1",
                    help="a model-zoo name: lenet, mlp, resnet18_v1, vgg11, ...")
    _common.add_common_args(ap, kvstore="device", epochs=3, batch_size=32, lr=0.1, wd=1e-4)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--gc-type", choices=["none", "2bit"], default="none",
                    help="gradient compression of what workers push (distributed kvstores)")
    ap.add_argument("--gc-threshold", type=float, default=0.5,
                    help="2bit: send +-threshold where the gradient not sent yet reaches it, "
                         "else 0")
    ap.add_argument("--log-interval", type=int, default=50,
                    help="print a progress line every N batches (0: never)")
    ap.add_argument("--save-params", metavar="PATH",
                    help="after each epoch, worker 0 writes PATH, PATH.states and PATH.json")
    ap.add_argument("--resume", metavar="PATH",
                    help="continue from what --save-params PATH wrote")
    _common.add_logdir_args(ap)
    args = _common.parse(ap)
    try:
        args.net = vision.get_model(args.model, classes=10)
    except MXNetError as err:
        ap.error(f"--model {args.model}: {err}")
    return args


# ---- data ------------------------------------------------------------------------------------
def datasets(args):
    """(train, test, description) of --dataset: real files (an error when an explicit
    --data-dir lacks them) or generated."""
    root = args.data_dir or _common.default_data_dir(args.dataset)
    find = _common.mnist if args.dataset == "mnist" else _common.cifar10
    found = None if args.synthetic else find(root)
    if found is not None:
        return (*found, _common.describe(*found, f"{args.dataset} from {root}"))
    cls = "MNIST" if args.dataset == "mnist" else "CIFAR10"
    download = (f"python -c \"import minigluon as mx; mx.gluon.data.vision.{cls}"
                f"(root='{root}')\"")
    if args.data_dir:
        wanted = _common.missing_mnist(root) if args.dataset == "mnist" \
            else _common.CIFAR_LAYOUTS
        _common.no_data_error("image_classification.py", args.dataset, root,
                              wanted or _common.MNIST_FILES,
                              f"put the files there, or download them: {download}")
    if not args.synthetic:
        _common.warn_no_files(
            "image_classification.py", args.dataset, root,
            f"pass --data-dir with the files, or download them: {download}; --synthetic "
            "silences this")
    make = _common.synthetic_digits if args.dataset == "mnist" else _common.synthetic_images
    data = [make(train, args.seed) for train in (True, False)]
    return (*data, _common.describe(*data, f"SYNTHETIC {args.dataset}-shaped images"))


def transform_lists(args):
    """(train, test) transforms: a resize when the model needs larger images, a random
    crop and flip for CIFAR-10 training, then ToTensor (and Normalize for CIFAR-10)."""
    side = SIDE[args.dataset]
    need = max([v for k, v in MIN_SIDE.items() if args.model.lower().startswith(k)],
               default=side)
    resize = []
    if need > side:
        print(f"note: {args.model} needs images of at least {need}x{need}; resizing "
              f"{args.dataset}'s {side}x{side} images to {need}x{need}", flush=True)
        resize = [transforms.Resize(need)]
    tensor = [transforms.ToTensor()]
    if args.dataset == "mnist":
        return resize + tensor, resize + tensor
    tensor.append(transforms.Normalize(_common.CIFAR_MEAN, _common.CIFAR_STD))
    augment = [transforms.RandomCrop(side, pad=4), transforms.RandomFlipLeftRight()]
    return resize + augment + tensor, resize + tensor


def loaders(args, store):
    train, test, source = datasets(args)
    train_tf, test_tf = (transforms.Compose(t) for t in transform_lists(args))
    sampler = gluon.data.SplitBatchSampler(len(train), args.batch_size, store.num_workers,
                                           store.rank, last_batch="discard", seed=args.seed)
    train_data = gluon.data.DataLoader(train.transform_first(train_tf), batch_sampler=sampler)
    test_data = gluon.data.DataLoader(test.transform_first(test_tf), args.batch_size)
    _common.check_enough_data(train_data, len(train), store, args.batch_size)
    return train_data, test_data, sampler, source


def compression(args):
    if args.gc_type == "none":
        return None
    return {"type": args.gc_type, "threshold": args.gc_threshold}


# ---- checkpoints -----------------------------------------------------------------------------
def save_checkpoint(path, net, trainer, epoch, args):
    """Parameters, trainer states and the epoch, each written whole or not at all."""
    for suffix, write in (("", net.save_parameters), (".states", trainer.save_states)):
        write(path + suffix + ".tmp")
        os.replace(path + suffix + ".tmp", path + suffix)
    with open(path + ".json.tmp", "w") as fout:
        json.dump({"epoch": epoch, "model": args.model, "dataset": args.dataset}, fout)
    os.replace(path + ".json.tmp", path + ".json")


def read_checkpoint(path, args):
    """The epoch --resume PATH continues after; exits when PATH does not fit this run."""
    missing = [p for p in (path, path + ".states", path + ".json") if not os.path.exists(p)]
    if missing:
        sys.exit(f"--resume {path}: {', '.join(missing)} not found; help: pass the PATH "
                 "that an earlier run wrote with --save-params PATH")
    with open(path + ".json") as fin:
        meta = json.load(fin)
    if (meta["model"], meta["dataset"]) != (args.model.lower(), args.dataset):
        sys.exit(f"--resume {path}: it holds a {meta['model']} trained on {meta['dataset']}, "
                 f"but this run asks for --model {args.model} --dataset {args.dataset}; "
                 "help: pass the same --model and --dataset")
    return meta["epoch"]


def build(args, ctx, store, done):
    """The network and its Trainer, restored from --resume when given."""
    net = args.net
    net.initialize(mx.init.Xavier(magnitude=2), ctx=ctx)
    if args.resume:
        net.load_parameters(args.resume, ctx=ctx)
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": args.lr, "momentum": args.momentum,
                             "wd": args.wd}, kvstore=store,
                            compression_params=compression(args))
    if args.resume:
        # every worker loads: a worker's own optimizer, or the servers' (the same states)
        trainer.load_states(args.resume + ".states")
        print(f"worker {store.rank}: resumed from {args.resume} after epoch {done}"
              + ("" if done < args.epochs else f"; --epochs is {args.epochs}: nothing to do"),
              flush=True)
    return net, trainer


def main():
    args = parse_args()
    args.model = args.model.lower()
    done = read_checkpoint(args.resume, args) if args.resume else 0
    mx.random.seed(args.seed)
    store = kv.create(args.kvstore)
    ctx = _common.contexts(args)
    train_data, test_data, sampler, source = loaders(args, store)
    print(f"worker {store.rank} of {store.num_workers}, kvstore {store.type}, devices {ctx}, "
          f"model {args.model}, data: {source}", flush=True)
    net, trainer = build(args, ctx, store, done)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    curves = _common.Curves(args, store.rank, store.num_workers)
    for epoch in range(done + 1, args.epochs + 1):
        mx.random.seed(args.seed + epoch)       # each epoch's randomness, resumed or not
        sampler.set_epoch(epoch)
        stats = _common.train_epoch(net, trainer, loss_fn, train_data, ctx, args.max_batches,
                                    _common.show_bar(store), args.log_interval,
                                    f"worker {store.rank} epoch {epoch}", epoch, args.epochs,
                                    curves)
        test_acc = _common.evaluate(net, test_data, ctx, args.max_batches)
        _common.end_epoch(store.rank, epoch, args.epochs, stats, test_acc,
                          trainer.learning_rate, curves)
        if args.save_params and store.rank == 0:
            save_checkpoint(args.save_params, net, trainer, epoch, args)
    curves.close()


if __name__ == "__main__":
    sys.exit(main())
