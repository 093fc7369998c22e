"""One worker of test_gpu_dist.py's job: trains a small Dense network on gpu(0) with a
dist_sync kvstore (2-bit compressed when --threshold is given) and prints one line
`RESULT {json}`: its rank, the final parameters and where their buffers live."""
import argparse
import json

import numpy as np

import minigluon as mx
from minigluon import autograd, gluon, nd

STEPS, BATCH, IN, OUT = 3, 4, 6, 3


def batch(rank, step):
    """Worker `rank`'s batch of step `step` (the test rebuilds the same ones)."""
    rng = np.random.default_rng([rank, step])
    return (rng.uniform(-1, 1, (BATCH, IN)).astype(np.float32),
            rng.uniform(-1, 1, (BATCH, OUT)).astype(np.float32))


def initial():
    rng = np.random.default_rng(7)
    return (rng.uniform(-0.5, 0.5, (OUT, IN)).astype(np.float32),
            rng.uniform(-0.5, 0.5, OUT).astype(np.float32))


def where(array):
    data = array._data
    device = getattr(getattr(data, "device", None), "id", None)
    return f"{type(data).__module__.split('.')[0]}.{type(data).__name__}@{device}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threshold", type=float, default=None)
    args = ap.parse_args()
    ctx = mx.gpu(0)
    kv = mx.kv.create("dist_sync")
    net = gluon.nn.Dense(OUT, in_units=IN)
    net.initialize(ctx=ctx)
    weight, bias = initial()
    net.weight.set_data(nd.array(weight, ctx=ctx))
    net.bias.set_data(nd.array(bias, ctx=ctx))
    compression = None if args.threshold is None else {"type": "2bit",
                                                       "threshold": args.threshold}
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1},
                            kvstore=kv, compression_params=compression)
    loss_fn = gluon.loss.L2Loss()
    for step in range(STEPS):
        x, y = batch(kv.rank, step)
        with autograd.record():
            loss = loss_fn(net(nd.array(x, ctx=ctx)), nd.array(y, ctx=ctx))
        loss.backward()
        trainer.step(BATCH)
    print("RESULT " + json.dumps({
        "rank": kv.rank, "workers": kv.num_workers,
        "weight": net.weight.data().asnumpy().tolist(),
        "bias": net.bias.data().asnumpy().tolist(),
        "where": [where(net.weight.data()), where(net.bias.data())],
        "context": str(net.weight.data().context)}), flush=True)


if __name__ == "__main__":
    main()
