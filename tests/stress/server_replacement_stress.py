"""Servers killed again and again, each replaced (issue 19, item 3): each run of
restart_train.py's dist_sync job (2 workers, 2 servers, 3 epochs of 8 steps, 0.3 s
between steps) with MINIGLUON_PS_REPLICAS=1 under `minigluon-launch --max-restarts KILLS`
has a random server SIGKILLed by PID KILLS times, at random steps, from outside, each
once the previous replacement took its range back. Every run must exit 0 with the
parameters of a fault-free run, bit for bit. Prints one JSON line: runs, failures,
handbacks seen, the median time from a kill to the replacement serving its range.

    python tests/stress/server_replacement_stress.py --runs 5 --kills 3

Outside the default test suite (pytest collects only test_*.py). Every process is ended
by PID: the launcher's group, at the end of each run.
"""
import argparse
import json
import os
import random
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
RUN_DEADLINE = 240.0
BACK = "serves its range again"


def launch(folder, restarts, replicas):
    args = [sys.executable, "-m", "minigluon.tools.launch", "--max-restarts", str(restarts),
            "-n", "2", "-s", "2", "--no-bar", sys.executable, SCRIPT, "--out", folder,
            "--epochs", "3", "--step-sleep", "0.3"]
    env = dict(os.environ, MINIGLUON_PS_REPLICAS=str(int(replicas)),
               PS_HEARTBEAT_INTERVAL="0.2", PS_HEARTBEAT_TIMEOUT="1.5")
    log = open(os.path.join(folder, "log"), "w")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True), log


def server_pid(launcher, rank):
    for proc in psutil.Process(launcher.pid).children(recursive=True):
        try:
            env = proc.environ()
            if env.get("DMLC_ROLE") == "server" and \
                    env.get("MINIGLUON_LAUNCH_RANK") == str(rank) and not proc.children():
                return proc.pid
        except psutil.Error:
            continue
    return None


def run(folder, kills, rng):
    """(exit status, seconds from each kill to its handback, the log) of one run."""
    at = sorted(rng.sample(range(3, 36), kills))     # STEP lines (both workers) seen
    victims = [rng.randrange(2) for _ in range(kills)]
    launcher, log = launch(folder, kills, replicas=True)
    killed, backs, end = [], [], time.monotonic() + RUN_DEADLINE
    try:
        while launcher.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
            text = read_output(log)
            if len(backs) < len(killed) and text.count(BACK) > len(backs):
                backs.append(time.monotonic() - killed[len(backs)])
            due = len(killed) < kills and text.count("] STEP ") >= at[len(killed)]
            if due and len(backs) == len(killed):
                pid = server_pid(launcher, victims[len(killed)])
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(time.monotonic())
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
        code = launcher.wait()
    return code, backs, read_output(log)


def same_params(folder, want):
    with np.load(os.path.join(folder, "params-0.npz")) as got:
        return all(np.array_equal(got[k], want[k]) for k in want)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
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
    failures, handbacks, waits = 0, 0, []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as folder:
            code, backs, text = run(folder, args.kills, rng)
            ok = code == 0 and same_params(folder, want)
            failures += not ok
            handbacks += text.count(BACK)
            waits += backs
            if not ok:
                print(f"run {i}: exit {code}\n{text[-3000:]}", file=sys.stderr)
    print(json.dumps({"runs": args.runs, "kills_per_run": args.kills, "failures": failures,
                      "handbacks": handbacks, "median_kill_to_serving_s":
                      round(statistics.median(waits), 3) if waits else None,
                      "load": round(os.getloadavg()[0], 2)}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
