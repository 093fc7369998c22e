"""What a bucket saves: K small keys pushed and pulled one message each against in one
PUSH_MANY + PULL_MANY per server; ONE JSON line.

One real dist_sync job on 127.0.0.1 (a scheduler, --servers servers, --workers workers as
processes). Each worker alternates rounds of the two ways on two stores of the job (the
same keys, the same values), so both see the same machine; per round, wall and CPU
(time.process_time) ms per step, where a step pushes every key and waits for every
pull. Figures are medians over rounds of the workers' mean; ratios are bucketed / alone
of the medians of per-round ratios (below 1: buckets are cheaper). The keys default to
ResNet-18's small arrays: 41 of 64 to 512 float32 values (BatchNorm's gammas and betas
and the last bias).

    python benchmarks/bucket_messages.py [--keys 41] [--size 256] [--rounds 7] [--steps 20]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import harness

DEADLINE = 600


def run_worker(args):
    import numpy as np
    import minigluon as mx
    from minigluon import nd
    alone, bucketed = mx.kv.create("dist_sync"), mx.kv.create("dist_sync")
    keys = list(range(args.keys))
    grads = [nd.array(np.random.default_rng(k).standard_normal(args.size).astype("f4"))
             for k in keys]
    outs = {name: [nd.zeros(args.size) for _ in keys] for name in ("alone", "bucketed")}
    for kv in (alone, bucketed):
        kv.init(keys, [nd.zeros(args.size) for _ in keys])
    groups = {}
    for k in keys:
        groups.setdefault(bucketed.bucket_server(k, 1 << 30), []).append(k)

    def step(name):
        if name == "alone":
            laters = []
            for k in keys:
                alone.push(k, grads[k])
                laters.append(alone.pull_later(k, out=outs[name][k]))
        else:
            laters = []
            for ks in groups.values():
                bucketed.push_bucket([(k, grads[k]) for k in ks])
                laters += bucketed.pull_bucket_later([(k, outs[name][k]) for k in ks])
        for later in laters:
            later.wait()

    for name in ("alone", "bucketed"):
        step(name)
    rounds = {"alone": [], "bucketed": []}
    for r in range(args.rounds):
        for name in (("alone", "bucketed") if r % 2 == 0 else ("bucketed", "alone")):
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                step(name)
            rounds[name].append(((time.perf_counter() - wall) / args.steps,
                                 (time.process_time() - cpu) / args.steps))
    same = all((a.asnumpy() == b.asnumpy()).all()
               for a, b in zip(outs["alone"], outs["bucketed"]))
    print(json.dumps({"rounds": rounds, "identical": same}), flush=True)


def run_job(args):
    from overlap_step import free_port
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "PS_"))}
    env.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()),
               DMLC_NUM_SERVER=str(args.servers), DMLC_NUM_WORKER=str(args.workers),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    procs = []
    try:
        for role in ["scheduler"] + ["server"] * args.servers:
            procs.append(subprocess.Popen([sys.executable, "-c", "import minigluon"],
                                          env=dict(env, DMLC_ROLE=role),
                                          stdout=subprocess.DEVNULL))
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--keys",
                str(args.keys), "--size", str(args.size), "--rounds", str(args.rounds),
                "--steps", str(args.steps)]
        return harness.run_workers(argv, env, args.workers, procs, DEADLINE)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=41)
    parser.add_argument("--size", type=int, default=256, help="float32 values per key")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
        return
    load_before = os.getloadavg()[0]
    results = run_job(args)
    line = {"benchmark": "bucket_messages", "keys": args.keys, "floats_per_key": args.size,
            "workers": args.workers, "servers": args.servers, "rounds": args.rounds,
            "steps_per_round": args.steps}
    for k, what in enumerate(("wall", "cpu")):
        per_round = {name: [statistics.mean(res["rounds"][name][r][k] for res in results)
                            for r in range(args.rounds)] for name in ("alone", "bucketed")}
        for name, values in per_round.items():
            line[f"{what}_ms_{name}"] = round(statistics.median(values) * 1e3, 3)
        line[f"{what}_ratio"] = round(statistics.median(
            b / a for a, b in zip(per_round["alone"], per_round["bucketed"])), 3)
    line["identical"] = all(res["identical"] for res in results)
    line["load_avg"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
