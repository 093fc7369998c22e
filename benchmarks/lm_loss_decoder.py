"""The language model's head, piece by piece: the decoder (FullyConnected (T*N, H) x (H, V)
forward and backward) and the softmax cross-entropy over its (T, N, V) output, the fused
operator (`_softmax_ce_loss`, the row kernels) beside the unfused one (log_softmax + pick
on NumPy formulas, what SoftmaxCrossEntropyLoss ran before), each at 1 and 2 compute
threads (MINIGLUON_ADAPTIVE_THREADS=0 while it runs, so the count is the one asked for).

    python benchmarks/lm_loss_decoder.py [--repeats 7] [--vocab 10000]

Prints ONE JSON line: for each case the median wall and CPU (process time, all threads)
milliseconds of one forward + backward over `repeats` interleaved rounds, the cases taking
turns within each round so that the machine's load falls on all of them alike, and the
load average before and after.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

os.environ["MINIGLUON_ADAPTIVE_THREADS"] = "0"     # before minigluon reads it
import minigluon as mx                              # noqa: E402
from minigluon import autograd, nd, threads          # noqa: E402
from minigluon.gluon import loss as gloss           # noqa: E402
from minigluon.ndarray import ops_softmax           # noqa: E402

T, N, H = 35, 32, 256


def set_threads(n):
    os.environ["OMP_NUM_THREADS"] = str(n)
    threads.look_again()
    threads.compute_threads()


def loss_case(fused, logits, label):
    loss = gloss.SoftmaxCrossEntropyLoss() if fused else gloss.SoftmaxCrossEntropyLoss(axis=2)

    def step():
        ops_softmax.HOST_KERNELS = fused        # the unfused path: NumPy's formulas
        try:
            logits.attach_grad()
            with autograd.record():
                out = loss(logits, label)
            out.backward()
            logits.grad.wait_to_read()
        finally:
            ops_softmax.HOST_KERNELS = True
    return step


def decoder_case(x, dense):
    def step():
        with autograd.record():
            y = dense(x)
        y.backward()
        dense.weight.grad().wait_to_read()
    return step


def timed(step):
    wall, cpu = time.perf_counter(), time.process_time()
    step()
    return (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--vocab", type=int, default=10000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    logits = nd.array(rng.standard_normal((T, N, args.vocab)).astype(np.float32))
    label = nd.array(rng.integers(0, args.vocab, (T, N)), dtype="float32")
    x = nd.array(rng.standard_normal((T, N, H)).astype(np.float32))
    x.attach_grad()
    dense = mx.gluon.nn.Dense(args.vocab, flatten=False, in_units=H)
    dense.initialize()
    pieces = {"loss_unfused": loss_case(False, logits, label),
              "loss_fused": loss_case(True, logits, label),
              "decoder": decoder_case(x, dense)}
    cases = {f"{name} {n}t": (n, step) for n in (1, 2) for name, step in pieces.items()}
    load_before = os.getloadavg()
    times = {name: [] for name in cases}
    for r in range(args.repeats + 1):
        for name, (n, step) in cases.items():
            set_threads(n)
            result = timed(step)
            if r:                                   # round 0 warms up
                times[name].append(result)
    fields = {name: {"wall_ms": round(statistics.median(w for w, _ in t), 2),
                     "cpu_ms": round(statistics.median(c for _, c in t), 2)}
              for name, t in times.items()}
    for n in (1, 2):
        fields[f"fused/unfused wall {n}t"] = round(
            fields[f"loss_fused {n}t"]["wall_ms"] / fields[f"loss_unfused {n}t"]["wall_ms"], 3)
    fields.update(shape=[T, N, args.vocab], repeats=args.repeats,
                  loadavg_before=load_before[0], loadavg_after=os.getloadavg()[0])
    print(json.dumps(fields))


if __name__ == "__main__":
    main()
