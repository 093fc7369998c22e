"""Which parts of a training step use the second thread: per function, wall seconds,
CPU seconds of the whole process (all threads) and CPU seconds of the calling thread alone.

Three cProfile profilers take turns step by step, timing with the wall clock
(time.perf_counter), the process's CPU clock (time.process_time) and the main thread's
(time.thread_time), so load drift on a shared machine hits all alike. For a function's own
time (`tottime`: without the Python functions it calls, with the C calls and operators
such as `@` it makes), `others_share` = 1 - thread CPU / process CPU is the part of its
work done by other threads: near 0 where it runs on the calling thread alone, near 1/2 where
two threads split it evenly (or where BLAS threads spin). Unlike cpu/wall, it does not
depend on whether the machine had a free core. Run on fixed threads:

    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MINIGLUON_ADAPTIVE_THREADS=0 \\
        python benchmarks/thread_share.py mobilenet_v2_1.0 [--steps 3] [--top 25] [--plain]

Prints ONE JSON line: the step's wall, CPU and main-thread CPU seconds (medians of the
profiled steps, so with cProfile's overhead), and the `top` functions by process CPU with
wall_s, cpu_s, thread_cpu_s (each summed over its profiler's steps) and others_share.
"""
import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_train  # noqa: E402
from harness import report  # noqa: E402
from zoo_models import SPECS  # noqa: E402


def own_times(profiler):
    """{'file:line(function)': own seconds} of one profiler."""
    stats = pstats.Stats(profiler).stats
    return {f"{os.path.basename(f)}:{line}({name})": tt
            for (f, line, name), (_, _, tt, _, _) in stats.items()}


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time, "thread_cpu": time.thread_time}


def profile(step, steps):
    """{clock: (profiler, per-step seconds)}, the clocks taking turns step by step."""
    runs = {name: (cProfile.Profile(clock), []) for name, clock in CLOCKS.items()}
    for i in range(len(CLOCKS) * steps):
        name = list(CLOCKS)[i % len(CLOCKS)]
        prof, seconds = runs[name]
        start = CLOCKS[name]()
        prof.enable()
        step()
        prof.disable()
        seconds.append(CLOCKS[name]() - start)
    return runs


def row(times, key):
    """One function's figures from {clock: own seconds by function}."""
    got = {f"{name}_s": round(t.get(key, 0.0), 3) for name, t in times.items()}
    cpu = times["cpu"].get(key, 0.0)
    got["others_share"] = round(1 - times["thread_cpu"].get(key, 0.0) / cpu, 2) if cpu else None
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(SPECS))
    ap.add_argument("--steps", type=int, default=3, help="profiled steps per clock")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--plain", action="store_true", help="not hybridized")
    args = ap.parse_args()
    if args.steps < 1 or args.top < 1:
        sys.exit(f"thread_share.py: --steps and --top must be at least 1, got {args.steps} "
                 f"and {args.top}")
    train = zoo_train.minigluon_steps(args.model, SPECS[args.model], not args.plain)[0]
    train()     # trace, allocate
    train()
    load = os.getloadavg()[0]
    runs = profile(train, args.steps)
    times = {name: own_times(prof) for name, (prof, _) in runs.items()}
    top = sorted(times["cpu"], key=lambda k: -times["cpu"][k])[:args.top]
    report({"benchmark": "thread_share", "model": args.model, "hybridized": not args.plain,
            "threads": os.environ.get("OMP_NUM_THREADS"), "steps": args.steps,
            **{f"step_{name}_s": round(statistics.median(seconds), 3)
               for name, (_, seconds) in runs.items()},
            "functions": {k: row(times, k) for k in top},
            "loadavg_1min_before": round(load, 2),
            "loadavg_1min_after": round(os.getloadavg()[0], 2)})


if __name__ == "__main__":
    main()
