"""1x1 convolutions on big feature maps, forward + backward: the pointwise matmul path
(conv_pointwise.py) against the columns path it replaced, side by side in one process.

Shapes: 1x1 layers whose samples are big enough for the new path (ResNet-50's first
bottleneck reduction, a wider one, and the layer of MXNet's test_slice_batchnorm on a
smaller map), and three below the threshold, which run the old path both times.
Each round times every shape once on each path, the order alternating by round, so load
drift on a shared machine hits both alike. Prints ONE JSON line: per shape the median
milliseconds of old and new and the median of the per-round new/old ratios.

    python benchmarks/conv_pointwise.py [--rounds 5] [--batch 4]
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/conv_pointwise.py --zoo

`--zoo` times instead the 1x1 layers of MobileNet-v2 (batch 16) and DenseNet-121 (batch 8)
at 224x224, every one of them forced onto the pointwise path for "new" (the thresholds
set to 0), in CPU seconds of this process (time.process_time), to place the thresholds;
`--clock wall` times them by the wall clock instead (on fixed threads, quiet).

On an oversubscribed machine (load far above the cores), multi-threaded BLAS spends its
time waking threads, per call, which punishes the per-sample matmuls of the new path; run
with OPENBLAS_NUM_THREADS=1 there to compare the work each path does.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from minigluon import autograd, config, nd  # noqa: E402
from minigluon.ndarray import conv_pointwise  # noqa: E402
from harness import blas_threads  # noqa: E402

SHAPES = {  # name: (channels, size, filters, stride)
    # on the pointwise path (a sample's channels at least conv_pointwise.MIN_SAMPLE_BYTES)
    "c256_56_f64": (256, 56, 64, 1),           # ResNet-50 stage 1, reducing
    "c1024_56_f256": (1024, 56, 256, 1),       # twice the channels and filters
    "c128_128_f128": (128, 128, 128, 1),       # MXNet's test_slice_batchnorm, a quarter map
    # below the threshold: the same (columns) path both times, to show nothing got slower
    "c64_56_f256": (64, 56, 256, 1),
    "c512_28_f128": (512, 28, 128, 1),
    "c16_128_f16": (16, 128, 16, 1),
}

ZOO_SHAPES = {  # name: (batch, channels, size, filters, stride)
    "mbv2_c32_112_f16": (16, 32, 112, 16, 1),
    "mbv2_c16_112_f96": (16, 16, 112, 96, 1),
    "mbv2_c96_56_f24": (16, 96, 56, 24, 1),
    "mbv2_c24_56_f144": (16, 24, 56, 144, 1),
    "mbv2_c144_56_f24": (16, 144, 56, 24, 1),
    "mbv2_c144_28_f32": (16, 144, 28, 32, 1),
    "mbv2_c32_28_f192": (16, 32, 28, 192, 1),
    "mbv2_c192_28_f32": (16, 192, 28, 32, 1),
    "mbv2_c192_14_f64": (16, 192, 14, 64, 1),
    "mbv2_c64_14_f384": (16, 64, 14, 384, 1),
    "mbv2_c384_14_f64": (16, 384, 14, 64, 1),
    "mbv2_c576_14_f96": (16, 576, 14, 96, 1),
    "mbv2_c96_14_f576": (16, 96, 14, 576, 1),
    "mbv2_c160_7_f960": (16, 160, 7, 960, 1),
    "mbv2_c960_7_f160": (16, 960, 7, 160, 1),
    "mbv2_c320_7_f1280": (16, 320, 7, 1280, 1),
    "dn_c64_56_f128": (8, 64, 56, 128, 1),
    "dn_c224_56_f128": (8, 224, 56, 128, 1),
    "dn_c256_56_f128": (8, 256, 56, 128, 1),
    "dn_c160_28_f128": (8, 160, 28, 128, 1),
    "dn_c352_28_f128": (8, 352, 28, 128, 1),
    "dn_c480_28_f128": (8, 480, 28, 128, 1),
    "dn_c320_14_f128": (8, 320, 14, 128, 1),
    "dn_c640_14_f128": (8, 640, 14, 128, 1),
    "dn_c992_14_f128": (8, 992, 14, 128, 1),
    "dn_c608_7_f128": (8, 608, 7, 128, 1),
    "dn_c992_7_f128": (8, 992, 7, 128, 1),
    "dn_trans_c512_28_f256": (8, 512, 28, 256, 1),
    "dn_trans_c1024_14_f512": (8, 1024, 14, 512, 1),
}


def make_step(batch, channels, size, filters, stride, seed=0):
    """One forward + backward of a 1x1 convolution with bias, gradients for all inputs."""
    rng = np.random.default_rng(seed)
    x = nd.array(rng.standard_normal((batch, channels, size, size)).astype(np.float32))
    w = nd.array((rng.standard_normal((filters, channels, 1, 1)) * 0.1).astype(np.float32))
    b = nd.zeros((filters,))
    for v in (x, w, b):
        v.attach_grad()

    def step():
        with autograd.record():
            y = nd.Convolution(x, w, b, kernel=(1, 1), stride=(stride, stride),
                               num_filter=filters)
        y.backward()
        w.grad.wait_to_read()
    return step


def timed(step, path, force=False, clock=time.perf_counter):
    """Milliseconds of one step on `path` ('old': columns, 'new': pointwise, on every
    shape when `force`)."""
    names = ("MIN_SAMPLE_BYTES", "MIN_POSITIONS", "ONE_THREAD_MIN_POSITIONS")
    saved = [getattr(conv_pointwise, name) for name in names]
    if path == "old":
        conv_pointwise.MIN_SAMPLE_BYTES = conv_pointwise.ONE_THREAD_MIN_POSITIONS = 10 ** 15
    elif force:
        for name in names:
            setattr(conv_pointwise, name, 0)
    try:
        start = clock()
        step()
        return (clock() - start) * 1e3
    finally:
        for name, value in zip(names, saved):
            setattr(conv_pointwise, name, value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--zoo", action="store_true",
                        help="the zoo's 1x1 layers, all forced onto the pointwise path, CPU time")
    parser.add_argument("--clock", choices=("wall", "cpu"),
                        help="what to time (default: cpu with --zoo, else wall); on fixed "
                             "threads of a quiet machine the wall says what a step waits")
    args = parser.parse_args()
    if args.zoo:
        steps = {name: make_step(*shape) for name, shape in ZOO_SHAPES.items()}
    else:
        steps = {name: make_step(args.batch, *shape) for name, shape in SHAPES.items()}
    clock = time.process_time if (args.clock or ("cpu" if args.zoo else "wall")) == "cpu" \
        else time.perf_counter
    times = {name: {"old": [], "new": []} for name in steps}
    for name, step in steps.items():        # warm up both paths (allocator, BLAS threads)
        timed(step, "old", args.zoo, clock)
        timed(step, "new", args.zoo, clock)
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for name, step in steps.items():
            for path in order:
                times[name][path].append(timed(step, path, args.zoo, clock))
    result = {}
    for name, t in times.items():
        ratios = [n / o for o, n in zip(t["old"], t["new"])]
        result[name] = {"old_ms": round(statistics.median(t["old"]), 2),
                        "new_ms": round(statistics.median(t["new"]), 2),
                        "new_over_old": round(statistics.median(ratios), 3)}
    print(json.dumps({"benchmark": "conv_pointwise", "batch": args.batch,
                      "rounds": args.rounds, "zoo": args.zoo, "blas_threads": blas_threads(),
                      "clock": "cpu" if clock is time.process_time else "wall",
                      "kernel_threads": config.compute_threads(),
                      "load_avg_1min": os.getloadavg()[0], "shapes": result}))


if __name__ == "__main__":
    main()
