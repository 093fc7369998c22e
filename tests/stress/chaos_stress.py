"""The chaos matrix (tests/chaos/test_chaos_matrix.py) with every case repeated, to catch a
flaky pass: a detection or exit bound met by luck once. The suite runs each case once.

    python tests/stress/chaos_stress.py                    # every case 3 times
    python tests/stress/chaos_stress.py --repeat 5 -k restart-server

Each run draws its fault step from the seed it prints (MINIGLUON_CHAOS_SEED), so a failure
can be rerun at the same steps. Outside the default test suite (pytest collects only
test_*.py). The matrix's own harness ends every process it starts, by PID; past the
deadline this script ends, by PID, the pytest it started and every process under it.
"""
import argparse
import os
import subprocess
import sys

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
MATRIX = os.path.join(HERE, "..", "chaos")
PER_RUN = 90.0          # seconds: the matrix's own per-test timeout


def _kill_tree(proc):
    """SIGKILL, by PID, the pytest we started and whatever it started."""
    try:
        tree = psutil.Process(proc.pid).children(recursive=True) + [psutil.Process(proc.pid)]
    except psutil.NoSuchProcess:
        tree = []
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait(10)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (default 3)")
    parser.add_argument("-k", default=None, help="pytest -k expression: which cases")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    env = dict(os.environ, MINIGLUON_CHAOS_REPEAT=str(args.repeat))
    argv = [sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider", MATRIX]
    argv += ["-k", args.k] if args.k else []
    deadline = PER_RUN * 25 * args.repeat          # 25: at least the matrix's case count
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
    try:
        return proc.wait(deadline)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        print(f"chaos stress: past its {deadline:.0f} s deadline; ended pytest (pid "
              f"{proc.pid})", file=sys.stderr)
        return 124


if __name__ == "__main__":
    sys.exit(main())
