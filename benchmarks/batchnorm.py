"""BatchNorm alone and BatchNorm -> relu on the zoo models' shapes, forward and backward,
training and inference: CPU milliseconds of minigluon beside PyTorch on the same threads,
and minigluon's fused operator (`_BatchNormAct`, what a hybridized graph runs) beside its
two operators one after the other.

    PYTHONPATH=TREE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MINIGLUON_ADAPTIVE_THREADS=0 \
        python benchmarks/batchnorm.py --torch-python /tmp/tvenv/bin/python \
        [--rounds 5] [--shapes mbv2_96x112,2x8x5x5,...] [--threads 1]

Phases: `train_fwd` / `train_bwd` (batch statistics, moving ones updated; the gradients
of x, gamma and beta, by autograd.grad on both sides), `infer_fwd` (moving statistics, nothing recorded); `relu_*` the same
with relu after the BatchNorm (PyTorch: in place, as torchvision's models), `fused_*`
minigluon's fused operator (absent on a tree without it: run the script from this tree
with PYTHONPATH=OLD_TREE to measure an older tree's kernels). Each round times every
phase once on each side, minigluon first in even rounds and PyTorch first in odd ones;
times are CPU seconds of each process (time.process_time), which a busy machine inflates
less than wall time. Prints ONE JSON line: per shape and phase the median milliseconds of
each side and the median of the per-round ratios torch/minigluon (above 1: minigluon
takes less CPU).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import end_process, read_reply, torch_python  # noqa: E402

SHAPES = {  # the zoo's BatchNorm inputs at zoo_train.py's batches
    "r18_64x56": (16, 64, 56, 56),        # resnet18_v1, stage 1
    "mbv2_96x112": (16, 96, 112, 112),    # mobilenet_v2_1.0, expanded block 2
    "mbv2_960x7": (16, 960, 7, 7),        # mobilenet_v2_1.0, last blocks
    "dn_512x28": (8, 512, 28, 28),        # densenet121, end of block 2's concatenation
    "dn_128x56": (8, 128, 56, 56),        # densenet121, the bottleneck BatchNorm
}


def parse_shape(text):
    """(N, C, H, W) from 'NxCxHxW', else None."""
    parts = text.split("x")
    if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        return None
    return tuple(int(p) for p in parts)


def cpu_ms(fn):
    """(CPU milliseconds of fn(), its result)."""
    start = time.process_time()
    out = fn()
    return (time.process_time() - start) * 1e3, out


class MinigluonSide:
    """The phases on minigluon's operators (imported from PYTHONPATH's tree)."""

    def __init__(self, shape):
        from minigluon import autograd, nd
        self.autograd, self.nd = autograd, nd
        rng = np.random.default_rng(0)
        c = shape[1]
        self.x = nd.array((rng.standard_normal(shape) * 2 + 1).astype(np.float32))
        self.gamma = nd.array(rng.uniform(0.5, 1.5, c).astype(np.float32))
        self.beta = nd.array(rng.uniform(-0.5, 0.5, c).astype(np.float32))
        self.moving = [nd.zeros((c,)), nd.ones((c,))]
        self.head = nd.array(rng.standard_normal(shape).astype(np.float32))
        for a in (self.x, self.gamma, self.beta):
            a.attach_grad()
        self.fused = getattr(nd._internal, "_BatchNormAct", None)

    def _bn(self):
        return self.nd.BatchNorm(self.x, self.gamma, self.beta, *self.moving, fix_gamma=False)

    def _bn_relu(self):
        return self.nd.relu(self._bn())

    def _fused(self):
        return self.fused(self.x, self.gamma, self.beta, *self.moving, fix_gamma=False,
                          act_type="relu")

    def _train(self, forward):
        def recorded():
            with self.autograd.record():
                return forward()
        fwd, y = cpu_ms(recorded)
        # autograd.grad, as torch.autograd.grad: the gradients are returned, not copied
        # into the leaves' buffers (a network's BatchNorm hands dx to the layer before)
        bwd, _ = cpu_ms(lambda: [g.wait_to_read() for g in self.autograd.grad(
            y, [self.x, self.gamma, self.beta], self.head)])
        return fwd, bwd

    def _infer(self, forward):
        return cpu_ms(lambda: forward().wait_to_read())[0]

    def round(self):
        """{phase: CPU ms} of one pass of every phase."""
        out = {}
        named = [("", self._bn), ("relu_", self._bn_relu)] + \
            ([("fused_", self._fused)] if self.fused else [])
        for prefix, forward in named:
            out[prefix + "train_fwd"], out[prefix + "train_bwd"] = self._train(forward)
            out[prefix + "infer_fwd"] = self._infer(forward)
        return out


class TorchSide:
    """The same phases on PyTorch's BatchNorm2d (and in-place relu)."""

    def __init__(self, shape, threads):
        import torch
        torch.set_num_threads(threads)
        self.torch = torch
        rng = np.random.default_rng(0)
        self.x = torch.from_numpy((rng.standard_normal(shape) * 2 + 1).astype(np.float32))
        self.x.requires_grad_(True)
        self.bn = torch.nn.BatchNorm2d(shape[1])
        with torch.no_grad():
            self.bn.weight.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, shape[1])))
            self.bn.bias.copy_(torch.from_numpy(rng.uniform(-0.5, 0.5, shape[1])))
        self.head = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))

    def _train(self, forward):
        self.bn.train()
        fwd, y = cpu_ms(forward)
        bwd, _ = cpu_ms(lambda: self.torch.autograd.grad(
            y, [self.x, self.bn.weight, self.bn.bias], self.head))
        return fwd, bwd

    def _infer(self, forward):
        self.bn.eval()
        with self.torch.no_grad():
            return cpu_ms(forward)[0]

    def round(self):
        out = {}
        relu = self.torch.nn.functional.relu
        for prefix, forward in (("", lambda: self.bn(self.x)),
                                ("relu_", lambda: relu(self.bn(self.x), inplace=True))):
            out[prefix + "train_fwd"], out[prefix + "train_bwd"] = self._train(forward)
            out[prefix + "infer_fwd"] = self._infer(forward)
        return out


def serve(threads):
    """The PyTorch worker: a shape per line in, one round's {phase: ms} per line out."""
    import torch
    print(json.dumps({"version": torch.__version__}), flush=True)
    sides = {}
    for line in sys.stdin:
        shape = tuple(json.loads(line))
        if shape not in sides:
            sides[shape] = TorchSide(shape, threads)
            sides[shape].round()     # warm up
        print(json.dumps(sides[shape].round()), flush=True)


def start_torch(python, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    proc = subprocess.Popen([python, os.path.abspath(__file__), "--torch-worker",
                             "--threads", str(threads)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    return proc, json.loads(read_reply(proc))["version"]


def torch_round(proc, shape):
    proc.stdin.write(json.dumps(list(shape)) + "\n")
    proc.stdin.flush()
    return json.loads(read_reply(proc))


def measure(shape, rounds, proc):
    """{phase: {minigluon_ms, torch_ms, torch_over_minigluon}} for one shape."""
    mg = MinigluonSide(shape)
    mg.round()       # warm up (allocations, first calls)
    got = {"mg": [], "torch": []}
    for r in range(rounds):
        order = ("mg", "torch") if r % 2 == 0 else ("torch", "mg")
        for side in order:
            if side == "mg":
                got["mg"].append(mg.round())
            elif proc is not None:
                got["torch"].append(torch_round(proc, shape))
    out = {}
    for phase in got["mg"][0]:
        entry = {"minigluon_ms": round(statistics.median(g[phase] for g in got["mg"]), 2)}
        if got["torch"] and phase in got["torch"][0]:
            entry["torch_ms"] = round(statistics.median(t[phase] for t in got["torch"]), 2)
            entry["torch_over_minigluon"] = round(statistics.median(
                t[phase] / g[phase] for t, g in zip(got["torch"], got["mg"]) if g[phase]), 3)
        out[phase] = entry
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--torch-python", default=None)
    ap.add_argument("--torch-worker", action="store_true", help="(internal)")
    args = ap.parse_args()
    if args.torch_worker:
        return serve(args.threads)
    names = [s for s in args.shapes.split(",") if s]
    shapes = {name: SHAPES.get(name) or parse_shape(name) for name in names}
    unknown = [name for name, shape in shapes.items() if shape is None]
    if unknown or args.rounds < 1 or args.threads < 1:
        sys.exit(f"batchnorm.py: shapes must be among {sorted(SHAPES)} or NxCxHxW (got "
                 f"{unknown}), --rounds and --threads at least 1 (got {args.rounds}, "
                 f"{args.threads})")
    python, note = torch_python(args.torch_python)
    proc, version = start_torch(python, args.threads) if python else (None, None)
    load_before = os.getloadavg()[0]
    try:
        shapes = {name: measure(shape, args.rounds, proc) for name, shape in shapes.items()}
    finally:
        if proc is not None:
            end_process(proc)
    import minigluon
    print(json.dumps({"benchmark": "batchnorm", "threads": args.threads, "rounds": args.rounds,
                      "tree": os.path.dirname(os.path.dirname(minigluon.__file__)),
                      "torch": version or note, "load_before": round(load_before, 2),
                      "load_after": round(os.getloadavg()[0], 2), "shapes": shapes}))


if __name__ == "__main__":
    main()
