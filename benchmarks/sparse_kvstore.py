"""row_sparse push + row_sparse_pull of a big embedding table over 2 servers; ONE JSON line.

The table (--rows x --dim float32; 10,000,000 x 64 = 2.56 GB by default) is one row_sparse
key of a dist_sync job on this host: a scheduler, 2 servers and --workers workers, each a
real process started here with the DMLC_* variables (and ended here, by PID). The servers
split it by rows and run plain SGD on the rows pushed (a lazy update). Each step a worker
pushes the gradient of --touched (1%) of the rows and pulls those rows back
(row_sparse_pull). The rows follow a power law (a few are in nearly every batch, most are
rare) and are scattered over the table. Every worker cycles through a few such batches
made before the clock starts.

Figures (medians of --steps timed steps after --warmup, each worker; the mean over the
workers; with --repeats N, N rounds of each system's job alternate and the median round
counts, the peaks being the largest):

- `steps_per_s`: 1 / the median step time;
- `bytes_per_step`: what one worker's step sent and received over its sockets (the
  kvstore's byte counts, `kv.wire_bytes()`: headers and payloads);
- `touched_bytes_per_step`: the touched rows' values and int64 ids, pushed and pulled:
  2 x rows x (dim x 4 + 8); `bytes_ratio` = bytes_per_step / that (the target: <= 1.2);
- `worker_peak_mb`, `server_peak_mb`: the largest RSS high-water mark (VmHWM) of the
  workers and of the servers, read once every worker has finished its steps;
- with --mxnet-python P (a Python with Apache MXNet 1.9.1): the same job with MXNet's own
  scheduler, servers and workers right after, `mxnet_steps_per_s`, `ratio_vs_mxnet`
  (minigluon / MXNet steps per second) and MXNet's peaks. MXNet's servers only accept a
  row_sparse key initialized with every row, so its worker 0 builds and sends the whole
  table once; minigluon's sends only the rows its initial value stores (none here). As
  MXNet's servers crash on a 1.28 GB init message, its table is cut into `mxnet_keys`
  keys of consecutive rows (2 at 10M x 64; see `key_ranges`); every step moves the same
  rows.

    python benchmarks/sparse_kvstore.py [--rows 10000000] [--repeats 1] [--mxnet-python P]
"""
import argparse
import importlib
import json
import math
import os
import selectors
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

DEADLINE = 900            # seconds for a whole job (start, init, steps, exit)
BATCHES = 3               # distinct batches each worker cycles through


# ---- the rows of a batch ----------------------------------------------------------------
def touched_rows(rows, count, seed, power=0.8):
    """`count` distinct row ids, sorted, drawn from a power law over popularity ranks
    (rank r has weight r^-power) and scattered over the table by a fixed bijection."""
    rng = np.random.default_rng(seed)
    span = rows ** (1 - power) - 1
    picked = np.empty(0, np.int64)
    while picked.size < count:          # inverse CDF of the continuous power law
        u = rng.random(2 * count)
        ranks = np.floor((1 + u * span) ** (1 / (1 - power))).astype(np.int64) - 1
        picked = np.unique(np.concatenate([picked, np.clip(ranks, 0, rows - 1)]))
    ranks = rng.choice(picked, count, replace=False)
    # rank -> row: multiplying by a number near rows / golden ratio, coprime with rows, is a
    # bijection that spreads neighbouring ranks over the whole table (and so over both
    # servers' row ranges) without a table-sized permutation
    step = int(rows * 0.6180339887)
    while math.gcd(step, rows) != 1:
        step += 1
    return np.sort(ranks * step % rows)


# ---- one worker (runs under minigluon's or MXNet's Python) --------------------------------
def key_ranges(lib, rows, dim, servers=2):
    """[(first row, rows)] of the keys that hold the table: one key for minigluon. MXNet
    1.9.1's servers crash (SIGSEGV) on a row_sparse init message of 1.28 GB (10M x 64 rows
    over 2 servers) but take 640 MB ones, so its table is cut into keys whose slice per
    server stays under 1 GiB; a step then pushes and pulls every key in one call each."""
    per_server = rows * dim * 4 / servers
    count = 1 if lib == "minigluon" else max(1, math.ceil(per_server / 2**30))
    bounds = np.linspace(0, rows, count + 1).astype(np.int64)
    return [(int(a), int(b - a)) for a, b in zip(bounds[:-1], bounds[1:])]


def run_worker(lib, args):
    mx = importlib.import_module(lib)
    kv = mx.kv.create("dist_sync")
    ranges = key_ranges(lib, args.rows, args.dim)
    keys = list(range(len(ranges)))
    count = max(1, round(args.rows * args.touched))
    batches = []
    for b in range(BATCHES):
        ids = touched_rows(args.rows, count, seed=[args.seed, kv.rank, b])
        values = np.random.default_rng(b).uniform(-1, 1, (count, args.dim)).astype(np.float32)
        batches.append(split_batch(mx, ids, values, ranges, args.dim))
    init_table(mx, kv, lib, keys, ranges, args.dim)
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1))
    outs = [mx.nd.sparse.zeros("row_sparse", (n, args.dim)) for _, n in ranges]
    barrier = getattr(kv, "barrier", None) or kv._barrier         # MXNet 1.x: _barrier

    def step(i):
        grads, row_ids = batches[i % BATCHES]
        kv.push(keys, grads)
        kv.row_sparse_pull(keys, out=outs, row_ids=row_ids)
        mx.nd.waitall()

    for i in range(args.warmup):
        step(i)
    barrier()
    counted = getattr(kv, "wire_bytes", None)
    before = counted() if counted else None
    times = []
    for i in range(args.steps):
        start = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - start)
    moved = None
    if counted:
        after = counted()
        moved = sum(after[k] - before[k] for k in after) / args.steps
    got = sum(out.indices.asnumpy().size for out in outs)
    assert got == count, (got, count)                # the rows asked for came back
    barrier()
    print(json.dumps({"rank": kv.rank, "step_s": statistics.median(times), "rows": count,
                      "bytes_per_step": moved, "keys": len(keys)}), flush=True)
    wait_for_go()


def split_batch(mx, ids, values, ranges, dim):
    """([row_sparse gradient per key], [row ids per key]): a batch's rows cut at the keys'
    row ranges, ids re-based to each key's first row."""
    grads, row_ids = [], []
    for first, n in ranges:
        lo, hi = np.searchsorted(ids, [first, first + n])
        mine = ids[lo:hi] - first
        grads.append(mx.nd.sparse.row_sparse_array((values[lo:hi], mine), shape=(n, dim)))
        row_ids.append(mx.nd.array(mine, dtype="int64"))
    return grads, row_ids


def init_table(mx, kv, lib, keys, ranges, dim):
    """Worker 0's initial value of the table: zeros. minigluon takes a row_sparse value
    storing no row; MXNet's servers need every row of a row_sparse key's first push."""
    for key, (_, n) in zip(keys, ranges):
        if lib == "mxnet" and kv.rank == 0:
            value = mx.nd.sparse.row_sparse_array(
                (np.zeros((n, dim), np.float32), np.arange(n, dtype=np.int64)), shape=(n, dim))
        else:
            value = mx.nd.sparse.zeros("row_sparse", (n, dim))
        kv.init(key, value)
        del value


def wait_for_go():
    """Stay alive (so the parent can read every process's memory peak) until it says go,
    at most DEADLINE seconds."""
    sel = selectors.DefaultSelector()
    sel.register(sys.stdin, selectors.EVENT_READ)
    sel.select(DEADLINE)


# ---- the job ---------------------------------------------------------------------------
def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def peak_mb(pid):
    """The RSS high-water mark of a live process, in MB (VmHWM of /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def job_env(servers, workers):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "PS_"))}
    env.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()),
               DMLC_NUM_SERVER=str(servers), DMLC_NUM_WORKER=str(workers),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def run_job(python, lib, args):
    """Start the job's processes, collect the workers' lines and every process's peak
    memory, then let the job end; whatever still runs at the end is killed by PID."""
    env = job_env(2, args.workers)
    procs = {}
    try:
        for name, role in [("scheduler", "scheduler"), ("server 0", "server"),
                           ("server 1", "server")]:
            procs[name] = subprocess.Popen([python, "-c", f"import {lib}"],
                                           env=dict(env, DMLC_ROLE=role),
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        worker_argv = [python, os.path.abspath(__file__), "--worker", lib,
                       *_worker_flags(args)]
        for w in range(args.workers):
            procs[f"worker {w}"] = subprocess.Popen(
                worker_argv, env=dict(env, DMLC_ROLE="worker"), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True)
        workers = [p for n, p in procs.items() if n.startswith("worker")]
        results = read_results(workers, procs)
        peaks = {name: peak_mb(p.pid) for name, p in procs.items() if name != "scheduler"}
        for proc in workers:
            proc.stdin.write("go\n")
            proc.stdin.close()
        end_job(procs)
        return results, peaks
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _worker_flags(args):
    return ["--rows", str(args.rows), "--dim", str(args.dim), "--touched", str(args.touched),
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--seed",
            str(args.seed)]


def read_results(workers, procs):
    """Each worker's JSON line, within DEADLINE; a process that dies first fails the job."""
    deadline = time.monotonic() + DEADLINE
    sel = selectors.DefaultSelector()
    for proc in workers:
        sel.register(proc.stdout, selectors.EVENT_READ, proc)
    results = {}
    while len(results) < len(workers):
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"the workers did not report within {DEADLINE} s")
        for name, proc in procs.items():
            if proc.poll() is not None and proc not in results:
                raise RuntimeError(f"{name} exited with {proc.returncode} before the end")
        for key, _ in sel.select(min(left, 1.0)):
            line = key.fileobj.readline()
            if line.startswith("{"):
                results[key.data] = json.loads(line)
    return list(results.values())


def end_job(procs, timeout=60):
    deadline = time.monotonic() + timeout
    for name, proc in procs.items():
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{name} did not exit within {timeout} s of the end") from None
        if proc.returncode != 0:
            raise RuntimeError(f"{name} exited with {proc.returncode}")


def summary(results, peaks, dim):
    steps_per_s = statistics.mean(1 / r["step_s"] for r in results)
    rows = statistics.mean(r["rows"] for r in results)
    out = {"steps_per_s": round(steps_per_s, 3),
           "worker_peak_mb": round(max(v for k, v in peaks.items() if "worker" in k)),
           "server_peak_mb": round(max(v for k, v in peaks.items() if "server" in k)),
           "touched_bytes_per_step": round(2 * rows * (dim * 4 + 8))}
    if results[0]["bytes_per_step"] is not None:
        moved = statistics.mean(r["bytes_per_step"] for r in results)
        out["bytes_per_step"] = round(moved)
        out["bytes_ratio"] = round(moved / out["touched_bytes_per_step"], 4)
    return out


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--touched", type=float, default=0.01,
                    help="the share of the rows each step touches (default 0.01)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=15, help="timed steps per worker")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds of each system's job, alternating (default 1)")
    ap.add_argument("--mxnet-python", default=None,
                    help="a Python with Apache MXNet 1.9.1 to run the same job with")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rows < 2 or min(args.dim, args.workers, args.steps, args.repeats) < 1 \
            or args.warmup < 0:
        ap.error(f"need --rows >= 2, --dim, --workers, --steps, --repeats >= 1 and --warmup "
                 f">= 0; got --rows {args.rows} --dim {args.dim} --workers {args.workers} "
                 f"--steps {args.steps} --repeats {args.repeats} --warmup {args.warmup}")
    if not 0 < args.touched <= 0.5:
        ap.error(f"--touched is a share of the rows in (0, 0.5], got {args.touched}")
    return args


def rounds(args):
    """{system: [summary of each round]}: --repeats rounds, minigluon's and MXNet's jobs
    alternating, so that a change in the machine's load falls on both."""
    systems = {"minigluon": sys.executable}
    if args.mxnet_python:
        systems["mxnet"] = args.mxnet_python
    got = {name: [] for name in systems}
    for _ in range(args.repeats):
        for name, python in systems.items():
            results, peaks = run_job(python, name, args)
            got[name].append(dict(summary(results, peaks, args.dim), keys=results[0]["keys"]))
    return got


def merged(runs):
    """The median steps per second over rounds; the largest peaks; the rest of round 1."""
    out = dict(runs[0])
    out["steps_per_s"] = round(statistics.median(r["steps_per_s"] for r in runs), 3)
    out["rounds_steps_per_s"] = [r["steps_per_s"] for r in runs]
    for key in ("worker_peak_mb", "server_peak_mb"):
        out[key] = max(r[key] for r in runs)
    return out


def main():
    args = parse_args()
    if args.worker:
        run_worker(args.worker, args)
        return
    report = {"benchmark": "sparse_kvstore", "rows": args.rows, "dim": args.dim,
              "touched_fraction": args.touched, "workers": args.workers, "servers": 2,
              "steps": args.steps, "repeats": args.repeats,
              "load_avg_1min": os.getloadavg()[0]}
    got = rounds(args)
    ours = merged(got["minigluon"])
    ours.pop("keys")
    report.update(ours, table_mb=round(args.rows * args.dim * 4 / 2**20))
    if "mxnet" in got:
        theirs = merged(got["mxnet"])
        report.update(mxnet_steps_per_s=theirs["steps_per_s"],
                      mxnet_rounds_steps_per_s=theirs["rounds_steps_per_s"],
                      mxnet_keys=theirs["keys"],
                      ratio_vs_mxnet=round(report["steps_per_s"] / theirs["steps_per_s"], 3),
                      mxnet_worker_peak_mb=theirs["worker_peak_mb"],
                      mxnet_server_peak_mb=theirs["server_peak_mb"])
    report["load_avg_1min_end"] = os.getloadavg()[0]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
