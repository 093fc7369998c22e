"""Full Gluon training step of LeNet (forward, loss, backward, trainer.step), batch 64 of
1x28x28, plain and hybridized, beside the same model and step in PyTorch.

LeNet: conv 20@5x5 relu, max-pool 2, conv 50@5x5 relu, max-pool 2, dense 500 relu,
dense 10; softmax cross-entropy; SGD with momentum 0.9. The three take turns in each
round; rates are medians over rounds, ratios and the hybridize speedup medians of the
per-round ratios (with the number of rounds the hybridized net won). Prints ONE JSON line:

    python benchmarks/lenet_train.py --torch-python /path/to/venv/bin/python
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
    x = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    return x, y


def minigluon_step(batch, hybridize):
    import minigluon as mx
    from minigluon import autograd, gluon, nd
    from minigluon.gluon.model_zoo import vision
    mx.random.seed(0)
    net = vision.lenet(classes=10)
    net.initialize(mx.init.Xavier())
    if hybridize:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.01, "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = batch_arrays(batch)
    data, label = nd.array(x), nd.array(y)

    def step():
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(batch)
    return step


def torch_worker(batch, threads):
    import torch
    from torch import nn
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x, y = batch_arrays(batch)
    data, label = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        loss_fn(net(data), label).backward()
        opt.step()
    serve_torch(step, threads)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--torch-python", default=None)
    ap.add_argument("--threads", type=int, default=None, help="(worker only)")
    ap.add_argument("--torch-worker", action="store_true", help="(internal)")
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args.batch, args.threads)
    threads = blas_threads()
    plain, hybrid = minigluon_step(args.batch, False), minigluon_step(args.batch, True)
    runners = {"plain": lambda n: time_steps(plain, n), "hybrid": lambda n: time_steps(hybrid, n)}
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
    speedup, faster = paired(rounds, "hybrid", "plain")
    report({"benchmark": "lenet_train", "batch": args.batch, "threads": threads,
            "rounds": args.rounds, "steps_per_round": args.steps,
            "minigluon_samples_per_s": round(rates["plain"], 1),
            "minigluon_hybridized_samples_per_s": round(rates["hybrid"], 1),
            "hybridize_speedup": round(speedup, 3),
            "hybridized_faster_in_rounds": f"{faster}/{args.rounds}",
            "torch_samples_per_s": None if torch_rate is None else round(torch_rate, 1),
            "ratio": None if torch_rate is None else
            round(paired(rounds, "hybrid", "torch")[0], 3),
            "ratio_plain": None if torch_rate is None else
            round(paired(rounds, "plain", "torch")[0], 3),
            "torch_version": client.info["version"] if client else None,
            "loadavg_1min": round(os.getloadavg()[0], 2), "note": note})


if __name__ == "__main__":
    main()
