"""The weight-gradient products of MobileNet-v2's 1x1 layers (batch 16) on the columns path,
rows (F, n*P) @ columns^T (n*P, C): one product on the BLAS threads against
`long_product` (the sum split over the compute threads, each on one BLAS thread), taking
turns in every round. Wall and CPU seconds of the process (all threads); run on fixed
threads:

    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MINIGLUON_ADAPTIVE_THREADS=0 \\
        python benchmarks/long_product.py [--rounds 5]

Prints ONE JSON line: per shape the median wall and CPU milliseconds of each side and the
medians of the per-round split/plain ratios; the totals over the shapes.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from minigluon import threads  # noqa: E402
from minigluon.ndarray.long_product import long_product  # noqa: E402

SHAPES = {  # name: (F, C, positions per sample): the 1x1 layers below conv_pointwise's bound
    "112_16to96": (96, 16, 112 * 112), "56_24to144": (144, 24, 56 * 56),
    "56_144to24": (24, 144, 56 * 56), "28_32to192": (192, 32, 28 * 28),
    "28_192to32": (32, 192, 28 * 28), "14_64to384": (384, 64, 14 * 14),
    "14_384to96": (96, 384, 14 * 14), "7_160to960": (960, 160, 7 * 7),
    "7_960to320": (320, 960, 7 * 7),
}


def timed(call):
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    if args.rounds < 1 or args.batch < 1:
        sys.exit(f"long_product.py: --rounds and --batch must be at least 1, got "
                 f"{args.rounds} and {args.batch}")
    rng = np.random.default_rng(0)
    load = os.getloadavg()[0]
    result = {"benchmark": "long_product", "threads": threads.compute_threads(),
              "rounds": args.rounds, "batch": args.batch, "shapes": {}}
    totals = {k: 0.0 for k in ("plain_wall_ms", "split_wall_ms", "plain_cpu_ms",
                               "split_cpu_ms")}
    for name, (f, c, p) in SHAPES.items():
        rows = rng.standard_normal((f, args.batch * p)).astype(np.float32)
        cols = rng.standard_normal((c, args.batch * p)).astype(np.float32)
        sides = {"plain": lambda: rows @ cols.T, "split": lambda: long_product(rows, cols.T)}
        for call in sides.values():
            call()
        got = {side: [] for side in sides}
        for r in range(args.rounds):
            for side in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
                got[side].append(timed(sides[side]))
        row = {}
        for side, runs in got.items():
            for i, clock in enumerate(("wall", "cpu")):
                row[f"{side}_{clock}_ms"] = round(statistics.median(t[i] for t in runs) * 1e3, 2)
                totals[f"{side}_{clock}_ms"] += row[f"{side}_{clock}_ms"]
        for i, clock in enumerate(("wall", "cpu")):
            row[f"split_over_plain_{clock}"] = round(statistics.median(
                s[i] / max(p_[i], 1e-9) for s, p_ in zip(got["split"], got["plain"])), 3)
        result["shapes"][name] = row
    result["totals"] = {k: round(v, 1) for k, v in totals.items()}
    result["loadavg_1min_before"] = round(load, 2)
    result["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
