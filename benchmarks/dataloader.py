"""DataLoader throughput (batches/s) at num_workers 0 and 2, beside the LeNet training-step
rate it has to feed, measured in the same run with rounds alternating.

- MNIST (real digits from --mnist-root, default ../shared/data/mnist-split), batch 64,
  `transform_first(Compose([ToTensor(), Normalize(0.13, 0.31)]))`, shuffled.
- CIFAR-style: generated 32x32x3 uint8 images, batch 32, RandomResizedCrop(32) +
  RandomFlipLeftRight + ToTensor + Normalize.
- LeNet: one full training step at batch 64 (benchmarks/lenet_train.py's plain step).

Each loader round starts a fresh pass, reads one batch untimed (worker start-up), then
times `--batches` more. The goal is `mnist_w2 >= 5 x lenet_steps_per_s` (`mnist_ratio_w2`).
Prints ONE JSON line:

    python benchmarks/dataloader.py
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import blas_threads, pass_timer, report, time_steps  # noqa: E402
from lenet_train import minigluon_step  # noqa: E402

import minigluon as mx  # noqa: E402
from minigluon import nd  # noqa: E402
from minigluon.gluon.data import ArrayDataset, DataLoader  # noqa: E402
from minigluon.gluon.data.vision import MNIST, transforms  # noqa: E402

DEFAULT_MNIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                             "shared", "data", "mnist-split")


def mnist_dataset(root):
    pipeline = transforms.Compose([transforms.ToTensor(), transforms.Normalize(0.13, 0.31)])
    return MNIST(root=root, train=True).transform_first(pipeline)


def cifar_dataset(n=5000, seed=0):
    rng = np.random.default_rng(seed)
    images = nd.array(rng.integers(0, 256, (n, 32, 32, 3)), dtype="uint8")
    labels = rng.integers(0, 10, n).astype(np.int32)
    pipeline = transforms.Compose([
        transforms.RandomResizedCrop(32), transforms.RandomFlipLeftRight(),
        transforms.ToTensor(),
        transforms.Normalize((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010))])
    return ArrayDataset(images, labels).transform_first(pipeline)


def loader_runner(dataset, batch_size, num_workers):
    """f(n): seconds to read n batches of a fresh pass, after its first batch."""
    loader = DataLoader(dataset, batch_size, shuffle=True, last_batch="discard",
                        num_workers=num_workers)

    return pass_timer(lambda: iter(loader))


def alternating_rates(runners, rounds, pause=0.3):
    """Median steps/s of each runner (name -> (f(n) returning seconds, n)), rounds alternating."""
    for run, n in runners.values():
        run(max(1, n // 4))
    rates = {name: [] for name in runners}
    for _ in range(rounds):
        for name, (run, n) in runners.items():
            time.sleep(pause)
            rates[name].append(n / run(n))
    return {name: statistics.median(r) for name, r in rates.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mnist-root", default=DEFAULT_MNIST)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=150, help="timed batches per round")
    ap.add_argument("--lenet-steps", type=int, default=10)
    args = ap.parse_args()
    mx.random.seed(0)
    np.random.seed(0)
    lenet = minigluon_step(64, False)
    runners = {"lenet": (lambda n: time_steps(lenet, n), args.lenet_steps)}
    note = None
    if os.path.isdir(args.mnist_root):
        mnist = mnist_dataset(args.mnist_root)
        for workers in (0, 2):
            runners[f"mnist_w{workers}"] = (loader_runner(mnist, 64, workers), args.batches)
    else:
        note = f"MNIST not measured: no folder {os.path.abspath(args.mnist_root)}"
    cifar = cifar_dataset()
    for workers in (0, 2):
        runners[f"cifar_w{workers}"] = (loader_runner(cifar, 32, workers), args.batches)
    rates = alternating_rates(runners, args.rounds)
    lenet_rate = rates.pop("lenet")
    fields = {"benchmark": "dataloader", "cpus": len(os.sched_getaffinity(0)),
              "blas_threads": blas_threads(), "rounds": args.rounds,
              "batches_per_round": args.batches,
              "lenet_steps_per_s": round(lenet_rate, 1),
              "target_batches_per_s": round(5 * lenet_rate, 1)}
    fields.update({f"{name}_batches_per_s": round(rate, 1) for name, rate in rates.items()})
    fields.update({f"{name}_ratio": round(rate / lenet_rate, 2)
                   for name, rate in rates.items() if name.startswith("mnist")})
    fields.update({"loadavg_1min": round(os.getloadavg()[0], 2), "note": note})
    report(fields)


if __name__ == "__main__":
    main()
