"""No false alarms under CPU oversubscription (issue 19): a healthy job must never be
declared to have lost a peer.

Runs a real dist_sync job (scheduler, 2 servers, 2 workers on 127.0.0.1) with the default
heartbeat settings (PS_HEARTBEAT_INTERVAL 1 s, PS_HEARTBEAT_TIMEOUT 10 s, PS_PROBE_TIMEOUT
2.5 s) RUNS times, while BUSY processes spin on the machine's cores, and injects in each
run pauses shorter than the timeout:

- SIGSTOP of worker 1 for 3 s, then SIGCONT (`--bursts` times, default 2);
- worker 0 holds the GIL for 2 s (a C call made through ctypes.PyDLL, which keeps it, as
  a long garbage-collection pass does), so its heartbeat thread cannot run either.

A run is a false alarm when any process says a peer was lost (PeerLostError, "presumed
dead", the scheduler aborting the job) or exits non-zero; a run that fails otherwise
(a hang, a missing result) is counted apart. The exit status is 0 only with neither.

    python tests/stress/liveness_stress.py              # 20 runs, 6 busy processes
    python tests/stress/liveness_stress.py --runs 3     # what CI runs (test_liveness_stress.py)

Outside the default test suite (pytest collects only test_*.py). Every process it starts
is ended by PID; the busy ones also end on their own once this script is gone.
"""
import argparse
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kvstore"))

from clusterkit import ChaosJob  # noqa: E402  (a sibling folder, as tests/chaos imports it)

STOP, HOLD = 3.0, 2.0           # seconds: SIGSTOP bursts, the GIL held by worker 0
RUN_DEADLINE = 180.0            # a run that takes longer failed (a hang), not a false alarm
ALARMS = ("PeerLostError", "presumed dead", "aborting the job", "the job is lost")
DEFAULTS = {"PS_HEARTBEAT_INTERVAL": "", "PS_HEARTBEAT_TIMEOUT": "", "PS_PROBE_TIMEOUT": "",
            "PS_STARTUP_TIMEOUT": "", "MINIGLUON_KVSTORE_TIMEOUT": ""}   # "": the default

TRAIN = """
import ctypes
kv = mx.kv.create('dist_sync')
ctl = mx.kv.create('dist_sync')        # a second store of the job: when to stop, so that
ctl.init('end', nd.zeros((1,)))        # both workers stop after the same step
r = kv.rank
open(f'rank{r}.pid', 'w').write(str(os.getpid()))
hold = ctypes.PyDLL(None).usleep       # PyDLL keeps the GIL for the whole call
hold.argtypes = [ctypes.c_uint]
net = gluon.nn.Dense(4, in_units=8)
net.initialize(mx.init.One())
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.001}, kvstore=kv)
x, t, end = nd.ones((2, 8)), 0, nd.zeros((1,))
while end.asnumpy()[0] == 0:
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    trainer.step(2)
    t += 1
    if t == 3 and r == 0:
        open('at-step', 'w').close()
    if r == 0 and os.path.exists('hold') and not os.path.exists('held'):
        hold(int(float(os.environ['STRESS_HOLD']) * 1e6))
        open('held', 'w').close()
    ctl.push('end', nd.ones((1,)) * float(r == 0 and os.path.exists('end')))
    ctl.pull('end', out=end)           # no optimizer: the round's sum, the same for both
    time.sleep(0.05)
report(rank=r, steps=t, done=True)
"""

BUSY = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    sum(range(10**5))\n"


def start_busy(count):
    """`count` processes that spin on the CPU until ended (or this script is gone)."""
    return [subprocess.Popen([sys.executable, "-c", BUSY], stdin=subprocess.DEVNULL)
            for _ in range(count)]


def end_busy(procs):
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _stop_burst(pid):
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(STOP)
    finally:
        os.kill(pid, signal.SIGCONT)


def one_run(folder, bursts):
    """('ok' | 'false alarm' | 'failed', detail, seconds) of one job; the detail of a
    good run says how long the processes took to start training."""
    start = time.monotonic()
    job = ChaosJob(folder, TRAIN, workers=2, servers=2,
                   env=dict(DEFAULTS, STRESS_HOLD=str(HOLD),
                            PS_VERBOSE="1"))
    try:
        job.wait_file("at-step", within=RUN_DEADLINE)
        started = time.monotonic() - start
        victim = job.worker_pid(1)
        _stop_burst(victim)
        (folder / "hold").touch()
        job.wait_file("held", within=RUN_DEADLINE)
        for _ in range(bursts - 1):
            _stop_burst(victim)
        time.sleep(1.0)                  # train on for a while after the last pause
        (folder / "end").touch()
        job.watch(within=RUN_DEADLINE - (time.monotonic() - start))
        verdict, detail = _verdict(job)
        return verdict, detail or f"started training after {started:.1f} s", \
            time.monotonic() - start
    except AssertionError as err:     # a file never appeared: judged from the logs below
        verdict = _verdict(job)
        return (verdict[0] if verdict[0] == "false alarm" else "failed",
                f"{verdict[1]}; {str(err)[:200]}", time.monotonic() - start)
    finally:
        job.cleanup()


def _verdict(job):
    for name in job.procs:
        text = job.err(name)
        for alarm in ALARMS:
            if alarm in text:
                line = next(ln for ln in text.splitlines() if alarm in ln)
                return "false alarm", f"{name}: {line.strip()[:300]}"
    codes = {n: job.code(n) for n in job.procs}
    if any(c != 0 for c in codes.values()):
        return "failed", f"exit statuses {codes}"
    results = job.results()
    if sorted(results) != [0, 1] or not all(r.get("done") for r in results.values()):
        return "failed", f"results {results}"
    return "ok", ""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="jobs to run (default 20)")
    parser.add_argument("--busy", type=int, default=6,
                        help="spinning processes beside the job (default 6)")
    parser.add_argument("--bursts", type=int, default=2,
                        help="SIGSTOP bursts of 3 s on worker 1 per run (default 2)")
    parser.add_argument("--dir", default=None, help="where the runs' logs go (default: a "
                        "temporary folder, removed unless a run failed)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.busy < 0 or args.bursts < 1:
        parser.error(f"--runs and --bursts must be >= 1 and --busy >= 0, got --runs "
                     f"{args.runs} --bursts {args.bursts} --busy {args.busy}")
    return run_all(args)


def run_all(args):
    root = pathlib.Path(args.dir or tempfile.mkdtemp(prefix="liveness-stress-"))
    root.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    busy = start_busy(args.busy)
    counts, took = {"ok": 0, "false alarm": 0, "failed": 0}, []
    try:
        for i in range(args.runs):
            folder = root / f"run{i}"
            folder.mkdir()
            verdict, detail, seconds = one_run(folder, args.bursts)
            counts[verdict] += 1
            took.append(seconds)
            print(f"run {i + 1}/{args.runs}: {verdict} ({seconds:.1f} s, load "
                  f"{os.getloadavg()[0]:.1f}){': ' + detail if detail else ''}", flush=True)
    finally:
        end_busy(busy)
    print(f"liveness stress: {counts['false alarm']} false alarms and {counts['failed']} "
          f"other failures in {args.runs} runs ({args.busy} busy processes on "
          f"{os.cpu_count()} cores, {args.bursts} SIGSTOP bursts of {STOP:g} s and a "
          f"{HOLD:g} s GIL hold per run, default heartbeat settings); median run "
          f"{statistics.median(took):.1f} s; load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after; logs in {root}", flush=True)
    if counts["ok"] == args.runs and not args.dir:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if counts["ok"] == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
