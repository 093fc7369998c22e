"""A small dist_sync training job for the live page's tests: the workers fit a linear
classifier on generated data and report loss and accuracy every step, so the page's curves
grow a few points a second. It runs --epochs of --steps-per-epoch steps, or until stopped.

    minigluon-launch -n 2 -s 2 --dashboard python tests/tools/dashboard_job.py
"""
import argparse
import time

import numpy as np

import minigluon as mx
from minigluon import autograd, gluon
from minigluon import telemetry


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--steps-per-epoch", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--pause", type=float, default=0.02,
                    help="seconds to sleep after each step, to leave cores to the others")
    return ap.parse_args()


def main():
    args = parse_args()
    kv = mx.kv.create("dist_sync")
    rng = np.random.RandomState(kv.rank)
    truth = np.random.RandomState(0).randn(10, 3)  # the same task on every worker
    net = gluon.nn.Dense(3)
    net.initialize(mx.init.Normal(0.1))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for epoch in range(1, args.epochs + 1):
        for step in range(1, args.steps_per_epoch + 1):
            x = rng.randn(args.batch_size, 10).astype(np.float32)
            y = (x @ truth).argmax(axis=1).astype(np.float32)
            data, label = mx.nd.array(x), mx.nd.array(y)
            with autograd.record():
                out = net(data)
                loss = loss_fn(out, label)
            loss.backward()
            trainer.step(args.batch_size)
            acc = float((out.asnumpy().argmax(axis=1) == y).mean())
            telemetry.report(epoch=epoch, epochs=args.epochs, step=step,
                             steps=args.steps_per_epoch, loss=float(loss.mean().asscalar()),
                             train_acc=acc)
            time.sleep(args.pause)
        print(f"worker {kv.rank} epoch {epoch}: loss {float(loss.mean().asscalar()):.4f}")


if __name__ == "__main__":
    main()
