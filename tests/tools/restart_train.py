"""A small data-parallel job that can lose a worker on purpose: the fixture of
test_restarts.py.

    minigluon-launch -n 2 -s 2 --max-restarts 1 python restart_train.py --out D \
        [--kvstore dist_sync] [--kill RANK:STEP:KEYS] [--kill-scheduler STEP]
        [--barrier-every N] [--update-on-workers] [--optimizer adam] [--lr-step N]
        [--step-sleep S [--sleep-until FILE]]
        [--stall RANK:STEP:SECONDS [--stall-until FILE]]

Each worker trains a LeNet-like net (no dropout unless --dropout, whose masks are seeded per rank and step: either way the
run is deterministic) on its
SplitSampler part of a fixed synthetic set, with the Trainer's usual loop, unchanged for
restarts. With --kill, the first process (with --kill-every-time: every process) of worker RANK SIGKILLs itself in step STEP (1 is
the first) once it has pushed KEYS of the parameters (0: before its first push), so the
servers may hold part of the lost step. With --kill-scheduler, worker 0 SIGKILLs the job's
scheduler (found by its DMLC_ROLE and port) at the start of step STEP; --barrier-every N
makes every worker call kv.barrier() after every N steps, so the scheduler is on the
path of training. --update-on-workers makes the Trainer update on the workers
(update_on_kvstore=False: a replacement copies a survivor's weights and optimizer states);
--optimizer picks SGD with momentum (the default) or Adam, and --lr-step N halves the
learning rate every N updates (an lr_scheduler, driven by the optimizer's update counts). Each worker prints `STEP s t` after each step
(t: time.monotonic(), one clock for the whole machine) and `KILL t` when it kills itself,
and writes its final parameters to D/params-<rank>.npz and to D/loss-<rank>.json the
loss of the whole set before and after training and its epochs' mean losses (dist_async:
after a barrier, with the servers' final weights).
"""
import argparse
import json
import os
import signal
import time

import numpy as np
import psutil

import minigluon as mx
from minigluon import autograd, gluon, kv


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for params-<rank>.npz")
    ap.add_argument("--kvstore", default="dist_sync")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--kill", help="RANK:STEP:KEYS: where the first process of RANK dies")
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="add a Dropout layer; its masks are seeded per rank and step")
    ap.add_argument("--kill-every-time", action="store_true",
                    help="every process of RANK dies there, replacements too")
    ap.add_argument("--kill-scheduler", type=int, metavar="STEP",
                    help="worker 0 SIGKILLs the scheduler at the start of this step")
    ap.add_argument("--barrier-every", type=int, default=0, metavar="N",
                    help="every worker calls kv.barrier() after every N steps")
    ap.add_argument("--step-sleep", type=float, default=0.0,
                    help="seconds to sleep after each step (time for a fault from outside)")
    ap.add_argument("--sleep-until", metavar="FILE",
                    help="sleep --step-sleep only until FILE exists: the test makes it once "
                         "its fault is in, and the steps after it need no slowing")
    ap.add_argument("--update-on-workers", action="store_true",
                    help="gluon.Trainer(..., update_on_kvstore=False)")
    ap.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd",
                    help="sgd (momentum 0.9) or adam")
    ap.add_argument("--lr-step", type=int, default=0, metavar="N",
                    help="halve the learning rate every N updates (mx.lr_scheduler)")
    ap.add_argument("--stall", metavar="RANK:STEP:SECONDS",
                    help="worker RANK sleeps SECONDS after step STEP (away from the kvstore)")
    ap.add_argument("--stall-until", metavar="FILE",
                    help="the --stall sleep ends early once FILE exists (the test makes it "
                         "when what the stall was for has happened)")
    return ap.parse_args()


def scheduler_pid():
    """The PID of this job's scheduler process (not its guard), found by its environment."""
    port = os.environ["DMLC_PS_ROOT_PORT"]
    for proc in psutil.process_iter(["cmdline"]):
        try:
            env = proc.environ()
        except psutil.Error:
            continue
        if env.get("DMLC_ROLE") == "scheduler" and env.get("DMLC_PS_ROOT_PORT") == port \
                and not any("guard.py" in a for a in proc.info["cmdline"] or ()):
            return proc.pid
    raise RuntimeError(f"no scheduler with DMLC_PS_ROOT_PORT={port} found")


def arm_scheduler_kill(store, step):
    """Worker 0's step hook that SIGKILLs the scheduler at the start of `step` (its first
    process only)."""
    if step is None or store.rank != 0 or kv.resume_state().restarts:
        return lambda s: None

    def on_step(s):
        if s == step:
            pid = scheduler_pid()
            print(f"KILL {time.monotonic():.6f}", flush=True)
            os.kill(pid, signal.SIGKILL)
    return on_step


def dataset(samples):
    rng = np.random.RandomState(7)
    x = rng.standard_normal((samples, 1, 12, 12)).astype(np.float32)
    y = (x[:, 0, :6].sum(axis=(1, 2)) > 0).astype(np.float32) + \
        (x[:, 0, 6:].sum(axis=(1, 2)) > 0).astype(np.float32)
    return gluon.data.ArrayDataset(x, y)


def lenet(dropout):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, activation="relu"), gluon.nn.MaxPool2D(2),
            gluon.nn.Flatten(), gluon.nn.Dense(16, activation="relu"))
    if dropout:
        net.add(gluon.nn.Dropout(dropout))
    net.add(gluon.nn.Dense(3))
    return net


def arm_kill(store, spec, every_time, settle):
    """Make this process SIGKILL itself at RANK:STEP:KEYS; returns the step hook.
    `settle()` waits for the previous step's pulls: with the Trainer's overlap on, step
    returns while they (and its last pushes) are still on their way, and a process killed
    then has not finished that step; "killed in step STEP before any push" means after it."""
    rank, step, keys = (int(v) for v in spec.split(":"))
    if store.rank != rank or (kv.resume_state().restarts and not every_time):
        return lambda s: None
    pushed = [0, 0]                                 # [current step, keys pushed in it]

    def die():
        print(f"KILL {time.monotonic():.6f}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    def counted(real, count):
        # the Trainer pushes with push, push_pull_later (overlap) and push_pull_bucket_later
        # (a bucket of small keys, several at once: the kill comes after the one that
        # reaches KEYS)
        def call(*args, **kwargs):
            out = real(*args, **kwargs)
            pushed[1] += count(*args)
            if keys and pushed[0] == step and pushed[1] - count(*args) < keys <= pushed[1]:
                die()
            return out
        return call

    store.push = counted(store.push, lambda key, *rest: 1)
    store.push_nowait = counted(store.push_nowait, lambda key, *rest: 1)
    store.push_bucket = counted(store.push_bucket, len)
    store.push_pull_later = counted(store.push_pull_later, lambda key, *rest: 1)
    store.push_pull_bucket_later = counted(store.push_pull_bucket_later, len)

    def on_step(s):
        pushed[0], pushed[1] = s, 0
        if s == step and keys == 0:
            settle()
            die()
    return on_step


def make_trainer(args, net, store):
    hyper = {"learning_rate": args.lr}
    if args.optimizer == "sgd":
        hyper["momentum"] = 0.9
    else:
        hyper["learning_rate"] = args.lr / 10
    if args.lr_step:
        hyper["lr_scheduler"] = mx.lr_scheduler.FactorScheduler(
            args.lr_step, factor=0.5, base_lr=hyper["learning_rate"])
    where = {"update_on_kvstore": False} if args.update_on_workers else {}
    return gluon.Trainer(net.collect_params(), args.optimizer, hyper, kvstore=store, **where)


def arm_stall(store, spec, until=None):
    """The step hook of --stall: worker RANK (its first process) sleeps after step STEP,
    SECONDS at most, less once the file `until` exists."""
    if spec is None:
        return lambda s: None
    rank, step, seconds = spec.split(":")
    if store.rank != int(rank) or kv.resume_state().restarts:
        return lambda s: None
    return lambda s: stall(float(seconds), until) if s == int(step) else None


def stall(seconds, until):
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (until and os.path.exists(until)):
        time.sleep(min(0.05, max(0.0, end - time.monotonic())))


def whole_loss(net, data, loss_fn):
    x, y = (mx.nd.array(np.stack(column)) for column in zip(*[data[i] for i in
                                                              range(len(data))]))
    return float(loss_fn(net(x), y).mean().asscalar())


def pull_all(store, net):
    """The servers' current weights (the Trainer's keys are the sorted names)."""
    params = net.collect_params()
    for i, name in enumerate(sorted(params.keys())):
        store.pull(i, out=params[name].data())


def main():
    args = parse_args()
    mx.random.seed(1)
    store = kv.create(args.kvstore)
    data = dataset(args.samples)
    sampler = gluon.data.SplitSampler(len(data), store.num_workers, store.rank, seed=3)
    train = gluon.data.DataLoader(data, args.batch_size, sampler=sampler,
                                  last_batch="discard")
    net = lenet(args.dropout)
    net.initialize(mx.init.Xavier())
    if args.dropout:    # shapes now: a deferred init inside step k would draw from its seed
        net(mx.nd.zeros((1, 1, 12, 12)))
    trainer = make_trainer(args, net, store)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    settle = lambda: [p.data() for p in net.collect_params().values()]   # noqa: E731
    on_step = arm_kill(store, args.kill, args.kill_every_time, settle) if args.kill \
        else (lambda s: None)
    on_step_sched = arm_scheduler_kill(store, args.kill_scheduler)
    after_step = arm_stall(store, args.stall, args.stall_until)
    before = whole_loss(net, data, loss_fn)
    step, losses = store.resume_state().step, []
    for _ in range(args.epochs):
        total, count = 0.0, 0
        for x, y in train:
            step += 1
            on_step(step)
            on_step_sched(step)
            if args.dropout:        # the same masks in a replacement that redoes the step
                mx.random.seed(10000 * step + store.rank)
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(x.shape[0])
            total, count = total + float(loss.sum().asscalar()), count + x.shape[0]
            print(f"STEP {step} {time.monotonic():.6f}", flush=True)
            if args.barrier_every and step % args.barrier_every == 0:
                store.barrier()
            if not (args.sleep_until and os.path.exists(args.sleep_until)):
                time.sleep(args.step_sleep)
            after_step(step)
        losses.append(total / count if count else None)
    if args.kvstore == "dist_async":
        store.barrier()                 # every push applied
        pull_all(store, net)
    after = whole_loss(net, data, loss_fn)
    params = {name: p.data().asnumpy() for name, p in net.collect_params().items()}
    np.savez(os.path.join(args.out, f"params-{store.rank}.npz"), **params)
    with open(os.path.join(args.out, f"loss-{store.rank}.json"), "w") as fout:
        json.dump({"before": before, "after": after, "epochs": losses}, fout)


if __name__ == "__main__":
    main()
