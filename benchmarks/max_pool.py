"""Max pooling with its argmax, forward, on one thread: minigluon_ext against PyTorch.

    python benchmarks/max_pool.py [--torch-python P] [--rounds 5] [--steps 5]

The zoo's pooling shapes: ResNet's 3x3 stride-2 padded pooling after the stem (16, 64,
112, 112) and LeNet's 2x2 stride-2 (64, 20, 24, 24). Both sides on one thread, taking
turns round by round (harness.interleaved_rounds); PyTorch runs `max_pool2d` with
`return_indices=True`, which is what a training forward needs (minigluon keeps the argmax
too). Prints one JSON line: per shape the median ms a call of each side and their ratio
(above 1: minigluon is faster).
"""
import argparse
import os
import statistics
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import harness  # noqa: E402

# name -> (input shape, kernel, stride, pad)
SHAPES = {"resnet_stem_3x3s2": ((16, 64, 112, 112), 3, 2, 1),
          "lenet_2x2s2": ((64, 20, 24, 24), 2, 2, 0)}


def ours(name):
    from minigluon_ext import native
    shape, k, s, p = SHAPES[name]
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    return lambda: native.max_pool2d(x, (k, k), (s, s), (p, p), nthreads=1)


def theirs(name):
    import torch
    torch.set_num_threads(1)
    shape, k, s, p = SHAPES[name]
    x = torch.randn(*shape)
    return lambda: torch.nn.functional.max_pool2d(x, k, s, p, return_indices=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-python", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--torch-worker", metavar="SHAPE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        harness.serve_torch(theirs(args.torch_worker), 1)
        return
    python, why = harness.torch_python(args.torch_python)
    results = {}
    for name in SHAPES:
        runners = {"minigluon": lambda n, f=ours(name): harness.time_steps(f, n)}
        client = harness.TorchClient(python, __file__, [name]) if python else None
        if client:
            runners["torch"] = client.run
        try:
            rounds = harness.interleaved_rounds(runners, 1, args.rounds, args.steps, warmup=2)
        finally:
            if client:
                client.close()
        row = {f"{side}_ms": round(1000 / statistics.median(r), 2) for side, r in rounds.items()}
        if client:
            row["ratio"], won = harness.paired(rounds, "minigluon", "torch")
            row["ratio"], row["won"] = round(row["ratio"], 3), f"{won}/{args.rounds}"
        results[name] = row
    harness.report({"benchmark": "max_pool", "threads": 1, "rounds": args.rounds,
                    "shapes": results, "torch": why or "measured",
                    "loadavg_1min": round(os.getloadavg()[0], 2)})


if __name__ == "__main__":
    sys.exit(main())
