"""Where a zoo model's training step spends its wall time, operator by operator: the
hybridized graph's steps and their backwards as `mx.profiler` records them (the same
clock as the step), and what is left outside them (the tape, the loss, the Trainer, the
graph's own Python).

Runs the step of zoo_train.py (`zoo_train.minigluon_steps`) on the compute threads the
environment gives; fix them to compare runs:

    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MINIGLUON_ADAPTIVE_THREADS=0 \\
        python benchmarks/step_ops.py densenet121 [--steps 3] [--plain]

Prints ONE JSON line: the step's median wall and CPU seconds (process, all threads, without
the profiler), then per operator ("symbolic" forward steps, "backward" their gradients)
milliseconds a step, its share of the profiled step's wall, and `outside_ops_ms`.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_train  # noqa: E402
from harness import report  # noqa: E402
from zoo_models import SPECS  # noqa: E402


def timed_steps(step, steps):
    """(median wall s, median process CPU s) over `steps` calls."""
    walls, cpus = [], []
    for _ in range(steps):
        w, c = time.perf_counter(), time.process_time()
        step()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def profiled(step, steps):
    """({(category, operator): ms a step}, profiled wall ms a step)."""
    import json
    from minigluon import profiler
    profiler.set_config(profile_all=True)
    profiler.dumps(reset=True)
    start = time.perf_counter()
    profiler.set_state("run")
    for _ in range(steps):
        step()
    profiler.set_state("stop")
    wall_ms = (time.perf_counter() - start) * 1e3 / steps
    table = json.loads(profiler.dumps(reset=True, format="json"))["Time"]
    return ({(cat, name): row["Total"] / steps for cat, rows in table.items()
             for name, row in rows.items()}, wall_ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(SPECS))
    ap.add_argument("--steps", type=int, default=3, help="steps timed, then steps profiled")
    ap.add_argument("--plain", action="store_true", help="not hybridized")
    args = ap.parse_args()
    if args.steps < 1:
        sys.exit(f"step_ops.py: --steps must be at least 1, got {args.steps}")
    train = zoo_train.minigluon_steps(args.model, SPECS[args.model], not args.plain)[0]
    train()     # trace, allocate
    train()
    load = os.getloadavg()[0]
    wall, cpu = timed_steps(train, args.steps)
    ops, wall_ms = profiled(train, args.steps)
    # backward spans nest in the graph's own backward ("CachedGraph"): count the leaves
    leaves = {k: v for k, v in ops.items() if k[0] in ("symbolic", "backward") and
              k[1] != "CachedGraph"}
    order = sorted(leaves, key=lambda k: -leaves[k])
    report({"benchmark": "step_ops", "model": args.model, "hybridized": not args.plain,
            "threads": os.environ.get("OMP_NUM_THREADS"), "steps": args.steps,
            "step_wall_s": round(wall, 3), "step_cpu_s": round(cpu, 3),
            "profiled_step_wall_ms": round(wall_ms, 1),
            "ops_ms": {f"{cat}:{name}": {"ms": round(leaves[(cat, name)], 1),
                                         "share": round(leaves[(cat, name)] / wall_ms, 3)}
                       for cat, name in order},
            "outside_ops_ms": round(wall_ms - sum(leaves.values()), 1),
            "loadavg_1min_before": round(load, 2),
            "loadavg_1min_after": round(os.getloadavg()[0], 2)})


if __name__ == "__main__":
    main()
