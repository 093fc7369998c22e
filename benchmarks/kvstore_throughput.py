"""Push+pull throughput of the distributed kvstore (dist_sync) on this host; ONE JSON line.

Keys: the 62 parameter arrays of a CIFAR ResNet18 (11.17M float32, 44.7 MB; four arrays
are above MXNET_KVSTORE_BIGARRAY_BOUND = 1e6 and get split over the servers). Each
iteration pushes every gradient and pulls every key (one list call each); after
--warmup iterations, --iters are timed on every worker. For (W,S) in (1,1), (2,1), (2,2)
and three variants:

- plain: no optimizer (servers sum the gradients; pulls return the sums)
- optimizer: SGD(lr 0.01, momentum 0.9) runs on the servers
- 2bit: 2-bit gradient compression (threshold 0.5), no optimizer

Figures: `s_per_iter` (mean over workers; median over --repeats rounds) and
`MBps_per_worker` = (bytes pushed + bytes pulled, uncompressed) / s_per_iter, i.e.
2 x 44.7 MB per iteration. Every cluster is a real one: a scheduler, S servers and W
workers started as processes with the DMLC_* variables, on 127.0.0.1; minigluon's workers
pass arrays of 64 KiB and more through shared memory and the rest over ipc:// (same host);
`W1S1_plain_tcp` uses TCP only (MINIGLUON_KVSTORE_IPC=0, MINIGLUON_KVSTORE_SHM=0).
With --secret-cost every minigluon cluster also runs with MINIGLUON_PS_SECRET (HMAC tags on
every message, auth.py), right after the same cluster without, and `secret_cost` gives the
ratio of their s_per_iter. With --replicas every cluster of 2 or more servers also runs
with MINIGLUON_PS_REPLICAS=1 (each server copies every round of its keys to the next
server before it answers, docs/replicas.md), right after the same cluster without, and
`replica_cost` gives the ratio of their s_per_iter; --only W2S2 keeps the clusters whose
name starts so. The
rounds of minigluon and MXNet alternate, so a noisy neighbour slows both alike. `lenet_step_ms` compares one Gluon LeNet training step
(batch 64) with kvstore 'local' and an embedded one-worker 'dist_sync'.

With --mxnet-python PATH (a Python that imports Apache MXNet built with the distributed
kvstore, e.g. `pip install mxnet==1.9.1 numpy==1.23.5` in a venv), the same clusters run
with MXNet too, in the same run, and `ratio_vs_mxnet` gives minigluon / MXNet MB/s.

    python benchmarks/kvstore_throughput.py [--iters 20] [--repeats 3]
        [--mxnet-python /venv/bin/python] [--secret-cost] [--replicas] [--only W2S2]
"""
import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

CONFIGS = ((1, 1), (2, 1), (2, 2))
VARIANTS = ("plain", "optimizer", "2bit")
DEADLINE = 300


def resnet18_shapes(classes=10):
    """The shapes of a CIFAR ResNet18's 62 trainable arrays (conv, BN gamma/beta, dense)."""
    shapes = [(64, 3, 3, 3), (64,), (64,)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            strides = stride if block == 0 else 1
            shapes += [(cout, cin, 3, 3), (cout,), (cout,), (cout, cout, 3, 3), (cout,), (cout,)]
            if strides != 1 or cin != cout:
                shapes += [(cout, cin, 1, 1), (cout,), (cout,)]
            cin = cout
    return shapes + [(classes, 512), (classes,)]


# ---- one worker of a cluster (runs under minigluon's or MXNet's Python) ------------------
def run_worker(lib, variant, iters, warmup):
    import importlib
    mx = importlib.import_module(lib)
    kv = mx.kv.create("dist_sync")
    shapes = resnet18_shapes()
    keys = list(range(len(shapes)))
    rng = np.random.RandomState(kv.rank)
    grads = [mx.nd.array(rng.uniform(-1, 1, s).astype(np.float32)) for s in shapes]
    weights = [mx.nd.zeros(s) for s in shapes]
    if variant == "2bit":
        kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init(keys, weights)
    if variant == "optimizer":
        kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.01, momentum=0.9))

    barrier = getattr(kv, "barrier", None) or kv._barrier     # MXNet 1.x: _barrier

    def step():
        kv.push(keys, grads)
        kv.pull(keys, out=weights)
        mx.nd.waitall()

    for _ in range(warmup):
        step()
    barrier()
    start = time.perf_counter()
    for _ in range(iters):
        step()
    seconds = (time.perf_counter() - start) / iters
    barrier()
    nbytes = sum(int(np.prod(s)) for s in shapes) * 4
    print(json.dumps({"rank": kv.rank, "s_per_iter": seconds, "bytes": nbytes}), flush=True)


# ---- the launcher -----------------------------------------------------------------------
def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_cluster(python, lib, variant, workers, servers, iters, warmup, env=None):
    """Start a scheduler, servers and workers; the workers' result lines."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "PS_"))}
    base.update(env or {})
    base.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()),
                DMLC_NUM_SERVER=str(servers), DMLC_NUM_WORKER=str(workers))
    procs = []
    try:
        for role in ["scheduler"] + ["server"] * servers:
            procs.append(subprocess.Popen([python, "-c", f"import {lib}"],
                                          env=dict(base, DMLC_ROLE=role),
                                          stdout=subprocess.DEVNULL))
        worker_procs = [subprocess.Popen(
            [python, os.path.abspath(__file__), "--worker", lib, "--variant", variant,
             "--iters", str(iters), "--warmup", str(warmup)],
            env=dict(base, DMLC_ROLE="worker"), stdout=subprocess.PIPE, text=True)
            for _ in range(workers)]
        procs += worker_procs
        results = []
        for proc in worker_procs:
            out, _ = proc.communicate(timeout=DEADLINE)
            if proc.returncode != 0:
                raise RuntimeError(f"{lib} worker exited with {proc.returncode}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        for proc in procs:
            proc.wait(timeout=30)
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def summarize(rounds):
    """Median over rounds of the workers' mean seconds per iteration."""
    seconds = statistics.median(float(np.mean([r["s_per_iter"] for r in results]))
                                for results in rounds)
    return {"s_per_iter": round(seconds, 5),
            "MBps_per_worker": round(2 * rounds[0][0]["bytes"] / seconds / 1e6, 1)}


def lenet_step_ms(steps=30):
    """One LeNet training step (batch 64) with kvstore 'local' vs embedded 'dist_sync'."""
    import minigluon as mx
    from minigluon import autograd, gluon, nd
    from minigluon.gluon.model_zoo import vision
    rng = np.random.default_rng(0)
    data = nd.array(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    label = nd.array(rng.integers(0, 10, 64))
    out = {}
    for kvstore in ("local", "dist_sync", "local", "dist_sync"):
        mx.random.seed(0)
        net = vision.lenet(classes=10)
        net.initialize(mx.init.Xavier())
        kv = mx.kv.create(kvstore)
        trainer = gluon.Trainer(net.collect_params(), "sgd",
                                {"learning_rate": 0.01, "momentum": 0.9}, kvstore=kv)
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

        def step():
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(64)
        for _ in range(3):
            step()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        ms = (time.perf_counter() - start) / steps * 1e3
        out[kvstore] = min(ms, out.get(kvstore, ms))
    out = {k: round(v, 2) for k, v in out.items()}
    out["dist_sync_overhead_ms"] = round(out["dist_sync"] - out["local"], 2)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mxnet-python", default=None,
                        help="a Python with Apache MXNet (distributed kvstore) to compare")
    parser.add_argument("--secret-cost", action="store_true",
                        help="also run every minigluon cluster with MINIGLUON_PS_SECRET set "
                             "(interleaved) and report secret_cost = s_per_iter ratios")
    parser.add_argument("--replicas", action="store_true",
                        help="also run every cluster of 2+ servers with MINIGLUON_PS_REPLICAS"
                             "=1 (interleaved) and report replica_cost = s_per_iter ratios")
    parser.add_argument("--only", default="",
                        help="run only the clusters whose name starts with this (e.g. W2S2)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="plain", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_worker(args.worker, args.variant, args.iters, args.warmup)
        return
    libs = {"minigluon": sys.executable}
    if args.mxnet_python:
        libs["mxnet"] = args.mxnet_python
    report = {"benchmark": "kvstore_throughput", "mode": "dist_sync", "iters": args.iters,
              "repeats": args.repeats, "keys": len(resnet18_shapes()),
              "floats": sum(int(np.prod(s)) for s in resnet18_shapes())}
    runs = [(f"W{w}S{s}_{v}", w, s, v, None) for w, s in CONFIGS for v in VARIANTS]
    runs.append(("W1S1_plain_tcp", 1, 1, "plain", {"MINIGLUON_KVSTORE_IPC": "0",
                                                     "MINIGLUON_KVSTORE_SHM": "0"}))
    if args.secret_cost:         # each cluster without, then with a secret (message tags)
        secret = secrets.token_hex(32)
        runs = [(f"{name}{tag}", w, s, v, dict(env or {}, MINIGLUON_PS_SECRET=value))
                for name, w, s, v, env in runs
                for tag, value in (("", ""), ("_secret", secret))]
    if args.replicas:            # each cluster of 2+ servers without, then with a replica
        runs = [(f"{name}{tag}", w, s, v, dict(env or {}, MINIGLUON_PS_REPLICAS="1")
                 if tag else env)
                for name, w, s, v, env in runs for tag in ("", "_replicas")
                if s >= 2 or not tag]
    runs = [r for r in runs if r[0].startswith(args.only)]
    rounds = {}
    for _ in range(args.repeats):
        for name, workers, servers, variant, env in runs:
            for lib, python in libs.items():
                if env and lib != "minigluon":
                    continue
                results = run_cluster(python, lib, variant, workers, servers, args.iters,
                                      args.warmup, env)
                rounds.setdefault((lib, name), []).append(results)
    for (lib, name), got in rounds.items():
        report.setdefault(lib, {})[name] = summarize(got)
    if "mxnet" in report:
        report["ratio_vs_mxnet"] = {
            name: round(fig["MBps_per_worker"] / report["mxnet"][name]["MBps_per_worker"], 2)
            for name, fig in report["minigluon"].items() if name in report["mxnet"]}
    if args.secret_cost:
        figs = report["minigluon"]
        report["secret_cost"] = {
            name: round(figs[f"{name}_secret"]["s_per_iter"] / fig["s_per_iter"], 3)
            for name, fig in figs.items() if f"{name}_secret" in figs}
    if args.replicas:
        figs = report["minigluon"]
        report["replica_cost"] = {
            name: round(figs[f"{name}_replicas"]["s_per_iter"] / fig["s_per_iter"], 3)
            for name, fig in figs.items() if f"{name}_replicas" in figs}
    report["lenet_step_ms"] = lenet_step_ms()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
