"""What the example scripts share: the common flags, devices, the data sets (real files or
generated stand-ins), one training step and epoch, evaluation, and the per-epoch line.

The examples import it as `_common` (a script's own folder is on `sys.path`), so copy it
along with them; it is not part of the minigluon package.
"""
import itertools
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

import minigluon as mx
from minigluon import autograd, gluon
from minigluon.gluon.data import vision
from minigluon import telemetry

# the kvstore types mx.kv.create knows, aliases included: anything else is a usage error
KVSTORES = ("local", "device", "dist_sync", "dist_async", "dist_sync_device",
            "dist_async_device", "dist", "local_allreduce_cpu", "local_allreduce_device")
MNIST_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
               "t10k-labels-idx1-ubyte"]
CIFAR_MEAN = [0.4914, 0.4822, 0.4465]
CIFAR_STD = [0.2023, 0.1994, 0.2010]
SYNTHETIC_SIZES = {True: 2048, False: 512}      # train, test samples of the generated data


# ---- flags ---------------------------------------------------------------------------------
def add_common_args(ap, *, kvstore, epochs, batch_size, lr, wd):
    """Add the flags every example takes; the keyword arguments are their defaults."""
    ap.add_argument("--kvstore", default=kvstore, choices=KVSTORES, metavar="KVSTORE",
                    help="local, device, dist_sync, dist_async, dist_sync_device or "
                         f"dist_async_device (default {kvstore})")
    ap.add_argument("--gpus", type=int, default=0,
                    help="GPUs per worker: gpu(0) .. gpu(N-1); MINIGLUON_SIMULATED_GPUS=N "
                         "simulates them")
    ap.add_argument("--cpus", type=int, default=0,
                    help="CPU devices per worker: cpu(0) .. cpu(N-1) (default: cpu(0) alone)")
    ap.add_argument("--epochs", type=int, default=epochs)
    ap.add_argument("--batch-size", type=int, default=batch_size,
                    help="samples per step on each worker, split over its devices")
    ap.add_argument("--lr", type=float, default=lr, help="learning rate")
    ap.add_argument("--wd", type=float, default=wd, help="weight decay")
    ap.add_argument("--data-dir", default=None,
                    help="folder of the data set's files (default: $MINIGLUON_DATA/<name>, "
                         "else datasets/<name> in this checkout)")
    ap.add_argument("--synthetic", action="store_true",
                    help="train on generated data of the data set's shape (no files needed)")
    ap.add_argument("--max-batches", type=int, default=None,
                    help="at most N training and N test batches per epoch (smoke tests)")
    ap.add_argument("--seed", type=int, default=42)


def add_lr_schedule_args(ap, *, period, decay, warmup):
    """Add --lr-period, --lr-decay and --lr-warmup (see `lr_schedule`); the keywords are
    their defaults."""
    ap.add_argument("--lr-period", type=int, default=period,
                    help=f"multiply the learning rate by --lr-decay every this many epochs "
                         f"(default {period})")
    ap.add_argument("--lr-decay", type=float, default=decay, help=f"(default {decay})")
    ap.add_argument("--lr-warmup", type=float, default=warmup,
                    help="epochs over which the learning rate first rises from a tenth of "
                         f"--lr (default {warmup})")


def parse(ap):
    """Parse and check the common flags; a bad value ends the program with usage help."""
    args = ap.parse_args()
    if hasattr(args, "lr_warmup") and (args.lr_period < 1 or not 0 < args.lr_decay <= 1
                                       or args.lr_warmup < 0):
        ap.error(f"--lr-period must be at least 1, --lr-decay in (0, 1] and --lr-warmup at "
                 f"least 0, got --lr-period {args.lr_period} --lr-decay {args.lr_decay} "
                 f"--lr-warmup {args.lr_warmup}")
    for name in ("epochs", "batch_size", "max_batches"):
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.gpus < 0 or args.cpus < 0:
        ap.error(f"--gpus and --cpus count devices and cannot be negative, got --gpus "
                 f"{args.gpus} --cpus {args.cpus}")
    if args.gpus and args.cpus:
        ap.error(f"--gpus {args.gpus} and --cpus {args.cpus} both given; a worker trains on "
                 "one kind of device: pass only one of them")
    if args.gpus > mx.num_gpus():
        ap.error(f"--gpus {args.gpus}: this machine has {mx.num_gpus()} GPU(s); use at most "
                 f"that many, or set MINIGLUON_SIMULATED_GPUS={args.gpus} to simulate them")
    if args.synthetic and args.data_dir:
        ap.error(f"--synthetic and --data-dir {args.data_dir} both given; pass --data-dir to "
                 "train on real files, or --synthetic for generated data, not both")
    devices = args.gpus or args.cpus or 1
    if args.batch_size % devices:
        ap.error(f"--batch-size {args.batch_size} does not split evenly over {devices} "
                 f"devices; use a multiple of {devices}")
    return args


def contexts(args):
    """The devices this worker trains on, from --gpus / --cpus."""
    if args.gpus:
        return [mx.gpu(i) for i in range(args.gpus)]
    return [mx.cpu(i) for i in range(max(args.cpus, 1))]


# ---- data ----------------------------------------------------------------------------------
def default_data_dir(name):
    """Where data set `name` is looked for without --data-dir (as the datasets look)."""
    return vision.datasets.default_root(name)


def mnist(root, download=False):
    """(train, test) MNIST datasets from the IDX files in `root`, or None when absent; with
    `download`, the missing files are fetched first, and None means that failed too."""
    if not download and missing_mnist(root):
        return None
    try:
        return vision.MNIST(root=root, train=True), vision.MNIST(root=root, train=False)
    except vision.datasets.DatasetNotFoundError:
        return None


def missing_mnist(root):
    """The MNIST IDX files (gzipped or not) that `root` lacks."""
    return [n + ".gz" for n in MNIST_FILES if not _exists(os.path.join(root, n))]


def _exists(path):
    return os.path.exists(path) or os.path.exists(path + ".gz")


def no_data_error(script, dataset, root, wanted, fix):
    """End the program (exit status 1) because --data-dir `root` lacks `dataset`'s files:
    an explicit folder never falls back to generated data."""
    sys.exit(f"{script}: error: --data-dir {root!r} has no {dataset} files: it lacks "
             f"{', '.join(wanted)}.\nhelp: {fix}; or pass --synthetic to train on generated "
             "data instead")


# what `cifar10` looks for, for the error when none is there
CIFAR_LAYOUTS = ["cifar-10-batches-bin/", "cifar-10-batches-py/",
                 "train_valid_test/train/ with valid/ or test/"]


def cifar10(root):
    """(train, test) CIFAR-10 datasets from `root`, or None when absent.

    `root` holds the files of the binary or python distribution (as `CIFAR10` reads them),
    or image folders as d2l lays them out: `[train_valid_test/]train/<class>/*.png` and
    `valid/` (or `test/`) beside it.
    """
    batches = ["cifar-10-batches-bin/data_batch_1.bin", "data_batch_1.bin",
               "cifar-10-batches-py/data_batch_1"]
    if any(os.path.exists(os.path.join(root, b)) for b in batches):
        return vision.CIFAR10(root=root, train=True), vision.CIFAR10(root=root, train=False)
    for base in (os.path.join(root, "train_valid_test"), root):
        held_out = [os.path.join(base, d) for d in ("valid", "test")
                    if os.path.isdir(os.path.join(base, d))]
        if os.path.isdir(os.path.join(base, "train")) and held_out:
            return (vision.ImageFolderDataset(os.path.join(base, "train")),
                    vision.ImageFolderDataset(held_out[0]))
    return None


def synthetic_images(train, seed=0, shape=(32, 32, 3), classes=10):
    """A generated stand-in for CIFAR-10: (H, W, C) uint8 images whose class shows in their
    colour and the spacing of their stripes (the direction is random, so flips and crops
    keep the class), with noise. Same seed, same data."""
    num = SYNTHETIC_SIZES[train]
    palette = np.random.default_rng(seed).uniform(60, 196, (classes, shape[2]))
    rng = np.random.default_rng([seed, 1 if train else 2])
    labels = rng.integers(0, classes, num)
    angle = rng.uniform(0, np.pi, (num, 1, 1))
    period = (3 + labels)[:, None, None]                  # pixels from stripe to stripe
    yy, xx = np.mgrid[0:shape[0], 0:shape[1]]
    wave = np.sin((xx * np.cos(angle) + yy * np.sin(angle)) * (2 * np.pi / period)
                  + rng.uniform(0, 2 * np.pi, (num, 1, 1)))
    images = palette[labels][:, None, None, :] + 50 * wave[..., None] \
        + rng.normal(0, 20, (num,) + shape)
    data = mx.nd.array(np.clip(images, 0, 255), dtype="uint8")
    return gluon.data.ArrayDataset(data, labels.astype(np.int32))


def synthetic_digits(train, seed=0):
    """Generated MNIST-shaped digits (`SyntheticDigits`)."""
    return vision.SyntheticDigits(num_samples=SYNTHETIC_SIZES[train], train=train, seed=seed)


def warn_no_files(script, dataset, root, fix, why=""):
    """Say loudly, on stderr, that the real files are missing (`why`: more on that, e.g.
    ", and downloading them failed") and generated data is used."""
    bar = "*" * 78
    print(f"{bar}\n{script}: no {dataset} files in {root!r}{why}.\n"
          f"TRAINING ON SYNTHETIC DATA INSTEAD: its accuracies say nothing about {dataset}.\n"
          f"help: {fix}\n{bar}", file=sys.stderr, flush=True)


def describe(train, test, source):
    return f"{source} ({len(train)} train, {len(test)} test samples)"


# ---- training ------------------------------------------------------------------------------
def lr_schedule(args, store, steps):
    """(schedule, updates per epoch): --lr, multiplied by --lr-decay every --lr-period
    epochs of `steps` steps, after rising from a tenth of it over the first --lr-warmup
    epochs. Give it to the optimizer: on a dist kvstore the servers then run it, with no
    trainer.set_learning_rate call from the workers at each epoch."""
    # a sync server updates once per step of all workers, an async one once per push
    updates = steps * (store.num_workers if "async" in store.type else 1)
    schedule = mx.lr_scheduler.FactorScheduler(
        step=args.lr_period * updates, factor=args.lr_decay, base_lr=args.lr,
        warmup_steps=int(args.lr_warmup * updates), warmup_begin_lr=args.lr / 10)
    return schedule, updates


def train_batch(batch, ctx, net, trainer, loss_fn, metric=None):
    """One step on a batch split over the devices `ctx`; returns the summed loss."""
    data = gluon.utils.split_and_load(batch[0], ctx)
    label = gluon.utils.split_and_load(batch[1].astype("float32"), ctx)
    with autograd.record():
        outputs = [net(x) for x in data]
        losses = [loss_fn(out, y) for out, y in zip(outputs, label)]
    for loss in losses:
        loss.backward()
    trainer.step(batch[0].shape[0])
    if metric is not None:
        metric.update(label, outputs)
    return sum(loss.sum().asscalar() for loss in losses)


def evaluate(net, test_data, ctx, max_batches=None):
    """Accuracy of `net` on (at most `max_batches` batches of) `test_data`, on ctx[0]."""
    metric = mx.metric.Accuracy()
    for data, label in itertools.islice(test_data, max_batches):
        metric.update([label.astype("float32").as_in_context(ctx[0])],
                      [net(data.as_in_context(ctx[0]))])
    return metric.get()[1]


@dataclass
class EpochStats:
    loss: float
    accuracy: float
    samples: int
    seconds: float


def train_epoch(net, trainer, loss_fn, train_data, ctx, max_batches=None, bar=False,
                log_interval=0, label="", epoch=None, epochs=None, curves=None):
    """Train on (at most `max_batches` batches of) `train_data`; a tqdm bar with `bar`, a
    progress line every `log_interval` batches, the loss to `curves` (a `Curves`). Under
    minigluon-launch each batch is reported (rate-limited) to the launcher's job bar, with
    `epoch` of `epochs`. None when no batch was left to train: a worker restarted by
    minigluon-launch --max-restarts skips the epochs its rank had finished."""
    metric, total, count, start = mx.metric.Accuracy(), 0.0, 0, time.time()
    steps = steps_per_epoch(train_data, max_batches)
    batches = tqdm(itertools.islice(train_data, steps), total=steps, disable=not bar,
                   leave=False, unit="batch")
    for i, batch in enumerate(batches, 1):
        total += train_batch(batch, ctx, net, trainer, loss_fn, metric)
        count += batch[0].shape[0]
        telemetry.report(epoch=epoch, epochs=epochs, step=i, steps=steps,
                         loss=total / count, train_acc=metric.get()[1])
        if curves is not None:
            curves.batch(total, count)
        if log_interval and i % log_interval == 0:
            print(f"{label} batch {i}: {count / (time.time() - start):.1f} samples/s, "
                  f"loss {total / count:.4f}, train acc {metric.get()[1]:.4f}", flush=True)
    if count == 0:
        return None
    return EpochStats(total / count, metric.get()[1], count, time.time() - start)


def steps_per_epoch(train_data, max_batches):
    """How many steps an epoch takes; the same on every worker (equal data shares). The
    loader learns it too: a restarted worker's loader then skips epochs of that many
    batches (docs/restarts.md)."""
    steps = len(train_data) if max_batches is None else min(max_batches, len(train_data))
    train_data.steps_per_epoch = steps
    return steps


def check_enough_data(train_data, size, store, batch_size):
    """Exit with a message when this worker's share holds no full batch."""
    if len(train_data) == 0:
        sys.exit(f"worker {store.rank}: its share of the {size} training samples "
                 f"({size // store.num_workers} for each of {store.num_workers} workers) "
                 f"holds no full batch of {batch_size}; use a smaller --batch-size")


def show_bar(store):
    """A progress bar on worker 0 only, and only when a person is watching; none under
    minigluon-launch, whose own bar shows the whole job."""
    return store.rank == 0 and sys.stdout.isatty() and not telemetry.enabled()


def end_epoch(rank, epoch, epochs, stats, test_acc, lr, curves):
    """What every example does after an epoch: print its line, report its results to the
    launcher's bar and page (under minigluon-launch) and write them to `curves`. An
    epoch a restarted worker skipped (`stats` None) was reported by the lost process."""
    if stats is None:
        print(f"worker {rank} epoch {epoch}: trained before this worker was restarted",
              flush=True)
        return
    print(epoch_line(rank, epoch, stats, test_acc, lr), flush=True)
    telemetry.report(epoch=epoch, epochs=epochs, loss=stats.loss, train_acc=stats.accuracy,
                     test_acc=test_acc, epoch_end=True)
    curves.epoch(epoch, stats, test_acc, lr)


def epoch_line(rank, epoch, stats, test_acc, lr):
    """The one line each worker prints per epoch."""
    return (f"worker {rank} epoch {epoch}: {stats.samples / stats.seconds:.1f} samples/s, "
            f"loss {stats.loss:.4f}, train acc {stats.accuracy:.4f}, test acc {test_acc:.4f}, "
            f"{stats.seconds:.1f}s, lr {lr:g}")


# ---- TensorBoard curves (--logdir) ---------------------------------------------------------
def add_logdir_args(ap):
    """Add --logdir and --logdir-interval (see `Curves`)."""
    ap.add_argument("--logdir", metavar="DIR",
                    help="write TensorBoard event files (loss, accuracies, learning rate, "
                         "samples/s) into DIR; each worker of a job of several writes "
                         "DIR/worker-<rank>. View with: tensorboard --logdir DIR")
    ap.add_argument("--logdir-interval", type=int, default=10, metavar="N",
                    help="with --logdir, write the training loss every N batches (default 10)")


class Curves:
    """The scalars of --logdir: `batch/train_loss` (mean over the last --logdir-interval
    batches, step = batches trained) and, per epoch (step = epoch), `epoch/train_loss`,
    `epoch/train_acc`, `epoch/test_acc`, `epoch/learning_rate`, `epoch/samples_per_sec`.
    Without --logdir, every method does nothing.

    In a job of several workers each writes its own DIR/worker-<rank> (they train on different
    shares of the data, so their training curves differ); TensorBoard shows one run per
    worker. A single worker writes DIR itself."""

    def __init__(self, args, rank=0, num_workers=1):
        self.writer, self.every, self.step = None, args.logdir_interval, 0
        self._mark = (0.0, 0)               # running (loss sum, samples) at the last point
        if args.logdir is None:
            return
        if self.every < 1:
            sys.exit(f"--logdir-interval must be at least 1, got {self.every}")
        logdir = args.logdir if num_workers == 1 else os.path.join(args.logdir,
                                                                   f"worker-{rank}")
        from minigluon.gluon.contrib.estimator import summary_writer
        try:
            self.writer = summary_writer(logdir, flush_secs=10)
        except ImportError as err:          # tensorboardX missing: say how to install it
            sys.exit(f"--logdir {args.logdir}: {err}")

    def batch(self, loss_sum, samples):
        """After each batch, with the epoch's running loss sum and sample count."""
        if self.writer is None:
            return
        self.step += 1
        if samples < self._mark[1]:         # a new epoch restarted the running sums
            self._mark = (0.0, 0)
        if self.step % self.every == 0:
            window = (loss_sum - self._mark[0]) / (samples - self._mark[1])
            self.writer.add_scalar("batch/train_loss", window, self.step)
            self._mark = (loss_sum, samples)

    def epoch(self, epoch, stats, test_acc, lr):
        """After each epoch, with its `EpochStats`."""
        if self.writer is None:
            return
        for tag, value in (("train_loss", stats.loss), ("train_acc", stats.accuracy),
                           ("test_acc", test_acc), ("learning_rate", lr),
                           ("samples_per_sec", stats.samples / stats.seconds)):
            self.writer.add_scalar(f"epoch/{tag}", value, epoch)
        self.writer.flush()
        self._mark = (0.0, 0)

    def close(self):
        if self.writer is not None:
            self.writer.close()
