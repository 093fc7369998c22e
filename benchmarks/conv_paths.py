"""CPU milliseconds of every host convolution path on chosen layer shapes, beside PyTorch:
which path each shape should take (`conv_host.host_conv`'s choice), and how far from
PyTorch the chosen one is.

Shape sets (`--sets`): `densenet` (DenseNet-121's 3x3 128 -> 32 at 56, 28, 14 and 7, batch
8), `share` (the same layer at 28x28 with 64 and 128 filters), `stride2` (resnet18_v1's 3x3
stride-2 layers, batch 16), `stems` (d2l's CIFAR ResNet-18 3x3 3 -> 64 at 32x32, batch 32;
resnet's 7x7 3 -> 64 stride 2 at 224, batch 16).
Each side runs in its own worker process on `--threads` threads (minigluon's adaptive
count off, OpenBLAS and torch pinned) and the two take turns each round. Per shape and
path: the inference forward and the training pass (forward recorded, backward for the
weight and, except on the stems, whose data needs no gradient in a model, for the data),
timed with time.process_time(). Paths: `auto` (what host_conv picks), `columns`,
`samples` (the columns one sample at a time), `winograd2`, `winograd4`, where they
apply. Medians over rounds; ONE JSON line:

    python benchmarks/conv_paths.py --torch-python /tmp/tvenv/bin/python \
        [--sets densenet,share,stride2,stems] [--rounds 3] [--threads 1]

With PYTHONPATH at an older tree (no `conv_host._PATH`) only `auto` is measured: that
tree's own choice, for before/after figures.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import end_process, read_reply, report, take_turns, torch_python  # noqa: E402

# name: (n, c, h, w, f, kernel, stride, pad)
SETS = {
    "densenet": {f"dense3x3_{s}": (8, 128, s, s, 32, 3, 1, 1) for s in (56, 28, 14, 7)},
    "stride2": {f"res18_s2_{c}": (16, c, s, s, 2 * c, 3, 2, 1)
                for c, s in ((64, 56), (128, 28), (256, 14))},
    "share": {f"share_{f}of128_28": (8, 128, 28, 28, f, 3, 1, 1) for f in (64, 128)},
    "stems": {"cifar_stem": (32, 3, 32, 32, 64, 3, 1, 1),
              "imagenet_stem": (16, 3, 224, 224, 64, 7, 2, 3)},
}
PATHS = ("auto", "columns", "samples", "winograd2", "winograd4")


def minigluon_passes(shape):
    """{path: (forward, train)} for every host path that applies to the shape."""
    import numpy as np
    from minigluon import autograd, nd
    from minigluon.ndarray import conv_host
    from minigluon.ndarray.conv_window import Window
    n, c, h, w, f, k, s, p = shape
    rng = np.random.default_rng(0)
    x = nd.array(rng.standard_normal((n, c, h, w), dtype=np.float32))
    wt = nd.array(rng.standard_normal((f, c, k, k), dtype=np.float32))
    stem = c == 3
    wt.attach_grad()
    if not stem:
        x.attach_grad()
    attrs = dict(kernel=(k, k), stride=(s, s), pad=(p, p), num_filter=f, no_bias=True)
    win = Window.sliding("bench", (k, k), (s, s), (1, 1), (p, p), (h, w))

    def make(path):
        def forward():
            _force(conv_host, path)
            nd.Convolution(x, wt, **attrs).wait_to_read()

        def train():
            _force(conv_host, path)
            with autograd.record():
                y = nd.Convolution(x, wt, **attrs)
            y.backward(nd.ones_like(y))
            wt.grad.wait_to_read()
        return forward, train

    if not hasattr(conv_host, "_PATH"):     # a tree from before the paths: its choice only
        return {"auto": make("auto")}
    passes = {}
    for path in PATHS:
        _force(conv_host, path)
        try:
            conv_host.host_conv(win, 1, c, np.float32)
        except ValueError:
            continue
        passes[path] = make(path)
    _force(conv_host, "auto")
    return passes


def _force(conv_host, path):
    """Make the host convolutions take `path` ("auto": their own choice)."""
    if hasattr(conv_host, "_PATH"):
        conv_host._PATH = None if path == "auto" else path


def torch_passes(shape):
    """{"torch": (forward, train)}: the same layer in PyTorch."""
    import torch
    n, c, h, w, f, k, s, p = shape
    torch.manual_seed(0)
    x = torch.randn(n, c, h, w, requires_grad=c != 3)
    conv = torch.nn.Conv2d(c, f, k, s, p, bias=False)

    def forward():
        with torch.no_grad():
            conv(x)

    def train():
        y = conv(x)
        y.backward(torch.ones_like(y))
    return {"torch": (forward, train)}


def cpu_ms(fn):
    start = time.process_time()
    fn()
    return (time.process_time() - start) * 1e3


def serve(args):
    """The worker: build the passes, warm them, then answer each line with one round of
    CPU milliseconds {shape: {path: [forward, train]}}."""
    if args.side == "torch":
        import torch
        torch.set_num_threads(args.threads)
    make = torch_passes if args.side == "torch" else minigluon_passes
    shapes = json.loads(sys.stdin.readline())
    passes = {name: make(shape) for name, shape in shapes.items()}
    for per_path in passes.values():
        for forward, train in per_path.values():
            forward()
            train()
    print(json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        print(json.dumps({name: {path: [cpu_ms(fw), cpu_ms(tr)]
                                 for path, (fw, tr) in per_path.items()}
                          for name, per_path in passes.items()}), flush=True)


def start(python, side, threads, shapes):
    env = {**os.environ, "OMP_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads), "MINIGLUON_ADAPTIVE_THREADS": "0"}
    proc = subprocess.Popen([python, os.path.abspath(__file__), "--worker", "--side", side,
                             "--threads", str(threads)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    proc.stdin.write(json.dumps(shapes) + "\n")
    proc.stdin.flush()
    read_reply(proc)
    return proc


def measure(shapes, python, args):
    """{side: [round {shape: {path: [fwd, train]}}]}, the sides taking turns."""
    sides = {"minigluon": sys.executable, **({"torch": python} if python else {})}
    procs = {}
    try:
        for side, exe in sides.items():
            procs[side] = start(exe, side, args.threads, shapes)
    except BaseException:
        for proc in procs.values():
            end_process(proc)
        raise
    return take_turns(procs, "round", args.rounds)


def summarize(shapes, rounds):
    """Per shape: medians per path, the fastest minigluon path, and auto / torch ratios."""
    out = {}
    for name in shapes:
        row = {}
        for side, per_round in rounds.items():
            for path in per_round[0][name]:
                row[path] = [round(statistics.median(r[name][path][i] for r in per_round), 2)
                             for i in (0, 1)]
        mg = {p: v for p, v in row.items() if p not in ("torch", "auto")}
        if mg:
            row["fastest_train"] = min(mg, key=lambda p: mg[p][1])
        if "torch" in row:
            row["auto_over_torch"] = [round(row["auto"][i] / row["torch"][i], 2) for i in (0, 1)]
        out[name] = row
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="densenet,share,stride2,stems")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--torch-python", default=None)
    ap.add_argument("--worker", action="store_true", help="(internal)")
    ap.add_argument("--side", choices=("minigluon", "torch"), help="(worker only)")
    args = ap.parse_args()
    if args.worker:
        return serve(args)
    names = [s for s in args.sets.split(",") if s]
    unknown = [s for s in names if s not in SETS]
    if unknown or args.threads < 1 or args.rounds < 1:
        sys.exit(f"conv_paths.py: --sets must name some of {sorted(SETS)} (got {unknown}), "
                 f"--threads and --rounds at least 1 (got {args.threads}, {args.rounds})")
    shapes = {k: v for s in names for k, v in SETS[s].items()}
    python, note = torch_python(args.torch_python)
    rounds = measure(shapes, python, args)
    report({"benchmark": "conv_paths", "threads": args.threads, "rounds": args.rounds,
            "unit": "CPU ms [forward, training pass]", "key": "n c h w f kernel stride pad",
            "shapes": {k: list(v) for k, v in shapes.items()},
            "layers": summarize(shapes, rounds), "note": note,
            "loadavg_1min": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
