"""A scheduler killed again and again (issue 19, item 4): each run of restart_train.py's
dist_sync job (2 workers, 2 servers, 2 epochs of 8 steps, a barrier after every step)
under `minigluon-launch --max-restarts KILLS` has its scheduler SIGKILLed by PID KILLS
times, at random steps, from outside. Every run must exit 0 with the parameters of a
fault-free run, bit for bit. Prints one JSON line: runs, failures, restarts seen, the
median time from each kill to the next barrier passed (the next step after it).

    python tests/stress/scheduler_restart_stress.py --runs 10 --kills 3

Outside the default test suite (pytest collects only test_*.py). Every process is ended
by PID: the launcher's group, at the end of each run.
"""
import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))

from launchkit import read_output  # noqa: E402  (the launcher tests' reader of its output)

SCRIPT = os.path.join(HERE, "..", "tools", "restart_train.py")
RUN_DEADLINE = 180.0


def launch(folder, restarts):
    args = [sys.executable, "-m", "minigluon.tools.launch", "--max-restarts", str(restarts),
            "-n", "2", "-s", "2", "--no-bar", sys.executable, SCRIPT, "--out", folder,
            "--barrier-every", "1"]
    log = open(os.path.join(folder, "log"), "w")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True), log


def scheduler_pid(launcher):
    for proc in psutil.Process(launcher.pid).children(recursive=True):
        try:
            if proc.environ().get("DMLC_ROLE") == "scheduler" and \
                    not any("guard.py" in a for a in proc.cmdline()):
                return proc.pid
        except psutil.Error:
            continue
    return None


def run(folder, kills, rng):
    """(exit status, kill times, the log) of one run that kills the scheduler `kills` times."""
    at = sorted(rng.sample(range(3, 30), kills))        # STEP lines (both workers) seen
    launcher, log = launch(folder, kills)
    times, end = [], time.monotonic() + RUN_DEADLINE
    try:
        while launcher.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
            steps = read_output(log).count("] STEP ")
            if len(times) < kills and steps >= at[len(times)]:
                pid = scheduler_pid(launcher)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    times.append(time.monotonic())
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
        code = launcher.wait()
    return code, times, read_output(log)


def same_params(folder, want):
    with np.load(os.path.join(folder, "params-0.npz")) as got:
        return all(np.array_equal(got[k], want[k]) for k in want)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as ref:
        code, _, text = run(ref, 0, rng)          # the fault-free parameters
        if code != 0:
            print(f"the fault-free run failed: exit {code}\n{text[-3000:]}", file=sys.stderr)
            return 1
        with np.load(os.path.join(ref, "params-0.npz")) as found:
            want = dict(found)
    failures, restarts, waits = 0, 0, []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as folder:
            code, times, text = run(folder, args.kills, rng)
            ok = code == 0 and same_params(folder, want)
            failures += not ok
            restarts += text.count("restarting it on the same address")
            steps = [float(t) for t in re.findall(r"\] STEP \d+ ([\d.]+)", text)]
            for t0 in times:
                after = sorted(t for t in steps if t > t0)
                if len(after) > 1:
                    waits.append(after[1] - t0)     # the first step after a barrier
            if not ok:
                print(f"run {i}: exit {code}\n{text[-3000:]}", file=sys.stderr)
    print(json.dumps({"runs": args.runs, "kills_per_run": args.kills, "failures": failures,
                      "restarts": restarts, "median_kill_to_step_after_barrier_s":
                      round(statistics.median(waits), 3) if waits else None}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
