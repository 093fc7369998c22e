"""A dist_sync training step with gradients pushed while backward runs (overlap on) against
pushed all at step (overlap off), or overlap with buckets of small gradients against
without (--compare buckets), or with 2-bit compression against without (--compare 2bit);
ONE JSON line.

One real job on 127.0.0.1: a scheduler, --servers servers and --workers workers started as
processes with the DMLC_* variables. Every worker builds the same network twice (same
seed) with two Trainers on two dist_sync stores of the job, one with overlap=True and one
with overlap=False, and alternates rounds of --steps steps between them, so both see the
same machine (a busy neighbour slows a round of each). Per round and worker: wall seconds
and CPU seconds (this process, time.process_time) per step, and the CPU seconds per step
of all the servers together (read by worker 0 from /proc; `server_cpu_*`). Figures are
medians over rounds of the workers' mean; `ratio` is on / off of the medians of the
per-round ratios (below 1: "on" is faster). The two nets' parameters are compared at the
end (`bit_identical`; not with --compare 2bit, whose sides train differently), and the
load average at start and end is part of the line.

Models: `mlp` (784-1024-1024-1024-1024-10, 3.9M float32: communication-heavy),
`lenet` (compute-heavy, 0.43M) and `resnet18` (the model zoo's CIFAR ResNet-18, 11.2M in
62 arrays, 41 of them BatchNorm's or the last bias: below 64 KiB); batch --batch per
worker; SGD with momentum, updates on the servers (the dist_sync default). Nets are
hybridized, as training scripts do (--imperative: not).

`--compare buckets`: both sides overlap; "on" gathers small gradients into buckets
(MINIGLUON_OVERLAP_SMALL_BYTES / _BUCKET_BYTES as set, else their defaults), "off" sends
each alone (small bytes 0).

`--compare 2bit`: both sides overlap with buckets; "on" compresses its pushes to 2 bits
(threshold 0.5, as benchmarks/dist_links.py), "off" does not. Run it with
MINIGLUON_KVSTORE_SHM=0 to send every array over the socket, as between hosts (with
shared memory, big uncompressed arrays skip the socket).

    python benchmarks/overlap_step.py [--model mlp] [--rounds 7] [--steps 5]
        [--compare overlap|buckets|2bit] [--imperative]
"""
import argparse
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import psutil

import harness

DEADLINE = 600


def build(model, mx, gluon):
    mx.random.seed(0)
    from minigluon.gluon.model_zoo import vision
    if model == "lenet":
        net, shape = vision.lenet(classes=10), (1, 28, 28)
    elif model == "resnet18":
        net, shape = vision.cifar_resnet18(classes=10), (3, 32, 32)
    else:
        net, shape = gluon.nn.Sequential(), (784,)
        for _ in range(4):
            net.add(gluon.nn.Dense(1024, activation="relu"))
        net.add(gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier())
    return net, shape


def run_worker(args):
    import numpy as np
    import minigluon as mx
    from minigluon import autograd, gluon, nd
    kv_probe = mx.kv.create("dist_sync")          # store 0: only to learn the rank
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    sides, small = {}, os.environ.get("MINIGLUON_OVERLAP_SMALL_BYTES", "65536")
    for on in (True, False):
        overlap = on or args.compare != "overlap"
        net, shape = build(args.model, mx, gluon)
        if not args.imperative:
            net.hybridize()
        rng = np.random.default_rng(kv_probe.rank)   # the same batch for both sides
        data = nd.array(rng.standard_normal((args.batch,) + shape).astype(np.float32))
        label = nd.array(rng.integers(0, 10, args.batch))
        net(data)                                 # deferred shapes
        two_bit = on and args.compare == "2bit"
        trainer = gluon.Trainer(net.collect_params(), "sgd",
                                {"learning_rate": 0.01, "momentum": 0.9},
                                kvstore="dist_sync", overlap=overlap,
                                compression_params={"type": "2bit", "threshold": 0.5}
                                if two_bit else None)
        # the Trainer makes its overlap (and reads the bucket sizes) at its first step
        buckets = small if on or args.compare != "buckets" else "0"
        sides["on" if on else "off"] = (net, trainer, data, label, buckets)

    def step(name):
        net, trainer, data, label, buckets = sides[name]
        os.environ["MINIGLUON_OVERLAP_SMALL_BYTES"] = buckets
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(args.batch * kv_probe.num_workers)

    for name in sides:                            # warm-up: stores, first pulls
        for _ in range(2):
            step(name)
    servers = [psutil.Process(int(pid)) for pid in os.environ["BENCH_SERVER_PIDS"].split(",")]

    def server_cpu():
        return sum(sum(p.cpu_times()[:2]) for p in servers) if kv_probe.rank == 0 else 0.0

    rounds = {name: [] for name in sides}
    for r in range(args.rounds):
        order = ("on", "off") if r % 2 == 0 else ("off", "on")
        for name in order:
            kv_probe.barrier()             # both workers start the round together
            wall, cpu, serving = time.perf_counter(), time.process_time(), server_cpu()
            for _ in range(args.steps):
                step(name)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            kv_probe.barrier()             # both workers' pushes of the round are out
            rounds[name].append((wall / args.steps, cpu / args.steps,
                                 (server_cpu() - serving) / args.steps))
    digests = {}
    for name, (net, *_rest) in sides.items():
        digest = hashlib.sha256()
        for p in net.collect_params().values():
            digest.update(p.data().asnumpy().tobytes())
        digests[name] = digest.hexdigest()
    print(json.dumps({"rounds": rounds, "identical": digests["on"] == digests["off"]}),
          flush=True)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_job(args):
    """Start the job's processes (owned by PID); the workers' result dicts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "PS_"))}
    env.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()),
               DMLC_NUM_SERVER=str(args.servers), DMLC_NUM_WORKER=str(args.workers),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    procs = []
    try:
        for role in ["scheduler"] + ["server"] * args.servers:
            procs.append(subprocess.Popen([sys.executable, "-c", "import minigluon"],
                                          env=dict(env, DMLC_ROLE=role),
                                          stdout=subprocess.DEVNULL))
        env["BENCH_SERVER_PIDS"] = ",".join(str(p.pid) for p in procs[1:])
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--model", args.model,
                "--rounds", str(args.rounds), "--steps", str(args.steps),
                "--batch", str(args.batch), "--compare", args.compare]
        argv += ["--imperative"] if args.imperative else []
        return harness.run_workers(argv, env, args.workers, procs, DEADLINE)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def summarize(results, rounds):
    """Medians over rounds of the workers' mean wall and CPU ms per step, and of the
    servers' CPU ms per step (worker 0's reading), and on/off."""
    out = {}
    for k, what in enumerate(("wall", "cpu", "server_cpu")):
        mean = statistics.mean if what != "server_cpu" else max     # only worker 0 reads it
        per_round = {name: [mean(res["rounds"][name][r][k] for res in results)
                            for r in range(rounds)] for name in ("on", "off")}
        for name, values in per_round.items():
            out[f"{what}_ms_{name}"] = round(statistics.median(values) * 1e3, 2)
        out[f"{what}_ratio"] = round(statistics.median(
            a / b for a, b in zip(per_round["on"], per_round["off"])), 3)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("mlp", "lenet", "resnet18"), default="mlp")
    parser.add_argument("--compare", choices=("overlap", "buckets", "2bit"), default="overlap")
    parser.add_argument("--imperative", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
        return
    load_before = os.getloadavg()[0]
    results = run_job(args)
    line = {"benchmark": "overlap_step", "model": args.model, "compare": args.compare,
            "hybridized": not args.imperative, "workers": args.workers,
            "servers": args.servers, "batch_per_worker": args.batch,
            "rounds": args.rounds, "steps_per_round": args.steps}
    line.update(summarize(results, args.rounds))
    line["bit_identical"] = all(res["identical"] for res in results) \
        if args.compare != "2bit" else None
    line["load_avg"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
