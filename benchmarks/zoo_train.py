"""Training and inference samples/s across the model zoo, minigluon (hybridized and not)
beside the same architectures in PyTorch on the same threads; optionally with busy
processes on the same cores.

Models (batch): resnet18_v1, resnet50_v1, mobilenet_v2_1.0 at 224x224 (16), vgg11 and
densenet121 at 224x224 (8), lenet at 28x28 (64), cifar_resnet18 at 32x32 (32) and lstm_lm,
a 2-layer 256-hidden LSTM language model over 35 steps (32). A training step is forward,
loss, backward and an SGD step with momentum; inference a forward without recording.

Each side of each model runs in its own worker process (so its peak RSS is its own), and
the workers take turns in every round; rates are medians over rounds, ratios the medians
of the per-round ratios, with the rounds minigluon won. GFLOP/s counts the convolutions,
dense layers and LSTMs (3x the forward for a training step) against a same-run float32
matmul of 1024^3, the practical limit of these cores. With --contention N, after the quiet
rounds the same rounds run again beside N busy Python loops. Prints ONE JSON line:

    python benchmarks/zoo_train.py --torch-python /tmp/tvenv/bin/python \
        [--models lenet,resnet18_v1] [--rounds 2] [--contention 3] [--step-log PATH]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (BusyProcesses, blas_threads, end_process, read_reply, interleaved_rounds, paired,  # noqa: E402
                     report, torch_python)
from zoo_models import SPECS, batch_arrays  # noqa: E402

DEFAULT_MODELS = ",".join(SPECS)


# ---------------------------------------------------------------- worker side

def minigluon_steps(name, spec, hybridize):
    """(train step, inference step, forward FLOPs per sample, version) for minigluon."""
    import minigluon as mx
    from minigluon import autograd, gluon, nd
    from zoo_models import count_forward_flops, minigluon_net
    mx.random.seed(0)
    net = minigluon_net(name, spec)
    net.initialize(mx.init.Xavier())
    x, y = batch_arrays(spec)
    data, label = nd.array(x), nd.array(y)
    flops = count_forward_flops(net, data)
    if hybridize:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def train():
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(spec["batch"])
        loss.wait_to_read()

    def infer():
        net(data).wait_to_read()
    return train, infer, flops, mx.__version__


def torch_steps(name, spec, threads):
    """(train step, inference step, None, version) for PyTorch on `threads` threads."""
    import torch
    from zoo_models import torch_net
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = torch_net(name, spec)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = batch_arrays(spec)
    data, label = torch.from_numpy(x), torch.from_numpy(y)

    def train():
        net.train()
        opt.zero_grad()
        out = net(data)
        loss_fn(out.reshape(-1, out.shape[-1]), label.reshape(-1)).backward()
        opt.step()

    def infer():
        net.eval()
        with torch.no_grad():
            net(data)
    return train, infer, None, torch.__version__


def peak_mb():
    """This process's peak resident memory in MiB (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def serve(args):
    """The worker's loop: report what runs, then answer 'train N' / 'infer N' lines with the
    wall and CPU seconds (all of this process's threads) that N steps took."""
    spec = SPECS[args.model]
    if args.worker == "torch":
        steps = torch_steps(args.model, spec, args.threads)
    else:
        steps = minigluon_steps(args.model, spec, not args.plain)
    modes = {"train": steps[0], "infer": steps[1]}
    if args.step_log:
        side = "torch" if args.worker == "torch" else "plain" if args.plain else "hybrid"
        log = StepLog(args.step_log, args.model, side)
        modes = {mode: log.wrap(mode, step) for mode, step in modes.items()}
    print(json.dumps({"version": steps[3], "flops": steps[2]}), flush=True)
    for line in sys.stdin:
        mode, n = line.split()
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(int(n)):
            modes[mode]()
        print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                          "peak_mb": peak_mb()}), flush=True)


class StepLog:
    """--step-log: one JSON line per step appended to a file, to tell a slow run's cause:
    wall and CPU seconds, page faults, context switches, the machine's runnable tasks at
    the end and, for minigluon, the thread counts its looks at the cores decided meanwhile."""

    def __init__(self, path, model, side):
        self.path, self.model, self.side = path, model, side
        self.decided = None
        if side != "torch":
            from minigluon import threads
            # (a tree from before the counts were kept logs the rest)
            self.decided = getattr(threads, "decided_counts", None)

    def wrap(self, mode, step):
        def logged():
            before, counts = self._now(), self.decided() if self.decided else {}
            step()
            after = self._now()
            line = {k: round(after[k] - before[k], 4) for k in before}
            if self.decided:
                line["counts"] = {n: looks - counts.get(n, 0)
                                  for n, looks in self.decided().items() if looks > counts.get(n, 0)}
            with open(self.path, "a") as out:
                out.write(json.dumps({"t": round(time.time(), 2), "model": self.model,
                                      "side": self.side, "mode": mode, **line,
                                      "runnable": _runnable()}) + "\n")
        return logged

    @staticmethod
    def _now():
        use = resource.getrusage(resource.RUSAGE_SELF)
        return {"wall": time.perf_counter(), "cpu": time.process_time(), "minflt": use.ru_minflt,
                "majflt": use.ru_majflt, "nvcsw": use.ru_nvcsw, "nivcsw": use.ru_nivcsw}


def _runnable():
    with open("/proc/loadavg") as f:
        return f.read().split()[3]


# ---------------------------------------------------------------- driver side

class Worker:
    """One side of one model in its own process; `run(mode, n)` returns wall seconds and
    keeps the CPU seconds per step of each call in `cpu[mode]`."""

    def __init__(self, python, model, side, threads, plain=False, env=None, step_log=None):
        cmd = [python, os.path.abspath(__file__), "--worker", side, "--model", model,
               "--threads", str(threads)] + (["--plain"] if plain else []) + \
              (["--step-log", step_log] if step_log else [])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True,
                                     env=None if env is None else {**os.environ, **env})
        self.info = json.loads(self._read())
        self.cpu = {"train": [], "infer": []}
        self.peak_mb = None

    def _read(self):
        return read_reply(self.proc)

    def run(self, mode, n):
        self.proc.stdin.write(f"{mode} {n}\n")
        self.proc.stdin.flush()
        answer = json.loads(self._read())
        self.cpu[mode].append(answer["cpu"] / n)
        self.peak_mb = answer["peak_mb"]
        return answer["wall"]

    def close(self):
        end_process(self.proc)


def sgemm_gflops(reps=5):
    """GFLOP/s of NumPy's float32 1024^3 matmul, the best of `reps`."""
    import numpy as np
    a = np.random.default_rng(0).random((1024, 1024), dtype=np.float32)
    a @ a
    best = min(_timed(lambda: a @ a) for _ in range(reps))
    return 2 * 1024 ** 3 / best / 1e9


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(workers, spec, args):
    """Interleaved rounds of every worker in both modes: {f'{side}_{mode}': [rates]}."""
    runners = {f"{side}_{mode}": (lambda n, w=w, m=mode: w.run(m, n))
               for mode in ("train", "infer") for side, w in workers.items()}
    return interleaved_rounds(runners, spec["batch"], args.rounds, spec["steps"], 1)


def summarize(rounds, workers, flops, suffix=""):
    """The model's figures from one set of rounds; keys end in `suffix`."""
    out = {}
    for key, rates in rounds.items():
        side, mode = key.rsplit("_", 1)
        name = {"hybrid": "minigluon", "plain": "minigluon_plain"}.get(side, side)
        out[f"{name}_{mode}{suffix}"] = round(statistics.median(rates), 2)
        out[f"cpu_s_per_{mode}_step_{name}{suffix}"] = round(
            statistics.median(workers[side].cpu[mode][-len(rates):]), 4)
        if flops:
            factor = 3 if mode == "train" else 1
            out[f"gflops_{mode}_{name}{suffix}"] = round(
                factor * flops * statistics.median(rates) / 1e9, 1)
    if "torch" in workers:
        for mode in ("train", "infer"):
            for side, tag in (("hybrid", ""), ("plain", "_plain")):
                ratio, won = paired(rounds, f"{side}_{mode}", f"torch_{mode}")
                out[f"ratio_{mode}{tag}{suffix}"] = round(ratio, 3)
                out[f"won_{mode}{tag}{suffix}"] = f"{won}/{len(rounds[f'{side}_{mode}'])}"
    return out


def bench_model(name, python, threads, args):
    spec = SPECS[name]
    log = args.step_log and os.path.abspath(args.step_log)
    workers = {"hybrid": Worker(sys.executable, name, "minigluon", threads, step_log=log),
               "plain": Worker(sys.executable, name, "minigluon", threads, plain=True,
                               step_log=log)}
    try:
        if python:
            workers["torch"] = Worker(python, name, "torch", threads, step_log=log)
        flops = workers["hybrid"].info["flops"]
        fields = {"batch": spec["batch"], "gflop_forward_per_sample": round(flops / 1e9, 3)}
        fields.update(summarize(measure(workers, spec, args), workers, flops))
        if args.contention:
            with BusyProcesses(args.contention):
                if log:
                    with open(log, "a") as out:
                        out.write(json.dumps({"t": round(time.time(), 2), "model": name,
                                              "phase": "contention"}) + "\n")
                fields.update(summarize(measure(workers, spec, args), workers, flops,
                                        "_contention"))
        fields["peak_mb_minigluon"] = round(workers["hybrid"].peak_mb)
        fields["peak_mb_minigluon_plain"] = round(workers["plain"].peak_mb)
        fields["peak_mb_torch"] = round(workers["torch"].peak_mb) if python else None
        fields["torch_version"] = workers["torch"].info["version"] if python else None
        return fields
    finally:
        for worker in workers.values():
            worker.close()


def parse_models(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        raise SystemExit(f"--models: unknown {unknown}; choose from {','.join(SPECS)}")
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--contention", type=int, default=0,
                    help="busy Python loops beside both sides, after the quiet rounds")
    ap.add_argument("--torch-python", default=None)
    ap.add_argument("--step-log", default=None, metavar="PATH",
                    help="append a JSON line per step of every worker to PATH (diagnosis)")
    ap.add_argument("--worker", choices=("minigluon", "torch"), help="(internal)")
    ap.add_argument("--model", help="(worker only)")
    ap.add_argument("--plain", action="store_true", help="(worker only) not hybridized")
    ap.add_argument("--threads", type=int, default=None, help="(worker only)")
    args = ap.parse_args()
    if args.worker:
        return serve(args)
    models = parse_models(args.models)
    threads = blas_threads()
    python, note = torch_python(args.torch_python)
    load_before = os.getloadavg()[0]
    gemm = sgemm_gflops()
    start = time.perf_counter()
    results = {}
    for name in models:
        results[name] = bench_model(name, python, threads, args)
        # a long run's figures so far, in case it is cut short
        print(json.dumps({name: results[name]}), file=sys.stderr, flush=True)
    report({"benchmark": "zoo_train", "threads": threads, "rounds": args.rounds,
            "contention": args.contention, "sgemm_1024_gflops": round(gemm, 1),
            "models": results, "seconds": round(time.perf_counter() - start, 1),
            "loadavg_1min_before": round(load_before, 2),
            "loadavg_1min_after": round(os.getloadavg()[0], 2), "note": note})


if __name__ == "__main__":
    main()
