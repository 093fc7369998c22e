"""A dist_sync training job that checkpoints and resumes: the fixture of test_checkpoint.py.

    minigluon-launch -n 2 -s 2 python ckpt_train.py --dir D --steps N --every K [--resume]

Each worker trains a small MLP; the servers run SGD with momentum (update_on_kvstore=True).
The batch of step s on the worker of rank r depends on (s, r) only, so a run resumed at step
k sees the data a run that never stopped sees. Every K steps worker 0 writes a checkpoint:
the parameters (save_parameters) and the trainer's states (save_states, which asks the
servers for their optimizer states), each by rename, then the step number in D/latest, by
rename too, so a job killed at any moment leaves the last whole checkpoint behind. With
--resume every worker starts from it. At the end worker 0 writes D/final.params.
"""
import argparse
import os
import time

import numpy as np

import minigluon as mx
from minigluon import autograd, gluon


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="folder of the checkpoints")
    ap.add_argument("--steps", type=int, required=True, help="total steps N")
    ap.add_argument("--every", type=int, required=True, help="checkpoint every K steps")
    ap.add_argument("--resume", action="store_true", help="start from D/latest, if any")
    ap.add_argument("--pause", type=float, default=0.0, help="seconds to sleep per step")
    return ap.parse_args()


def build_net():
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(16, activation="relu", in_units=8), gluon.nn.Dense(4, in_units=16))
    return net


def batch(step, rank, size=16):
    rng = np.random.RandomState(1000 * step + rank)
    x = rng.standard_normal((size, 8)).astype(np.float32)
    return mx.nd.array(x), mx.nd.array(rng.randint(0, 4, size).astype(np.float32))


def _replace(write, path):
    write(path + ".tmp")
    os.replace(path + ".tmp", path)


def save_checkpoint(folder, step, net, trainer):
    prefix = os.path.join(folder, f"ckpt-{step}")
    _replace(net.save_parameters, prefix + ".params")
    _replace(trainer.save_states, prefix + ".states")

    def mark(path):
        with open(path, "w") as f:
            f.write(str(step))
    _replace(mark, os.path.join(folder, "latest"))


def note_pid():
    """Tell the test this worker's PID (it kills one of them), as the launcher stubs do."""
    folder = os.environ.get("STUB_PIDS")
    if folder:
        name = f"worker{os.environ.get('MINIGLUON_LAUNCH_RANK', '')}.{os.getpid()}"
        with open(os.path.join(folder, name), "w") as f:
            f.write("worker")


def main():
    args = parse_args()
    note_pid()
    store = mx.kv.create("dist_sync")
    mx.random.seed(7)
    net = build_net()
    net.initialize(mx.init.Xavier())
    latest = os.path.join(args.dir, "latest")
    start = 0
    if args.resume and os.path.exists(latest):
        start = int(open(latest).read())
        net.load_parameters(os.path.join(args.dir, f"ckpt-{start}.params"))
    trainer = gluon.Trainer(net.collect_params(),
                            mx.optimizer.SGD(learning_rate=0.05, momentum=0.9, wd=1e-4),
                            kvstore=store, update_on_kvstore=True)
    if start:
        trainer.load_states(os.path.join(args.dir, f"ckpt-{start}.states"))
        print(f"RESUMED at step {start}", flush=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for step in range(start, args.steps):
        x, y = batch(step, store.rank)
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])
        print(f"STEP {step + 1} loss {loss.mean().asscalar():.5f}", flush=True)
        if store.rank == 0 and (step + 1) % args.every == 0:
            save_checkpoint(args.dir, step + 1, net, trainer)
        time.sleep(args.pause)
    if store.rank == 0:
        _replace(net.save_parameters, os.path.join(args.dir, "final.params"))


if __name__ == "__main__":
    main()
