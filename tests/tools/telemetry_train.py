"""A small dist_sync job that reports its epochs: the fixture of test_jobbar.py.

    minigluon-launch -n 2 -s 1 python telemetry_train.py --epochs 2 --steps 12

Each worker trains a tiny linear model on its own random batches through gluon.Trainer
(so the kvstore counts the steps and the trainer the samples), reports epoch, step, loss
and accuracy with `telemetry.report`, and prints one line per epoch, as the examples do.
"""
import argparse
import time

import numpy as np

import minigluon as mx
from minigluon import autograd, gluon
from minigluon import telemetry


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12, help="steps per epoch")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--pause", type=float, default=0.05, help="seconds of 'work' a step")
    args = ap.parse_args()
    store = mx.kv.create("dist_sync")
    net = gluon.nn.Dense(2, in_units=4)
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1},
                            kvstore=store)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    rng = np.random.default_rng(store.rank)
    for epoch in range(1, args.epochs + 1):
        total = 0.0
        for step in range(1, args.steps + 1):
            x = mx.nd.array(rng.normal(size=(args.batch_size, 4)))
            y = mx.nd.array((x.asnumpy()[:, 0] > 0).astype(np.float32))
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(args.batch_size)
            total += float(loss.mean().asscalar())
            time.sleep(args.pause)
            telemetry.report(epoch=epoch, epochs=args.epochs, step=step, steps=args.steps,
                             loss=total / step)
        telemetry.report(epoch=epoch, epochs=args.epochs, loss=total / args.steps,
                         test_acc=0.5 + 0.1 * epoch, epoch_end=True)
        print(f"worker {store.rank} epoch {epoch}: loss {total / args.steps:.4f}", flush=True)


if __name__ == "__main__":
    main()
