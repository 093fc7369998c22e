"""CPU (or wall) milliseconds of every convolution shape of a zoo model, minigluon beside
PyTorch, layer by layer: which shapes a step loses on.

The shapes come from a forward of the minigluon model (`zoo_models.minigluon_net`, the
batch of zoo_train.py) with hooks on its Conv2D layers; each distinct shape counts as
often as the model has it. Each side runs in its own worker process on `--threads`
threads (minigluon's adaptive count off, OpenBLAS and torch pinned), and times every
shape's inference forward (no autograd) and training pass (forward recorded, backward for
data and weight) with time.process_time(), all of the process's threads, or with
`--clock wall` by the wall clock (on 2 threads of a quiet machine: which shapes leave the
second core idle). The workers take
turns in each round; figures are medians over rounds. Prints ONE JSON line: per shape
`mg_fwd_ms`, `mg_train_ms`, `torch_fwd_ms`, `torch_train_ms`, `count`, and per model the
totals (count-weighted) and `loss_train_ms` (minigluon's extra CPU in the step's
convolutions), shapes sorted by that loss:

    python benchmarks/zoo_layers.py --torch-python /tmp/tvenv/bin/python \
        [--models mobilenet_v2_1.0,densenet121] [--threads 1] [--rounds 3] [--clock wall]
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import models_parser, run_models, start_worker, take_turns  # noqa: E402
from zoo_models import SPECS  # noqa: E402

CONV_MODELS = ("resnet18_v1", "resnet50_v1", "mobilenet_v2_1.0", "vgg11", "densenet121",
               "cifar_resnet18", "lenet")
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
KEYS = ("n", "c", "h", "w", "f", "kh", "kw", "sh", "sw", "ph", "pw", "groups")


def conv_shapes(model):
    """{shape key: (shape dict, count)} of the model's Conv2D layers on its benchmark batch."""
    import minigluon as mx
    from minigluon import nd
    from minigluon.gluon import nn
    from zoo_models import batch_arrays, minigluon_net
    spec = SPECS[model]
    net = minigluon_net(model, spec)
    net.initialize(mx.init.Xavier())
    found = {}

    def hook(block, inputs, out):
        k = block._kwargs
        x = inputs[0]
        shape = dict(zip(KEYS, (*x.shape, out.shape[1], *k["kernel"], *k["stride"],
                                *k["pad"], k["num_group"])))
        key = "_".join(str(shape[name]) for name in KEYS)
        found[key] = (shape, found.get(key, (None, 0))[1] + 1)

    def visit(block):
        if isinstance(block, nn.Conv2D):
            block.register_forward_hook(hook)
        for child in block._children.values():
            visit(child)
    visit(net)
    net(nd.array(batch_arrays(spec)[0]))
    return found


def minigluon_layer(shape):
    """(inference forward, training pass) of one convolution shape in minigluon."""
    import numpy as np
    from minigluon import autograd, nd
    rng = np.random.default_rng(0)
    x = nd.array(rng.standard_normal((shape["n"], shape["c"], shape["h"], shape["w"]),
                                     dtype=np.float32))
    w = nd.array(rng.standard_normal((shape["f"], shape["c"] // shape["groups"], shape["kh"],
                                      shape["kw"]), dtype=np.float32))
    for v in (x, w):
        v.attach_grad()
    attrs = dict(kernel=(shape["kh"], shape["kw"]), stride=(shape["sh"], shape["sw"]),
                 pad=(shape["ph"], shape["pw"]), num_filter=shape["f"],
                 num_group=shape["groups"], no_bias=True)

    def forward():
        nd.Convolution(x, w, **attrs).wait_to_read()

    def train():
        with autograd.record():
            y = nd.Convolution(x, w, **attrs)
        y.backward(nd.ones_like(y))
        w.grad.wait_to_read()
    return forward, train


def torch_layer(shape):
    """The same two passes in PyTorch."""
    import torch
    torch.manual_seed(0)
    x = torch.randn(shape["n"], shape["c"], shape["h"], shape["w"], requires_grad=True)
    conv = torch.nn.Conv2d(shape["c"], shape["f"], (shape["kh"], shape["kw"]),
                           (shape["sh"], shape["sw"]), (shape["ph"], shape["pw"]),
                           groups=shape["groups"], bias=False)

    def forward():
        with torch.no_grad():
            conv(x)

    def train():
        y = conv(x)
        y.backward(torch.ones_like(y))
    return forward, train


def elapsed_ms(fn, clock):
    start = clock()
    fn()
    return (clock() - start) * 1e3


def serve(args):
    """The worker: build every shape's passes, warm them, then answer each line with one
    round of milliseconds on `args.clock` {key: [forward, train]}."""
    if args.side == "torch":
        import torch
        torch.set_num_threads(args.threads)
    make = torch_layer if args.side == "torch" else minigluon_layer
    shapes = json.loads(sys.stdin.readline())
    passes = {key: make(shape) for key, shape in shapes.items()}
    for forward, train in passes.values():
        forward()
        train()
    print(json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        clock = CLOCKS[args.clock]
        print(json.dumps({key: [elapsed_ms(f, clock), elapsed_ms(t, clock)]
                          for key, (f, t) in passes.items()}), flush=True)


def bench_model(model, python, args):
    found = conv_shapes(model)
    shapes = json.dumps({key: shape for key, (shape, _) in found.items()})
    sides = ("minigluon", "torch") if python else ("minigluon",)
    procs = {side: start_worker(python if side == "torch" else sys.executable, __file__,
                                ["--side", side, "--clock", args.clock], args.threads,
                                first_line=shapes)
             for side in sides}
    return summarize(found, take_turns(procs, "round", args.rounds))


def summarize(found, rounds):
    prefix = {"minigluon": "mg", "torch": "torch"}
    layers = {}
    for key, (_, count) in found.items():
        row = {"count": count}
        for side, per_round in rounds.items():
            for i, mode in enumerate(("fwd", "train")):
                row[f"{prefix[side]}_{mode}_ms"] = round(
                    statistics.median(r[key][i] for r in per_round), 3)
        if "torch" in rounds:
            row["loss_train_ms"] = round(count * (row["mg_train_ms"] - row["torch_train_ms"]), 2)
        layers[key] = row
    totals = {f"total_{name}": round(sum(r["count"] * r[name] for r in layers.values()), 1)
              for name in next(iter(layers.values())) if name.endswith("_ms")
              and name != "loss_train_ms"}
    order = sorted(layers, key=lambda k: -layers[k].get("loss_train_ms", layers[k]["mg_train_ms"]))
    return {"key": "_".join(KEYS), **totals, "layers": {k: layers[k] for k in order}}


def main():
    ap = models_parser(__doc__, "mobilenet_v2_1.0,densenet121")
    ap.add_argument("--side", choices=("minigluon", "torch"), help="(worker only)")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                    help="process CPU time (all threads) or wall time")
    args = ap.parse_args()
    if args.worker:
        return serve(args)
    run_models("zoo_layers", args, CONV_MODELS, bench_model)


if __name__ == "__main__":
    main()
