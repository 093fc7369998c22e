"""CPU seconds (user + system), system seconds, minor page faults and wall seconds per
step of one zoo model, hybridized and plain, training and inference, in one process with
the four taking turns (the order reversed every other round): does the graph path cost
what the imperative path does not? Run on pinned threads to compare work:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MINIGLUON_ADAPTIVE_THREADS=0 \
        python benchmarks/step_faults.py resnet18_v1 [--rounds 3] [--batch 16] [--unfused]

`--unfused` adds two sides, `unfused_train` and `unfused_infer`: the hybridized model
traced with MINIGLUON_FUSE_BN_ACT=0 (BatchNorm and its activation as two operators), to
compare with the fused graph of `hybrid_*` in the same run.

Prints ONE JSON line: per side the medians over rounds.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_train  # noqa: E402
from harness import report  # noqa: E402
from zoo_models import SPECS  # noqa: E402


def measure(step):
    """(cpu, sys, minor faults, wall) of one call of `step`."""
    before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    step()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            after.ru_stime - before.ru_stime, after.ru_minflt - before.ru_minflt,
            time.perf_counter() - wall)


def unfused_steps(model, spec):
    """(train, infer) of the hybridized model, traced here without the fusion (the switch
    is read when a graph is built)."""
    train, infer = zoo_train.minigluon_steps(model, spec, True)[:2]
    saved = os.environ.get("MINIGLUON_FUSE_BN_ACT")
    os.environ["MINIGLUON_FUSE_BN_ACT"] = "0"
    try:
        train()
        infer()
    finally:
        if saved is None:
            del os.environ["MINIGLUON_FUSE_BN_ACT"]
        else:
            os.environ["MINIGLUON_FUSE_BN_ACT"] = saved
    return train, infer


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(SPECS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=None, help="default: zoo_train.py's")
    ap.add_argument("--unfused", action="store_true",
                    help="also time the hybridized model without the BatchNorm fusion")
    args = ap.parse_args()
    spec = dict(SPECS[args.model], **({"batch": args.batch} if args.batch else {}))
    sides = {}
    for mode in ("hybrid", "plain"):
        train, infer = zoo_train.minigluon_steps(args.model, spec, mode == "hybrid")[:2]
        sides[f"{mode}_train"], sides[f"{mode}_infer"] = train, infer
    if args.unfused:
        sides["unfused_train"], sides["unfused_infer"] = unfused_steps(args.model, spec)
    for step in sides.values():     # trace, allocate
        step()
        step()
    got = {name: [] for name in sides}
    for r in range(args.rounds):
        for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            got[name].append(measure(sides[name]))
    keys = ("cpu_s", "sys_s", "minor_faults", "wall_s")
    result = {name: {k: round(statistics.median(m[i] for m in runs), 4)
                     for i, k in enumerate(keys)} for name, runs in got.items()}
    report({"benchmark": "step_faults", "model": args.model, "batch": spec["batch"],
            "rounds": args.rounds, "sides": result, "loadavg_1min": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
