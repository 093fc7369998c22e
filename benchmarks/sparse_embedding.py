"""One training step of a large embedding table, with a dense and a row_sparse gradient
(`nn.Embedding(sparse_grad=True)`), rounds alternating, medians of each.

The dense gradient costs the whole table (vocab x dim) per step; the row_sparse one only
the rows the batch looks up, and the lazy SGD-momentum update touches only those rows.
Prints ONE JSON line with both step times and their ratio:

    python benchmarks/sparse_embedding.py --vocab 200000 --dim 64 --batch 512
"""
import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import blas_threads, report, time_steps  # noqa: E402

import minigluon as mx  # noqa: E402
from minigluon import autograd, gluon  # noqa: E402


def make_step(vocab, dim, batch, sparse_grad):
    """A closure running one forward, backward and Trainer step."""
    net = gluon.nn.Embedding(vocab, dim, sparse_grad=sparse_grad)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.1, "momentum": 0.9})
    x = mx.nd.array(np.random.RandomState(0).randint(0, vocab, (batch,)))

    def step():
        with autograd.record():
            loss = net(x).sum()
        loss.backward()
        trainer.step(batch)
        mx.nd.waitall()
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=200000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=7, help="rounds of each")
    parser.add_argument("--steps", type=int, default=5, help="steps per round")
    args = parser.parse_args()
    steps = {name: make_step(args.vocab, args.dim, args.batch, name == "sparse")
             for name in ("dense", "sparse")}
    for step in steps.values():
        step()                                  # warm-up: allocations, first states
    times = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            times[name].append(time_steps(step, args.steps) / args.steps)
    dense, sparse = (statistics.median(times[n]) * 1000 for n in ("dense", "sparse"))
    report({"benchmark": "sparse_embedding", "vocab": args.vocab, "dim": args.dim,
            "batch": args.batch, "blas_threads": blas_threads(),
            "dense_step_ms": round(dense, 3), "sparse_step_ms": round(sparse, 3),
            "dense_over_sparse": round(dense / sparse, 2)})


if __name__ == "__main__":
    main()
