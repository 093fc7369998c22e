"""What a dist_sync step costs beyond computing: CPU ms per step of every process of a real
job (scheduler, servers, workers), with the compute made tiny so that what is left is the
kvstore's work; ONE JSON line.

On the emulated links (dist_links.py) every process shares the machine's cores, so each
CPU second the servers, the scheduler and the workers' kvstore threads spend per step is
taken from the workers' compute. This measures those seconds, load-robustly (CPU time,
not wall time), on 127.0.0.1 over TCP only (MINIGLUON_KVSTORE_IPC=0, _SHM=0: as between
hosts, every byte goes through the sockets).

The nets: the model zoo's `cifar_resnet18` (62 arrays, 11.2M float32, the same as
dist_links.py trains: global pooling makes its parameters independent of the input size)
on one 3x16x16 image per worker, and `lenet` on one 1x28x28 image; hybridized, SGD with
momentum, updates on the servers, overlap on (the defaults). Each worker alternates a
window of --steps dist_sync steps with a window of the same net's forward and backward
alone (no kvstore, no hooks): `worker_beyond_ms` is the difference, what the kvstore adds
to a worker's step. Worker 0 reads the servers' and the scheduler's CPU at its window's
two ends (the workers meet at a barrier there). Each process's CPU is split by thread:
`main` (Python), `zmq` (zmq's I/O threads: the socket writes and reads), `other`
(heartbeats, pyzmq's garbage collector), each [user, system].

    python benchmarks/dist_step_cpu.py [--model resnet18] [--servers 2] [--steps 8]
        [--rounds 3] [--trees OLD,NEW] [--profile N]

--trees runs each round once per tree (PYTHONPATH=TREE, order alternating by round) and
adds `new_over_old` (medians of per-round ratios). --profile N runs one more job (not
counted in the figures) with worker 0's timed steps and server 0's whole run under
cProfile timed by the thread's own CPU clock, and adds their N functions of most own CPU.
"""
import argparse
import cProfile
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

import psutil

import harness

DEADLINE = 600
INPUTS = {"resnet18": (3, 16, 16), "lenet": (1, 28, 28)}
SERVER = """
import cProfile, json, os, pstats, sys, time
sys.path.insert(0, {here!r})
from harness import top
out = os.environ.get("BENCH_PROFILE_OUT")
prof, status = cProfile.Profile(time.thread_time) if out else None, 0
if prof: prof.enable()
try:
    import minigluon
except SystemExit as done:
    status = done.code
if prof:
    prof.disable()
    with open(out, "w") as f: json.dump(top(prof, int(os.environ["BENCH_PROFILE_N"])), f)
sys.exit(status)
"""


# ---- inside a worker ------------------------------------------------------------------
def thread_cpu(pid):
    """{'main'|'zmq'|'other': [user s, system s]} of process `pid`'s live threads."""
    out = {}
    for t in psutil.Process(pid).threads():
        try:
            with open(f"/proc/{pid}/task/{t.id}/comm") as f:
                comm = f.read().strip()
        except OSError:             # the thread has just ended
            continue
        group = "main" if t.id == pid else "zmq" if comm.startswith("ZMQbg") else "other"
        user, system = out.get(group, (0.0, 0.0))
        out[group] = [user + t.user_time, system + t.system_time]
    return out


def _minus(after, before, steps):
    return {g: [round((a - b) * 1e3 / steps, 2) for a, b in zip(v, before.get(g, (0, 0)))]
            for g, v in after.items()}


def run_worker(args):
    import numpy as np
    import minigluon as mx
    from minigluon import autograd, gluon, nd
    from minigluon.gluon.model_zoo import vision
    kv = mx.kv.create("dist_sync")
    make = {"resnet18": vision.cifar_resnet18, "lenet": vision.lenet}[args.model]
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    rng = np.random.default_rng(kv.rank)
    data = nd.array(rng.standard_normal((1,) + INPUTS[args.model]).astype(np.float32))
    label = nd.array([kv.rank % 10])
    nets = {}
    for side in ("dist", "compute"):
        mx.random.seed(0)
        net = make(classes=10)
        net.initialize(mx.init.Xavier())
        net.hybridize()
        trainer = gluon.Trainer(net.collect_params(), "sgd",
                                {"learning_rate": 0.01, "momentum": 0.9},
                                kvstore=kv if side == "dist" else None)
        nets[side] = (net, trainer)

    def step(side):
        net, trainer = nets[side]
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        if side == "dist":
            trainer.step(kv.num_workers)
    for side in nets:
        for _ in range(2):              # warm-up: traces, the store's keys, first pulls
            step(side)
    mx.nd.waitall()
    others = [int(p) for p in os.environ["BENCH_OTHER_PIDS"].split(",")] \
        if kv.rank == 0 else []
    profiler = cProfile.Profile(time.thread_time) if args.profile and kv.rank == 0 else None
    me, result = os.getpid(), {"rank": kv.rank, "rounds": []}
    for _ in range(args.windows):
        kv.barrier()
        begin = {pid: thread_cpu(pid) for pid in [me] + others}
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(args.steps):
            profiler.runcall(step, "dist") if profiler else step("dist")
        for param in nets["dist"][0].collect_params().values():
            param.data()                # waits for the window's last pulls
        kv.barrier()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        end = {pid: thread_cpu(pid) for pid in [me] + others}
        alone = time.process_time()
        for _ in range(args.steps):
            step("compute")
        alone = time.process_time() - alone
        result["rounds"].append({
            "cpu_ms": cpu * 1e3 / args.steps, "wall_ms": wall * 1e3 / args.steps,
            "compute_ms": alone * 1e3 / args.steps,
            "threads": {str(pid): _minus(end[pid], begin[pid], args.steps) for pid in end}})
    if profiler is not None:
        result["profile"] = harness.top(profiler, args.profile)
    print(json.dumps(result), flush=True)


# ---- the driver -----------------------------------------------------------------------
def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_job(args, tree, profile_dir=None):
    """One job's processes on `tree`'s minigluon (owned by PID): the workers' results,
    and server 0's profile when `profile_dir` is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "PS_"))}
    env.update(PYTHONPATH=tree, DMLC_PS_ROOT_URI="127.0.0.1",
               DMLC_PS_ROOT_PORT=str(free_port()), DMLC_NUM_SERVER=str(args.servers),
               DMLC_NUM_WORKER=str(args.workers), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MINIGLUON_KVSTORE_IPC="0",
               MINIGLUON_KVSTORE_SHM="0")
    here = os.path.dirname(os.path.abspath(__file__))
    procs, names = [], ["scheduler"] + [f"server{s}" for s in range(args.servers)]
    try:
        for name in names:
            role_env = dict(env, DMLC_ROLE=name.rstrip("0123456789"))
            if profile_dir and name == "server0":
                role_env.update(BENCH_PROFILE_OUT=os.path.join(profile_dir, "server0.json"),
                                BENCH_PROFILE_N=str(args.profile))
            # cwd=tree: `python -c` puts the working directory first on sys.path, so
            # from elsewhere the scheduler and servers would import that tree's package
            procs.append(subprocess.Popen(
                [sys.executable, "-c", SERVER.format(here=here)], env=role_env, cwd=tree,
                stdout=subprocess.DEVNULL))
        env["BENCH_OTHER_PIDS"] = ",".join(str(p.pid) for p in procs)
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--model", args.model,
                "--steps", str(args.steps), "--windows", str(args.windows),
                "--profile", str(args.profile if profile_dir else 0)]
        results = harness.run_workers(argv, env, args.workers, procs, DEADLINE,
                                      what=f"a worker on {tree}")
        return results, names, procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def figures(results, names, procs):
    """Medians over windows: each role's CPU ms per step (servers: their mean), the
    workers' cpu, compute and beyond ms, and the thread split of worker 0 and server 0."""
    pid_name = {str(p.pid): n for p, n in zip(procs, names)}
    windows = len(results[0]["rounds"])
    out = {}
    for what in ("cpu_ms", "compute_ms", "wall_ms"):
        out[f"worker_{what}"] = statistics.median(
            statistics.mean(r["rounds"][w][what] for r in results) for w in range(windows))
    out["worker_beyond_ms"] = statistics.median(
        statistics.mean(r["rounds"][w]["cpu_ms"] - r["rounds"][w]["compute_ms"]
                        for r in results) for w in range(windows))
    split = {}
    first = next(r for r in results if r["rank"] == 0)
    for w in range(windows):
        for pid, groups in first["rounds"][w]["threads"].items():
            name = pid_name.get(pid, "worker0")
            split.setdefault(name, []).append(groups)
    for name, per_window in split.items():
        role = name.rstrip("0123456789")
        total = [sum(sum(v) for v in g.values()) for g in per_window]
        if role != "worker":
            out.setdefault(f"{role}_cpu_ms_each", []).append(statistics.median(total))
        if name in ("worker0", "server0"):
            groups = {g for window in per_window for g in window}
            out[f"{name}_threads_ms"] = {
                g: [round(statistics.median(window.get(g, [0, 0])[i] for window in
                                            per_window), 2) for i in (0, 1)]
                for g in sorted(groups)}
    for role in ("server", "scheduler"):
        each = out.pop(f"{role}_cpu_ms_each")
        out[f"{role}_cpu_ms"] = statistics.mean(each)
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(INPUTS), default="resnet18")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8, help="steps per window")
    parser.add_argument("--windows", type=int, default=2, help="windows per job")
    parser.add_argument("--rounds", type=int, default=3, help="jobs per tree")
    parser.add_argument("--trees", default=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), help="OLD,NEW: compare two checkouts interleaved")
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for flag in ("workers", "servers", "steps", "windows", "rounds"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be a positive integer, got {getattr(args, flag)}")
    if args.worker:
        run_worker(args)
        return
    trees = [os.path.abspath(t) for t in args.trees.split(",") if t]
    for tree in trees:
        if not os.path.exists(os.path.join(tree, "minigluon", "__init__.py")):
            parser.error(f"--trees: {tree} holds no minigluon package; give one or two "
                         "checkouts of minigluon, comma-separated")
    load = [round(os.getloadavg()[0], 2)]
    per_tree = {tree: [] for tree in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            per_tree[tree].append(figures(*run_job(args, tree)))
    line = {"benchmark": "dist_step_cpu", "model": args.model, "workers": args.workers,
            "servers": args.servers, "steps": args.steps, "windows": args.windows,
            "rounds": args.rounds, "trees": {}}
    for tree, runs in per_tree.items():
        line["trees"][tree] = {k: round(statistics.median(run[k] for run in runs), 2)
                               for k in runs[0] if not isinstance(runs[0][k], dict)}
        for k in (k for k in runs[0] if isinstance(runs[0][k], dict)):
            line["trees"][tree][k] = runs[len(runs) // 2][k]      # one run's split
    if len(trees) == 2:
        old, new = (per_tree[t] for t in trees)
        line["new_over_old"] = {
            k: round(statistics.median(b[k] / a[k] for a, b in zip(old, new) if a[k]), 3)
            for k in old[0] if not isinstance(old[0][k], dict)}
    if args.profile:
        import tempfile
        with tempfile.TemporaryDirectory(prefix="mg-distcpu-") as where:
            results, _, _ = run_job(args, trees[-1], profile_dir=where)
            line["profile_worker0"] = next(r["profile"] for r in results if "profile" in r)
            with open(os.path.join(where, "server0.json")) as f:
                line["profile_server0"] = json.load(f)
    load.append(round(os.getloadavg()[0], 2))
    line["load_avg"] = load
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
