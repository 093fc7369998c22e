"""Training samples/s on gpu(0): minigluon against PyTorch on the same GPU, in the same run.

Models (zoo_models.py, the same architectures on both sides): LeNet on 28x28 digits at
batch 64 and d2l's CIFAR ResNet-18 on 32x32 images at batch 128. A step is forward,
softmax cross-entropy, backward and SGD with momentum; minigluon's network is hybridized.
The PyTorch half runs in its own process (--torch-python, or this Python when it imports
torch), TF32 off so that both sides compute in float32. The two sides take turns in every
round; the device is synchronized before each clock reading, and warm-up steps (kernel
compilation, memory pools) are not timed. Rates are medians over rounds, the ratio the
median of the per-round ratios minigluon/PyTorch, `won` the rounds minigluon was faster.

Prints ONE JSON line; without a GPU (and not simulated) it is {"skipped": reason}:

    python benchmarks/gpu.py --torch-python python3 [--models lenet,resnet18]
        [--steps N] [--rounds R] [--warmup W] [--round-s S] [--budget-s B]

--steps 0 (the default) sizes each round from the warm-up to about --round-s seconds.
With MINIGLUON_SIMULATED_GPUS=1 it runs on NumPy (figures meaningless; the suite checks the
plumbing with --steps 1).
"""
import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import end_process, interleaved_rounds, paired, read_reply, report, torch_python  # noqa: E402,E501

REPLY_S = 300       # the longest the torch process may take to answer (start-up or a round)
from zoo_models import SPECS, batch_arrays  # noqa: E402

# benchmark name -> (zoo_models name, batch)
MODELS = {"lenet": ("lenet", 64), "resnet18": ("cifar_resnet18", 128)}


def spec_of(name):
    zoo, batch = MODELS[name]
    return zoo, dict(SPECS[zoo], batch=batch)


# ---------------------------------------------------------------- the device

def device_or_reason():
    """(device description, None) or (None, why there is no GPU to measure)."""
    import minigluon as mx
    if mx.context.num_gpus() < 1:
        return None, ("no GPU: CuPy is missing or CUDA sees no device; set "
                      "MINIGLUON_SIMULATED_GPUS=1 to run this on NumPy (plumbing only)")
    xp = mx.gpu(0).xp
    if xp.__name__ == "numpy":
        return f"simulated gpu(0) (NumPy, MINIGLUON_SIMULATED_GPUS="\
               f"{os.environ.get('MINIGLUON_SIMULATED_GPUS')})", None
    props = xp.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    return (name.decode() if isinstance(name, bytes) else str(name)), None


def synchronize():
    import minigluon as mx
    xp = mx.gpu(0).xp
    if xp.__name__ != "numpy":
        xp.cuda.Device(0).synchronize()


# ---------------------------------------------------------------- minigluon

def minigluon_runner(name):
    """f(n): seconds that n training steps of `name` take on gpu(0), device synchronized."""
    import minigluon as mx
    from minigluon import autograd, gluon, nd
    from zoo_models import minigluon_net
    zoo, spec = spec_of(name)
    ctx = mx.gpu(0)
    mx.random.seed(0)
    net = minigluon_net(zoo, spec)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = batch_arrays(spec)
    data, label = nd.array(x, ctx=ctx), nd.array(y, ctx=ctx)

    def run(n):
        synchronize()
        start = time.perf_counter()
        for _ in range(n):
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(spec["batch"])
        synchronize()
        return time.perf_counter() - start
    return run


# ---------------------------------------------------------------- PyTorch (its own process)

def torch_worker(name):
    """The torch process: report what runs, then answer each line 'n' with the seconds n
    training steps took (CUDA synchronized before both clock readings)."""
    import torch
    from zoo_models import torch_net
    zoo, spec = spec_of(name)
    torch.backends.cuda.matmul.allow_tf32 = False      # float32 on both sides
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    torch.manual_seed(0)
    net = torch_net(zoo, spec).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = batch_arrays(spec)
    data, label = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
    net.train()
    print(json.dumps({"version": torch.__version__, "device": str(dev),
                      "name": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"}),
          flush=True)
    for line in sys.stdin:
        sync()
        start = time.perf_counter()
        for _ in range(int(line)):
            opt.zero_grad(set_to_none=True)
            loss_fn(net(data), label).backward()
            opt.step()
        sync()
        print(time.perf_counter() - start, flush=True)


class TorchSide:
    """The torch process for one model; `run(n)` returns the seconds n steps took."""

    def __init__(self, python, name):
        self.proc = subprocess.Popen([python, os.path.abspath(__file__), "--torch-worker",
                                      name], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        try:
            self.info = json.loads(self._reply())
        except Exception:
            self.close()
            raise

    def _reply(self):
        """The worker's next line, within REPLY_S seconds (else it is killed, by its PID)."""
        ready, _, _ = select.select([self.proc.stdout], [], [], REPLY_S)
        if not ready:
            self.proc.kill()
            raise RuntimeError(f"the torch worker `{' '.join(self.proc.args)}` did not answer "
                               f"within {REPLY_S} s; it was killed")
        return read_reply(self.proc)

    def run(self, n):
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return float(self._reply())

    def close(self):
        end_process(self.proc)


# ---------------------------------------------------------------- driver

def steps_per_round(runners, args):
    """--steps, or enough steps for about --round-s seconds of the slower side."""
    if args.steps:
        return args.steps
    per_step = max(run(2) / 2 for run in runners.values())
    return max(2, min(500, int(args.round_s / max(per_step, 1e-6))))


def start_torch(python, name):
    """(TorchSide, None), or (None, why PyTorch is not measured for this model)."""
    if not python:
        return None, None
    try:
        return TorchSide(python, name), None
    except Exception as err:      # no CUDA for torch, a crash: minigluon is still measured
        return None, f"{type(err).__name__}: {err}"


def bench_model(name, python, args):
    runners = {"minigluon": minigluon_runner(name)}
    torch_side, torch_error = start_torch(python, name)
    try:
        if torch_side:
            runners["torch"] = torch_side.run
        for run in runners.values():      # compilation and pools: untimed
            run(args.warmup)
        steps = steps_per_round(runners, args)
        batch = spec_of(name)[1]["batch"]
        rounds = interleaved_rounds(runners, batch, args.rounds, steps, 0, pause=0.1)
    finally:
        if torch_side:
            torch_side.close()
    out = {"batch": batch, "steps_per_round": steps,
           "minigluon_samples_s": round(statistics.median(rounds["minigluon"]), 1),
           "torch_samples_s": None, "ratio": None, "won": None}
    if torch_error:
        out["torch_error"] = torch_error
    if torch_side:
        ratio, won = paired(rounds, "minigluon", "torch")
        out.update(torch_samples_s=round(statistics.median(rounds["torch"]), 1),
                   ratio=round(ratio, 3), won=f"{won}/{args.rounds}",
                   torch_device=torch_side.info["name"])
    return out, (torch_side.info["version"] if torch_side else None)


def parse_models(text):
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        raise SystemExit(f"--models: unknown {unknown or text!r}; choose from "
                         f"{','.join(MODELS)}")
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch-python", help="a Python that imports torch (default: "
                    "$MINIGLUON_BENCH_TORCH_PYTHON, else this one if it can)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--steps", type=int, default=0, help="timed steps per round (0: auto)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--round-s", type=float, default=1.5)
    ap.add_argument("--budget-s", type=float, default=0,
                    help="start no model after the first once this many seconds have passed "
                         "(0: no limit); the models left are reported as not run")
    ap.add_argument("--torch-worker", metavar="MODEL", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args.torch_worker)
    if args.steps < 0 or args.rounds < 1 or args.warmup < 1:
        ap.error(f"--steps must be >= 0, --rounds and --warmup >= 1; got {args.steps}, "
                 f"{args.rounds}, {args.warmup}")
    names = parse_models(args.models)
    device, why = device_or_reason()
    if why:
        return report({"skipped": why})
    python, torch_reason = torch_python(args.torch_python)
    import minigluon as mx
    fields = {"bench": "gpu_train", "device": device, "minigluon": mx.__version__,
              "torch": None, "rounds": args.rounds, "models": {}}
    start = time.monotonic()
    for name in names:
        spent = time.monotonic() - start
        if args.budget_s and fields["models"] and spent > args.budget_s:   # first: always
            fields["models"][name] = {"not_run": f"--budget-s {args.budget_s:g} spent "
                                                 f"({spent:.0f} s)"}
            continue
        try:
            fields["models"][name], version = bench_model(name, python, args)
        except Exception as err:    # one model's failure keeps the others' figures
            fields["models"][name] = {"error": f"{type(err).__name__}: {err}"}
            continue
        fields["torch"] = fields["torch"] or version
    if torch_reason:
        fields["torch_skipped"] = torch_reason
    report(fields)


if __name__ == "__main__":
    main()
