"""Wall and CPU seconds of one hybridized training step under thread settings, quiet and
beside busy processes: where CPU seconds per step grow with contention while the work is
the same, some thread is spinning instead of sleeping.

Each setting runs the model in its own worker process (zoo_train's) with extra environment
variables; the settings take turns in every round, first quiet, then beside --contention N
pure-Python loops. Prints ONE JSON line with, per setting, median wall and CPU seconds per
step in both phases:

    python benchmarks/thread_spin.py --model cifar_resnet18 --contention 3 --rounds 3
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BusyProcesses, blas_threads, interleaved_rounds, report  # noqa: E402
from zoo_models import SPECS  # noqa: E402
from zoo_train import Worker  # noqa: E402

SETTINGS = {
    # today's default: OpenBLAS sleeps at once, threads follow the free cores
    "default": {},
    # the same count fixed at the cores (or OMP_NUM_THREADS): what adapting buys
    "fixed": {"MINIGLUON_ADAPTIVE_THREADS": "0"},
    # before issue 16: fixed count, OpenBLAS spinning its default 2^28 cycles
    "spinning": {"MINIGLUON_ADAPTIVE_THREADS": "0", "OPENBLAS_THREAD_TIMEOUT": "28"},
    # everything on one thread: the work itself
    "both_1": {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
}


def phase(workers, spec, args):
    """{setting: (median wall s/step, median CPU s/step)} over interleaved rounds."""
    runners = {name: (lambda n, w=w: w.run("train", n)) for name, w in workers.items()}
    rates = interleaved_rounds(runners, spec["batch"], args.rounds, spec["steps"], 1)
    return {name: {"wall_s": round(spec["batch"] / statistics.median(r), 4),
                   "cpu_s": round(statistics.median(workers[name].cpu["train"][-args.rounds:]),
                                  4)}
            for name, r in rates.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cifar_resnet18", choices=sorted(SPECS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--contention", type=int, default=3)
    args = ap.parse_args()
    spec, threads = SPECS[args.model], blas_threads()
    workers = {name: Worker(sys.executable, args.model, "minigluon", threads, env=env)
               for name, env in SETTINGS.items()}
    try:
        load = os.getloadavg()[0]
        quiet = phase(workers, spec, args)
        with BusyProcesses(args.contention):
            busy = phase(workers, spec, args)
    finally:
        for worker in workers.values():
            worker.close()
    report({"benchmark": "thread_spin", "model": args.model, "batch": spec["batch"],
            "rounds": args.rounds, "contention": args.contention, "threads": threads,
            "quiet": quiet, "busy": busy, "loadavg_1min_before": round(load, 2),
            "loadavg_1min_after": round(os.getloadavg()[0], 2)})


if __name__ == "__main__":
    main()
