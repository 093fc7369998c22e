"""Full Gluon training step of the CIFAR ResNet-18 (d2l's multi-machine chapter), batch 32
of 3x32x32, hybridized, beside the same model and step in PyTorch.

The two take turns in each round; rates are medians over rounds, the ratio the median of
the per-round ratios. Prints ONE JSON line:

    python benchmarks/resnet18_train.py --torch-python /path/to/venv/bin/python
"""
import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (TorchClient, blas_threads, interleaved_rounds, paired,  # noqa: E402
                     report, serve_torch, time_steps, torch_python)


def batch_arrays(batch, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((batch, 3, 32, 32)).astype(np.float32),
            rng.integers(0, 10, batch))


def minigluon_step(batch, hybridize=True):
    import minigluon as mx
    from minigluon import autograd, gluon, nd
    from minigluon.gluon.model_zoo import vision
    mx.random.seed(0)
    net = vision.cifar_resnet18(classes=10)
    net.initialize(mx.init.Xavier())
    if hybridize:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.01, "momentum": 0.9, "wd": 5e-4})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = batch_arrays(batch)
    data, label = nd.array(x), nd.array(y)

    def step():
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(batch)
    return step


def torch_resnet18(classes=10):
    from torch import nn

    class Residual(nn.Module):
        def __init__(self, cin, cout, use_1x1conv, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1)
            self.conv3 = nn.Conv2d(cin, cout, 1, stride) if use_1x1conv else None
            self.bn1, self.bn2 = nn.BatchNorm2d(cout), nn.BatchNorm2d(cout)

        def forward(self, x):
            y = nn.functional.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return nn.functional.relu(y + (self.conv3(x) if self.conv3 is not None else x))

    layers = [nn.Conv2d(3, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, first in ((64, True), (128, False), (256, False), (512, False)):
        layers += [Residual(cin, cout, not first, 1 if first else 2), Residual(cout, cout, False, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def torch_worker(batch, threads):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = torch_resnet18()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = batch_arrays(batch)
    data, label = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        loss_fn(net(data), label).backward()
        opt.step()
    serve_torch(step, threads)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--torch-python", default=None)
    ap.add_argument("--threads", type=int, default=None, help="(worker only)")
    ap.add_argument("--torch-worker", action="store_true", help="(internal)")
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args.batch, args.threads)
    threads = blas_threads()
    step = minigluon_step(args.batch)
    runners = {"minigluon": lambda n: time_steps(step, n)}
    python, note = torch_python(args.torch_python)
    client = None
    if python:
        client = TorchClient(python, __file__, ["--batch", str(args.batch),
                                                "--threads", str(threads)])
        runners["torch"] = client.run
    try:
        rounds = interleaved_rounds(runners, args.batch, args.rounds, args.steps, args.warmup)
    finally:
        if client:
            client.close()
    rates = {name: statistics.median(r) for name, r in rounds.items()}
    torch_rate = rates.get("torch")
    report({"benchmark": "resnet18_train", "batch": args.batch, "threads": threads,
            "rounds": args.rounds, "steps_per_round": args.steps,
            "minigluon_images_per_s": round(rates["minigluon"], 2),
            "torch_images_per_s": None if torch_rate is None else round(torch_rate, 2),
            "ratio": None if torch_rate is None else
            round(paired(rounds, "minigluon", "torch")[0], 3),
            "faster_in_rounds": None if torch_rate is None else
            f"{paired(rounds, 'minigluon', 'torch')[1]}/{args.rounds}",
            "torch_version": client.info["version"] if client else None,
            "loadavg_1min": round(os.getloadavg()[0], 2), "note": note})


if __name__ == "__main__":
    main()
