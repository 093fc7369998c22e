"""A whole host cut off again and again (issue 19, item 5): runs
tests/realhosts/test_realhosts_hostloss.py RUNS times (each a fresh lab of network
namespaces with an sshd per host; the host of worker 1 and server 1 cut after step 4;
both restarted on the spare host; the job must exit 0 with the fault-free parameters,
bit for bit) and prints one JSON line: runs, failures, and the medians of its figures
(cut to the launcher's notice, to server 1 serving again, to the next completed step).

    sudo python tests/stress/hostloss_stress.py --runs 5

Needs what tests/realhosts needs (root, iproute2, OpenSSH). Outside the default test suite
(pytest collects only test_*.py). Each run is a pytest process with a deadline, killed by
its PID (and its process group) if it overruns; the lab's namespaces go with it.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TEST = os.path.join(REPO, "tests", "realhosts", "test_realhosts_hostloss.py")
RUN_DEADLINE = 300.0
FIGURES = {"notice_s": r"notice ([\d.]+) s after the cut",
           "serving_again_s": r"serving again ([\d.]+) s after it",
           "next_step_s": r"next step ([\d.]+) s after it"}


def one_run():
    """(passed, {figure: seconds}) of one pytest run of the host-loss test."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-s", "-p",
                             "no:cacheprovider", TEST], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=RUN_DEADLINE)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return False, {}
    line = next((l for l in out.splitlines() if l.startswith("host cut:")), "")
    found = {k: float(m.group(1)) for k, p in FIGURES.items() if (m := re.search(p, line))}
    if proc.returncode != 0:
        sys.stderr.write(out[-3000:])
    return proc.returncode == 0, found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if args.runs < 1:
        ap.error(f"--runs must be at least 1, got {args.runs}")
    results = [one_run() for _ in range(args.runs)]
    figures = {k: [f[k] for _, f in results if k in f] for k in FIGURES}
    print(json.dumps({"runs": args.runs, "failures": sum(not ok for ok, _ in results),
                      **{f"median_{k}": round(statistics.median(v), 2) if v else None
                         for k, v in figures.items()}, "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
