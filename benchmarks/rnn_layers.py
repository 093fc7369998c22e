"""CPU seconds of one training pass (forward + backward) of gluon.rnn's LSTM and GRU
layers, each direction of each layer one `_rnn_sequence` operator, beside the same
network unrolled step by step (`layer._unfuse()`: per step two FullyConnected and the
fused cell update, as the layers ran before), in the same process, taking turns each
round. The language model's shape by default: 2 layers, 256 hidden, 35 steps, batch 32.
Prints ONE JSON line with medians and the per-round ratios' median:

    python benchmarks/rnn_layers.py [--rounds 5] [--steps 3] [--hybridize]
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import minigluon as mx
from minigluon import autograd, nd
from minigluon.gluon import rnn


def make_runner(block, x, unroll):
    def run():
        with autograd.record():
            if unroll:
                out, _ = block.unroll(x.shape[0], x, layout="TNC", merge_outputs=True)
            else:
                out = block(x)
        out.backward()
        out.wait_to_read()
    return run


def cpu_per_call(run, calls):
    start = time.process_time()
    for _ in range(calls):
        run()
    return (time.process_time() - start) / calls


def measure(kind, args):
    layer = getattr(rnn, kind)(args.hidden, num_layers=args.layers, input_size=args.hidden)
    layer.initialize(mx.init.Xavier())
    cells = layer._unfuse()
    if args.hybridize:
        layer.hybridize()
        cells.hybridize()
    rng = np.random.default_rng(0)
    x = nd.array(rng.standard_normal((args.seq, args.batch, args.hidden)).astype(np.float32))
    x.attach_grad()
    runners = {"fused": make_runner(layer, x, False), "per_step": make_runner(cells, x, True)}
    for run in runners.values():
        run()
    samples = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, run in runners.items():
            samples[name].append(cpu_per_call(run, args.steps))
    ratios = [p / f for f, p in zip(samples["fused"], samples["per_step"])]
    return {"cpu_s_fused": round(statistics.median(samples["fused"]), 4),
            "cpu_s_per_step_path": round(statistics.median(samples["per_step"]), 4),
            "speedup": round(statistics.median(ratios), 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="passes timed per round")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seq", type=int, default=35)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--hybridize", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    result = {kind: measure(kind, args) for kind in ("LSTM", "GRU")}
    print(json.dumps({"benchmark": "rnn_layers", "hybridized": args.hybridize,
                      "shape": [args.seq, args.batch, args.hidden], "layers": args.layers,
                      "rounds": args.rounds, **result, "loadavg_1min_before": round(load, 2),
                      "loadavg_1min_after": round(os.getloadavg()[0], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
