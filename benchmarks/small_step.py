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
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import models_parser, run_models, start_worker, take_turns  # noqa: E402
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


def bench_model(model, python, args):
    sides = SIDES if python else SIDES[:2]
    procs = {s: start_worker(python if s == "torch" else sys.executable, __file__,
                             ["--model", model, "--side", s], args.threads) for s in sides}
    return summarize(take_turns(procs, STEPS[model], args.rounds))


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
    ap = models_parser(__doc__, "lenet,cifar_resnet18")
    ap.add_argument("--model", help="(worker only)")
    ap.add_argument("--side", choices=SIDES, help="(worker only)")
    args = ap.parse_args()
    if args.worker:
        return serve(args)
    run_models("small_step", args, STEPS, bench_model)


if __name__ == "__main__":
    main()
