"""What a replacement server's handback costs (docs/replicas.md); ONE JSON line.

A real job under minigluon-launch --launcher local: 2 workers, 2 servers,
MINIGLUON_PS_REPLICAS=1, --max-restarts 1, dist_sync with SGD (momentum 0.9) on the
servers, --keys arrays of 1024 x 1024 float32 (4 MiB each; with the momenta and the
previous round's values each server holds 3 x keys x 2 MiB of its half). Each worker
pushes every key and pulls it back per step, --steps steps. After step --kill-at, server 1
is SIGKILLed by PID; its replica serves its range and the launcher starts a replacement,
which takes the range back while training goes on.

Figures (seconds; times are taken as the launcher's output lines arrive, polled every
10 ms): `kill_to_serving_s` (the kill to the scheduler's "serves its range again"),
`registered_to_serving_s` (the scheduler's own figure: the handback, copy included),
`step_s_before` / `step_s_during_copy` / `step_s_after` (median step time of worker 0
before the kill, between the replacement's registration and the handback's end, and
after the handback), `steps_during_copy`, `steps_lost` (steps run twice or never), the
machine's load average at the start and the end.

    python benchmarks/server_handback.py [--keys 10] [--steps 60] [--kill-at 10]
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import launched_pid  # noqa: E402

WORKER = r"""
import sys, time
import numpy as np
import minigluon as mx
from minigluon import nd
keys, steps = int(sys.argv[1]), int(sys.argv[2])
kv = mx.kv.create('dist_sync')
shape = (1024, 1024)
kv.init(list(range(keys)), [nd.ones(shape) for _ in range(keys)])
kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.01, momentum=0.9))
outs = [nd.zeros(shape) for _ in range(keys)]
for t in range(kv.resume_state().step + 1, steps + 1):
    kv.push(list(range(keys)), [nd.ones(shape) * (0.001 * (kv.rank + 1)) for _ in range(keys)])
    kv.pull(list(range(keys)), out=outs)
    outs[0].wait_to_read()
    print(f"STEP {t} {time.monotonic():.6f}", flush=True)
"""
DEADLINE = 300.0


def server_pid(launcher, rank):
    """The Python process of server `rank` (the guard's child)."""
    pid = launched_pid(launcher, "server", rank)
    if pid is None:
        raise RuntimeError(f"no server {rank} under the launcher (pid {launcher.pid})")
    return pid


class Lines:
    """A launch's output lines with the monotonic time each was read."""

    def __init__(self, path):
        self.path, self.seen, self.at = path, 0, []

    def poll(self):
        with open(self.path, "rb") as fin:
            fin.seek(self.seen)
            data = fin.read()
        cut = data.rfind(b"\n") + 1
        self.seen += cut
        now = time.monotonic()
        self.at += [(now, line) for line in data[:cut].decode("utf-8", "replace").splitlines()]

    def first(self, text):
        return next((t for t, line in self.at if text in line), None)


def run(args, folder):
    script = os.path.join(folder, "worker.py")
    with open(script, "w") as fout:
        fout.write(WORKER)
    env = dict(os.environ, MINIGLUON_PS_REPLICAS="1", PS_HEARTBEAT_INTERVAL="0.2",
               PS_HEARTBEAT_TIMEOUT="1.5", OMP_NUM_THREADS="1")
    out_path, err_path = os.path.join(folder, "out"), os.path.join(folder, "err")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "minigluon.tools.launch", "--max-restarts", "1", "-n", "2",
             "-s", "2", sys.executable, script, str(args.keys), str(args.steps)],
            stdout=out, stderr=err, env=env, start_new_session=True)
    outs, errs = Lines(out_path), Lines(err_path)
    deadline, killed = time.monotonic() + DEADLINE, None
    try:
        while launcher.poll() is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the job ran past {DEADLINE:g} s; see {folder}")
            outs.poll()
            errs.poll()
            if killed is None and outs.first(f"[worker 0] STEP {args.kill_at} "):
                killed = time.monotonic()
                os.kill(server_pid(launcher, 1), signal.SIGKILL)
            time.sleep(0.01)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait(10)
    outs.poll()
    errs.poll()
    if launcher.returncode != 0:
        raise RuntimeError(f"the job failed ({launcher.returncode}); see {err_path}")
    return outs, errs, killed


def figures(outs, errs, killed, steps):
    text = "\n".join(line for _, line in errs.at)
    registered = errs.first("server 1 restarted (restart 1)")
    serving = errs.first("serves its range again")
    found = re.search(r"serves its range again, ([\d.]+) s after", text)
    done = {}
    for _, line in outs.at:
        m = re.match(r"\[worker (\d)\] STEP (\d+) ([\d.]+)", line)
        if m:
            done.setdefault(int(m.group(1)), []).append((int(m.group(2)), float(m.group(3))))
    mine = sorted(done[0])
    gaps = [(t, b - a) for (_, a), (t, b) in zip(mine, mine[1:])]
    before = [g for (_, g), (_, at) in zip(gaps, mine[1:]) if at <= killed]
    during = [g for (_, g), (_, at) in zip(gaps, mine[1:]) if registered <= at <= serving]
    after = [g for (_, g), (_, at) in zip(gaps, mine[1:]) if at > serving + 0.05]
    lost = sum(abs(len(v) - steps) + len(v) - len({s for s, _ in v}) for v in done.values())
    median = lambda xs: round(statistics.median(xs), 4) if xs else None   # noqa: E731
    return {"kill_to_serving_s": round(serving - killed, 3),
            "registered_to_serving_s": float(found.group(1)),
            "step_s_before": median(before), "step_s_during_copy": median(during),
            "step_s_after": median(after), "steps_during_copy": len(during),
            "steps_lost": lost}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=10)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--kill-at", type=int, default=10)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    folder = tempfile.mkdtemp(prefix="handback-")     # kept when the job fails
    outs, errs, killed = run(args, folder)
    result = figures(outs, errs, killed, args.steps)
    shutil.rmtree(folder)
    result.update(keys=args.keys, mib_per_server=args.keys * 4 / 2, steps=args.steps,
                  load_start=round(load, 2), load_end=round(os.getloadavg()[0], 2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
