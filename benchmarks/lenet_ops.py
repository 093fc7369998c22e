"""Throughput of LeNet's layers, forward + backward, with minigluon ops beside PyTorch.

Layers: conv 20@5x5, relu, max-pool 2, conv 50@5x5, relu, max-pool 2, dense 500, relu,
dense 10, on float32 inputs of 1x28x28; the backward pass starts from a fixed head gradient
(no loss, no optimizer: `lenet_train.py` times those). Rounds of the two frameworks
alternate and the medians are reported as ONE JSON line. `minigluon_page_faults_per_step`
shows what fresh large arrays cost: glibc hands freed heap memory back to the OS between
steps unless MALLOC_TRIM_THRESHOLD_ (and MALLOC_MMAP_THRESHOLD_) are raised.

    python benchmarks/lenet_ops.py --torch-python /path/to/venv/bin/python
"""
import argparse
import os
import resource
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (TorchClient, blas_threads, interleaved_rates, report,  # noqa: E402
                     serve_torch, time_steps, torch_python)

SHAPES = {"w1": (20, 1, 5, 5), "b1": (20,), "w2": (50, 20, 5, 5), "b2": (50,),
          "w3": (500, 800), "b3": (500,), "w4": (10, 500), "b4": (10,)}


def make_inputs(batch, seed=0):
    """Input, parameters and head gradient as float32 NumPy arrays (same for both sides)."""
    rng = np.random.default_rng(seed)
    arrays = {name: (rng.standard_normal(shape) * 0.1).astype(np.float32)
              for name, shape in SHAPES.items()}
    arrays["x"] = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    arrays["head"] = rng.standard_normal((batch, 10)).astype(np.float32)
    return arrays


def minigluon_step(batch):
    """A function running one forward + backward pass with minigluon ops."""
    from minigluon import autograd, nd
    arrays = make_inputs(batch)
    x, head = nd.array(arrays.pop("x")), nd.array(arrays.pop("head"))
    p = {name: nd.array(a) for name, a in arrays.items()}
    for v in p.values():
        v.attach_grad()

    def step():
        with autograd.record():
            h = nd.relu(nd.Convolution(x, p["w1"], p["b1"], kernel=(5, 5), num_filter=20))
            h = nd.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max")
            h = nd.relu(nd.Convolution(h, p["w2"], p["b2"], kernel=(5, 5), num_filter=50))
            h = nd.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max")
            h = nd.relu(nd.FullyConnected(h, p["w3"], p["b3"], num_hidden=500))
            y = nd.FullyConnected(h, p["w4"], p["b4"], num_hidden=10)
        y.backward(head)
    return step


def torch_worker(batch, threads):
    """The PyTorch half, run by the harness in its own interpreter."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    arrays = make_inputs(batch)
    x, head = torch.from_numpy(arrays.pop("x")), torch.from_numpy(arrays.pop("head"))
    p = {name: torch.from_numpy(a).requires_grad_() for name, a in arrays.items()}

    def step():
        for v in p.values():
            v.grad = None
        h = F.max_pool2d(F.relu(F.conv2d(x, p["w1"], p["b1"])), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, p["w2"], p["b2"])), 2)
        h = F.relu(F.linear(h.flatten(1), p["w3"], p["b3"]))
        F.linear(h, p["w4"], p["b4"]).backward(head)
    serve_torch(step, threads)


class FaultCounter:
    """Wraps a runner (n -> seconds) and counts this process's minor page faults in it."""

    def __init__(self, step):
        self.step, self.faults, self.steps = step, 0, 0

    def __call__(self, n):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        seconds = time_steps(self.step, n)
        self.faults += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        self.steps += n
        return seconds


def start_torch(arg, batch, threads):
    """(TorchClient or None, a note explaining a None)."""
    python, note = torch_python(arg)
    if not python:
        return None, note
    try:
        return TorchClient(python, __file__, ["--batch", str(batch), "--threads",
                                              str(threads)]), None
    except (OSError, RuntimeError, ValueError) as err:
        return None, f"torch not measured: the worker under {python} failed ({err})"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=9, help="timed rounds per framework")
    ap.add_argument("--steps", type=int, default=10, help="steps per timed round")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per framework")
    ap.add_argument("--torch-python", default=None)
    ap.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args()


def main():
    args = parse_args()
    if args.torch_worker:
        return torch_worker(args.batch, args.threads)
    threads = blas_threads()
    ours = FaultCounter(minigluon_step(args.batch))
    client, note = start_torch(args.torch_python, args.batch, threads)
    runners = {"minigluon": ours, **({"torch": client.run} if client else {})}
    load_before = os.getloadavg()[0]
    try:
        rates = interleaved_rates(runners, args.batch, args.rounds, args.steps, args.warmup)
    finally:
        if client:
            client.close()
    torch_rate = rates.get("torch")
    report({
        "benchmark": "lenet_ops", "batch": args.batch, "threads": threads,
        "rounds": args.rounds, "steps_per_round": args.steps,
        "minigluon_samples_per_s": round(rates["minigluon"], 1),
        "torch_samples_per_s": None if torch_rate is None else round(torch_rate, 1),
        "ratio": None if torch_rate is None else round(rates["minigluon"] / torch_rate, 3),
        "torch_version": client.info["version"] if client else None,
        "torch_threads": client.info["threads"] if client else None,
        "minigluon_page_faults_per_step": round(ours.faults / max(ours.steps, 1)),
        "loadavg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "note": note})


if __name__ == "__main__":
    main()
