"""What 2-bit compression costs per training step, kernel by kernel, on one model's
gradients; ONE JSON line.

For every trained parameter of the model (the model zoo's CIFAR ResNet-18 by default:
62 arrays, 11.2M float32) it times, in this process, the work a dist_sync step does per
key: on a worker, quantizing the gradient with its residual (`quantize_2bit`); on a
server, merging W = 2 workers' pushes, either 2-bit codes (`dequantize_2bit` then
`dequantize_2bit_add`) or float32 values (`sum_into`), and the SGD update that follows
either merge (momentum 0.9, the same for both). The kinds are interleaved repeat by
repeat; figures are medians of CPU ms per step (all keys), with the load average.

    python benchmarks/twobit_costs.py [--model resnet18|lenet] [--repeats 9] [--threads 1]
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

import minigluon as mx
import minigluon_ext as ext
from minigluon.gluon.model_zoo import vision

MODELS = {"resnet18": (vision.cifar_resnet18, (3, 32, 32)), "lenet": (vision.lenet, (1, 28, 28))}
THRESHOLD = 0.5


def shapes(model):
    build, shape = MODELS[model]
    net = build(classes=10)
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1,) + shape))
    return [p.shape for p in net.collect_params().values() if p.grad_req != "null"]


def kernels(sizes, threads):
    """{kind: f()} doing one step's work of that kind over every key."""
    rng = np.random.default_rng(0)
    grads = [[rng.standard_normal(n).astype(np.float32) * 0.3 for n in sizes] for _ in range(2)]
    residuals = [np.zeros(n, np.float32) for n in sizes]
    codes = [[ext.quantize_2bit(g, np.zeros(n, np.float32), THRESHOLD) for g, n in
              zip(worker, sizes)] for worker in grads]
    merged = [np.empty(n, np.float32) for n in sizes]
    weights = [np.zeros(n, np.float32) for n in sizes]
    moms = [np.zeros(n, np.float32) for n in sizes]

    def quantize():
        for g, r in zip(grads[0], residuals):
            ext.quantize_2bit(g, r, THRESHOLD, nthreads=threads)

    def merge_codes():
        for out, c0, c1 in zip(merged, codes[0], codes[1]):
            ext.dequantize_2bit(c0, THRESHOLD, out, nthreads=threads)
            ext.dequantize_2bit_add(c1, THRESHOLD, out, nthreads=threads)

    def merge_floats():
        for out, g0, g1 in zip(merged, grads[0], grads[1]):
            ext.sum_into(out, [g0, g1], nthreads=threads)

    def sgd():
        for w, g, m in zip(weights, merged, moms):
            ext.sgd_update(w, g, m, 0.01, 0.0, 0.9, 1.0 / 64, None)
    return {"worker_quantize": quantize, "server_merge_2bit": merge_codes,
            "server_merge_float32": merge_floats, "server_sgd": sgd}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="resnet18")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1,
                        help="threads per kernel call (a loaded 2-core machine: 1)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    sizes = [int(np.prod(s)) for s in shapes(args.model)]
    work = kernels(sizes, args.threads)
    times = {kind: [] for kind in work}
    for _ in range(args.repeats):
        for kind, run in work.items():
            start = time.process_time()
            run()
            times[kind].append(time.process_time() - start)
    line = {"benchmark": "twobit_costs", "model": args.model, "keys": len(sizes),
            "values": sum(sizes), "threads": args.threads, "repeats": args.repeats}
    line.update({f"{kind}_cpu_ms": round(statistics.median(t) * 1e3, 2)
                 for kind, t in times.items()})
    line["load_avg"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
