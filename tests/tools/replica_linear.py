"""A linear model whose final weights have a closed form: the fixture of test_replicas.py.

    MINIGLUON_PS_REPLICAS=1 minigluon-launch -n 2 -s 2 python replica_linear.py \
        --out D [--kvstore dist_async] [--steps 30] [--step-sleep 0.05]

Each worker trains Dense(4, in_units=8) from all-ones weights with SGD (lr 0.01) on the
servers; the gradient of step t on worker r depends on (r, t) only, so that, whatever the
order in which the servers apply the pushes, the weights end at 1 - lr * 3 * (1 + ... +
steps) when every push counted exactly once. A row_sparse key (ROWS, 10 rows of 3, from
zeros) also gets, each step, (rank + 1) * t in row (3 t + rank) mod 10, so each row ends
at -lr / 2 * (its sum) (the Trainer's optimizer, rescale_grad 1/2). Prints `STEP t time`
after each step and writes D/weight-<rank>.npy and D/rows-<rank>.npy (the servers' final
values, after a barrier).
"""
import argparse
import os
import time

import numpy as np

import minigluon as mx
from minigluon import autograd, gluon, nd

ROWS = 101       # a row_sparse key on server 1, the one the test kills (partition.py)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kvstore", default="dist_async")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--step-sleep", type=float, default=0.05)
    args = ap.parse_args()
    kv = mx.kv.create(args.kvstore)
    net = gluon.nn.Dense(4, in_units=8)
    net.initialize(mx.init.One())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": args.lr},
                            kvstore=kv)
    kv.init(ROWS, nd.sparse.zeros("row_sparse", (10, 3)))
    for t in range(1, args.steps + 1):
        x = nd.ones((2, 8)) * ((kv.rank + 1) * t)     # the gradient of (rank, step) only
        with autograd.record():
            loss = net(x).sum()
        loss.backward()
        trainer.step(2)
        row = (3 * t + kv.rank) % 10
        kv.push(ROWS, nd.sparse.row_sparse_array(
            (np.full((1, 3), (kv.rank + 1) * t, np.float32), [row]), shape=(10, 3)))
        print(f"STEP {t} {time.monotonic():.6f}", flush=True)
        time.sleep(args.step_sleep)
    kv.barrier()                                       # dist_async: every push applied
    params = net.collect_params()
    for i, name in enumerate(sorted(params.keys())):   # the Trainer's keys: sorted names
        kv.pull(i, out=params[name].data())
    np.save(os.path.join(args.out, f"weight-{kv.rank}.npy"), net.weight.data().asnumpy())
    rows = nd.sparse.zeros("row_sparse", (10, 3))
    kv.row_sparse_pull(ROWS, out=rows, row_ids=nd.arange(10))
    np.save(os.path.join(args.out, f"rows-{kv.rank}.npy"), rows.asnumpy())


if __name__ == "__main__":
    main()
