"""CPU seconds per training step of the small models (LeNet at batch 64, d2l's CIFAR
ResNet-18 at batch 32), minigluon hybridized and not beside PyTorch, on a fixed number of
compute threads: the fixed per-step costs that samples/s hides on a loaded machine. The
convolutional zoo models of zoo_train.py (resnet18_v1, resnet50_v1, mobilenet_v2_1.0,
vgg11, densenet121, at its batches) are there too, one step a round each.

A step is zoo_train.py's (forward, loss, backward, SGD with momentum and wd). Each side of
each model runs in its own worker process on `--threads` threads (minigluon's adaptive
count off, so both sides use the same number); the workers take turns in every round and
time each step with time.process_time() (all of the process's threads) and wall time.
Figures are medians over all steps of all rounds; `cpu_ratio_*` is PyTorch's CPU per step
over minigluon's, the median of the per-round ratios (above 1: minigluon does the step
with less CPU). Prints ONE JSON line:

    python benchmarks/small_step.py --torch-python /tmp/tvenv/bin/python \
        [--models lenet,cifar_resnet18] [--threads 1] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import end_process, read_reply, report, torch_python  # noqa: E402
from zoo_models import SPECS  # noqa: E402

SIDES = ("hybrid", "plain", "torch")
# timed steps per round, per worker
STEPS = {"lenet": 20, "cifar_resnet18": 2, "resnet18_v1": 1, "resnet50_v1": 1,
         "mobilenet_v2_1.0": 1, "vgg11": 1, "densenet121": 1}


def serve(args):
    """The worker: warm up, then answer each 'N' line with N steps' CPU and wall seconds."""
    import zoo_train
    spec = SPECS[args.model]
    if args.side == "torch":
        train = zoo_train.torch_steps(args.model, spec, args.threads)[0]
    else:
        train = zoo_train.minigluon_steps(args.model, spec, args.side == "hybrid")[0]
    for _ in range(2):
        train()          # the first calls trace the graph and allocate
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cpu, wall = [], []
        for _ in range(int(line)):
            c, w = time.process_time(), time.perf_counter()
            train()
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - w)
        print(json.dumps({"cpu": cpu, "wall": wall}), flush=True)


def start(python, model, side, threads):
    env = {**os.environ, "OMP_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads), "MINIGLUON_ADAPTIVE_THREADS": "0"}
    proc = subprocess.Popen([python, os.path.abspath(__file__), "--worker", "--model", model,
                             "--side", side, "--threads", str(threads)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    read_reply(proc)
    return proc


def bench_model(model, python, args):
    sides = SIDES if python else SIDES[:2]
    procs = {s: start(python if s == "torch" else sys.executable, model, s, args.threads)
             for s in sides}
    rounds = {s: [] for s in sides}
    try:
        for _ in range(args.rounds):
            for side, proc in procs.items():
                proc.stdin.write(f"{STEPS[model]}\n")
                proc.stdin.flush()
                rounds[side].append(json.loads(read_reply(proc)))
    finally:
        for proc in procs.values():
            end_process(proc)
    return summarize(rounds)


def summarize(rounds):
    out = {}
    for side, per_round in rounds.items():
        out[f"cpu_s_{side}"] = round(statistics.median(
            [t for r in per_round for t in r["cpu"]]), 4)
        out[f"wall_s_{side}"] = round(statistics.median(
            [t for r in per_round for t in r["wall"]]), 4)
    if "torch" in rounds:
        for side in ("hybrid", "plain"):
            out[f"cpu_ratio_{side}"] = round(statistics.median(
                statistics.median(t["cpu"]) / statistics.median(m["cpu"])
                for t, m in zip(rounds["torch"], rounds[side])), 3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="lenet,cifar_resnet18")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--torch-python", default=None)
    ap.add_argument("--worker", action="store_true", help="(internal)")
    ap.add_argument("--model", help="(worker only)")
    ap.add_argument("--side", choices=SIDES, help="(worker only)")
    args = ap.parse_args()
    if args.worker:
        return serve(args)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in STEPS]
    if unknown:
        sys.exit(f"small_step.py: unknown models {unknown}; choose from {sorted(STEPS)}")
    if args.threads < 1 or args.rounds < 1:
        sys.exit(f"small_step.py: --threads and --rounds must be at least 1, got "
                 f"{args.threads} and {args.rounds}")
    python, note = torch_python(args.torch_python)
    load_before = os.getloadavg()[0]
    results = {m: bench_model(m, python, args) for m in models}
    report({"benchmark": "small_step", "threads": args.threads, "rounds": args.rounds,
            "models": results, "loadavg_1min_before": round(load_before, 2),
            "loadavg_1min_after": round(os.getloadavg()[0], 2), "note": note})


if __name__ == "__main__":
    main()
