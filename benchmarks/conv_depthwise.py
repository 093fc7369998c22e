"""Depthwise convolutions (num_group == channels), forward + backward: the direct kernels
(conv_depthwise.py) against the grouped columns path they replaced, side by side in one
process.

Shapes: every depthwise layer of MobileNet-v2 1.0 at 224x224 (3x3, pad 1, stride 1 and
2), plus a 5x5 and a 7x7 window, a channel multiplier of 2 and a tiny map, so the choice
in conv_host.host_conv rests on more than MobileNet. Each round times every shape once on
each path, the order alternating by round, so load drift on a shared machine hits both
alike. Times are CPU seconds of this process (time.process_time), which a busy machine
inflates less than wall time; run with OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 to compare
the work each path does. Prints ONE JSON line: per shape the median milliseconds of old
and new and the median of the per-round new/old ratios.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/conv_depthwise.py \
        [--rounds 3] [--batch 16]

With --kernels it compares the two direct kernels instead, kind by kind (forward, data
gradient, filter gradient) on `--threads` threads: plane by plane (`rows`, depthwise.c)
against eight planes at a time (`blocks`, depthwise_blocks.c); per shape the median
milliseconds of each, the median per-round blocks/rows ratio, and the path that
minigluon_ext.depthwise_blocked chooses:

    python benchmarks/conv_depthwise.py --kernels [--threads 1] [--rounds 5] \
        [--shapes mbv2_c960_7_s1,...]
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import minigluon_ext as ext  # noqa: E402
from minigluon import autograd, nd  # noqa: E402
from minigluon.ndarray import conv_depthwise  # noqa: E402

SHAPES = {  # name: (channels, size, kernel, stride, multiplier)
    "mbv2_c32_112_s1": (32, 112, 3, 1, 1),
    "mbv2_c96_112_s2": (96, 112, 3, 2, 1),
    "mbv2_c144_56_s1": (144, 56, 3, 1, 1),
    "mbv2_c144_56_s2": (144, 56, 3, 2, 1),
    "mbv2_c192_28_s1": (192, 28, 3, 1, 1),
    "mbv2_c192_28_s2": (192, 28, 3, 2, 1),
    "mbv2_c384_14_s1": (384, 14, 3, 1, 1),
    "mbv2_c576_14_s1": (576, 14, 3, 1, 1),
    "mbv2_c576_14_s2": (576, 14, 3, 2, 1),
    "mbv2_c960_7_s1": (960, 7, 3, 1, 1),
    "k5_c64_28_s1": (64, 28, 5, 1, 1),
    "k7_c64_28_s2": (64, 28, 7, 2, 1),
    "m2_c32_28_s1": (32, 28, 3, 1, 2),
    "tiny_c8_5_s1": (8, 5, 3, 1, 1),
}


def make_step(batch, channels, size, kernel, stride, multiplier, seed=0):
    """One forward + backward of a depthwise convolution with bias, all gradients."""
    rng = np.random.default_rng(seed)
    filters = channels * multiplier
    x = nd.array(rng.standard_normal((batch, channels, size, size)).astype(np.float32))
    w = nd.array(rng.standard_normal((filters, 1, kernel, kernel)).astype(np.float32))
    b = nd.zeros((filters,))
    for v in (x, w, b):
        v.attach_grad()

    def step():
        with autograd.record():
            y = nd.Convolution(x, w, b, kernel=(kernel, kernel), stride=(stride, stride),
                               pad=(kernel // 2, kernel // 2), num_filter=filters,
                               num_group=channels)
        y.backward()
        w.grad.wait_to_read()
    return step


def timed(step, path):
    """CPU milliseconds of one step on `path` ('old': grouped columns, 'new': direct)."""
    saved = conv_depthwise._DEPTHWISE
    conv_depthwise._DEPTHWISE = path == "new"
    try:
        start = time.process_time()
        step()
        return (time.process_time() - start) * 1e3
    finally:
        conv_depthwise._DEPTHWISE = saved


KINDS = ("forward", "data", "weight")


def kernel_calls(batch, channels, size, kernel, stride, multiplier, threads, seed=0):
    """{kind: {path: call}}: one call of each direct kernel on this shape, either path."""
    rng = np.random.default_rng(seed)
    filters = channels * multiplier
    x = rng.standard_normal((batch, channels, size, size)).astype(np.float32)
    w = rng.standard_normal((filters, 1, kernel, kernel)).astype(np.float32)
    geometry = dict(stride=stride, pad=kernel // 2, nthreads=threads)
    dy = rng.standard_normal(ext.depthwise_forward(x, w, **geometry).shape).astype(np.float32)
    calls = {}
    for path, blocked in (("rows", False), ("blocks", True)):
        def forward(blocked=blocked):
            ext.depthwise_forward(x, w, **geometry, blocked=blocked)

        def data(blocked=blocked):
            ext.depthwise_backward_data(dy, w, x.shape, **geometry, blocked=blocked)

        def weight(blocked=blocked):
            ext.depthwise_backward_weight(x, dy, w.shape[2:], **geometry, blocked=blocked)
        for kind, call in zip(KINDS, (forward, data, weight)):
            calls.setdefault(kind, {})[path] = call
    return calls


def cpu_ms(call, repeat):
    start = time.process_time()
    for _ in range(repeat):
        call()
    return (time.process_time() - start) * 1e3 / repeat


def compare_kernels(args):
    """The --kernels table: per shape and kind, rows against blocks, paths alternating."""
    result = {"benchmark": "conv_depthwise_kernels", "batch": args.batch,
              "rounds": args.rounds, "threads": args.threads,
              "load_average_before": round(os.getloadavg()[0], 1), "shapes": {}}
    for name in args.shapes:
        channels, size, kernel, stride, multiplier = SHAPES[name]
        if kernel * kernel > ext.DEPTHWISE_BLOCK_MAX_TAPS:
            continue
        calls = kernel_calls(args.batch, channels, size, kernel, stride, multiplier,
                             args.threads)
        row = {}
        for kind, paths in calls.items():
            for call in paths.values():
                call()
            t = {"rows": [], "blocks": []}
            for r in range(args.rounds):
                for path in (("rows", "blocks") if r % 2 == 0 else ("blocks", "rows")):
                    t[path].append(cpu_ms(paths[path], args.repeat))
            ratios = [b / a for a, b in zip(t["rows"], t["blocks"])]
            chosen = ext.depthwise_blocked((kernel, kernel), (size, size), kind)
            row[kind] = {"chosen": "blocks" if chosen else "rows",
                         "rows_ms": round(statistics.median(t["rows"]), 3),
                         "blocks_ms": round(statistics.median(t["blocks"]), 3),
                         "blocks_over_rows": round(statistics.median(ratios), 3)}
        result["shapes"][name] = row
    result["load_average_after"] = round(os.getloadavg()[0], 1)
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--kernels", action="store_true",
                        help="compare the plane and the blocked kernels, kind by kind")
    parser.add_argument("--threads", type=int, default=1, help="(--kernels) kernel threads")
    parser.add_argument("--repeat", type=int, default=3, help="(--kernels) calls per timing")
    parser.add_argument("--shapes", default=",".join(SHAPES),
                        help="(--kernels) comma-separated names of SHAPES")
    args = parser.parse_args()
    args.shapes = [name for name in args.shapes.split(",") if name]
    unknown = [name for name in args.shapes if name not in SHAPES]
    if unknown:
        sys.exit(f"conv_depthwise.py: unknown shapes {unknown}; choose from {list(SHAPES)}")
    if min(args.rounds, args.batch, args.threads, args.repeat) < 1:
        sys.exit("conv_depthwise.py: --rounds, --batch, --threads and --repeat must be at "
                 f"least 1, got {args.rounds}, {args.batch}, {args.threads}, {args.repeat}")
    if args.kernels:
        return compare_kernels(args)
    times = {name: {"old": [], "new": []} for name in SHAPES}
    for name, shape in SHAPES.items():
        step = make_step(args.batch, *shape)
        for path in ("old", "new"):      # warm up both paths
            timed(step, path)
        for r in range(args.rounds):
            for path in (("old", "new") if r % 2 == 0 else ("new", "old")):
                times[name][path].append(timed(step, path))
    result = {"batch": args.batch, "rounds": args.rounds,
              "load_average": round(os.getloadavg()[0], 1), "shapes": {}}
    for name, t in times.items():
        ratios = [n / o for n, o in zip(t["new"], t["old"])]
        result["shapes"][name] = {"old_ms": round(statistics.median(t["old"]), 2),
                                  "new_ms": round(statistics.median(t["new"]), 2),
                                  "new_over_old": round(statistics.median(ratios), 3)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
