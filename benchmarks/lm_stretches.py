"""Where the language model's training step runs on one core: wall and CPU seconds of each
stretch of the step (zoo_train's lstm_lm: embedding 10000 x 256, 2-layer LSTM 256 over 35
steps, batch 32, decoder to 10000, SoftmaxCrossEntropyLoss, SGD with momentum), per
setting of the recurrence's row parts, the settings taking turns each round in one
process (MINIGLUON_RNN_ROW_PARTS is read on every call):

    python benchmarks/lm_stretches.py [--rounds 5] [--steps 2] [--settings 1,auto]

`cores` is CPU / wall: 2.0 means both cores busy through the stretch. On a loaded machine
wall time is mostly waiting for a core; `calling_thread_cpu_s` (the CPU of the thread that
runs the step, not of BLAS's or the row parts' helpers) then bounds from below what the
stretch would take with its cores free: the part of the work that stays on one thread. The step is taken
apart (not hybridized): forward to the LSTM's output, the head (decoder and loss) on a
detached copy of it, the head's backward, the LSTM's backward from the copy's gradient,
the update; `whole_step` is the hybridized step as zoo_train times it. Each stretch also
reports the process's minor page faults and system CPU seconds in it. `products` times
the recurrence's per-step product (see its docstring). Prints ONE JSON line.
"""
import argparse
import os
import resource
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness                                              # noqa: E402
import minigluon as mx                                      # noqa: E402
from minigluon import autograd, gluon, nd                   # noqa: E402
from minigluon.ndarray.one_blas_thread import one_blas_thread  # noqa: E402
from zoo_models import SPECS, batch_arrays, minigluon_net   # noqa: E402

SPEC = SPECS["lstm_lm"]


class Clock:
    """Wall and CPU seconds of named stretches (and the process's page faults and system
    CPU seconds in them), appended per stretch."""

    def __init__(self):
        self.samples = {}

    def stretch(self, name, fn):
        wall, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        out = fn()
        after = resource.getrusage(resource.RUSAGE_SELF)
        self.samples.setdefault(name, []).append(
            (time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - own,
             after.ru_minflt - usage.ru_minflt, after.ru_stime - usage.ru_stime))
        return out


def build(hybridize):
    mx.random.seed(0)
    net = minigluon_net("lstm_lm", SPEC)
    net.initialize(mx.init.Xavier())
    if hybridize:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4})
    return net, trainer


def step_apart(net, trainer, loss_fn, data, label, clock):
    with autograd.record():
        emb = clock.stretch("embedding_forward", lambda: net.embedding(data))
        y = clock.stretch("lstm_forward", lambda: net.lstm(emb))
    head_in = y.detach()
    head_in.attach_grad()
    with autograd.record():
        logits = clock.stretch("decoder_forward", lambda: net.decoder(head_in))
        loss = clock.stretch("loss_forward", lambda: loss_fn(logits, label))
    clock.stretch("head_backward", loss.backward)
    clock.stretch("lstm_backward", lambda: y.backward(head_in.grad))
    clock.stretch("update", lambda: trainer.step(SPEC["batch"]))


def whole_step(net, trainer, loss_fn, data, label, clock):
    def step():
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(SPEC["batch"])
        loss.wait_to_read()
    clock.stretch("whole_step", step)


def use_setting(setting):
    if setting == "auto":
        os.environ.pop("MINIGLUON_RNN_ROW_PARTS", None)
    else:
        os.environ["MINIGLUON_RNN_ROW_PARTS"] = setting


def products(reps=20):
    """The recurrence's per-step products on one BLAS thread: CPU microseconds of one
    forward product (rows x 256) x (256 x 1024) as h @ wh.T (before) and (wh @ h.T).T
    (now), for the whole batch and for half of it; then the wall milliseconds of the two
    layers' 70 forward products of one pass, run all on one thread, in two row parts on
    two threads (now), and as the two layers side by side on two threads with the whole
    batch (an ideal wavefront, without its per-step meetings). Medians over `reps`."""
    rng = np.random.default_rng(0)
    wh = rng.standard_normal((1024, 256)).astype(np.float32)
    batch, count = SPEC["batch"], 2 * SPEC["tokens"]
    layouts = {"h_at_whT": lambda h: h @ wh.T,
               "whh_T": lambda h: np.ascontiguousarray((wh @ h.T).T)}

    def loop(rows, n):
        h = rng.standard_normal((rows, 256)).astype(np.float32)
        return lambda: [layouts["whh_T"](h) for _ in range(n)]
    cases = {"one_thread_32_rows": [loop(batch, count)],
             "row_parts_2x16_rows": [loop(batch // 2, count), loop(batch // 2, count)],
             "wavefront_2x32_rows": [loop(batch, count // 2), loop(batch, count // 2)]}
    out = {}
    with one_blas_thread():
        for name, product in layouts.items():
            for rows in (batch, batch // 2):
                h = rng.standard_normal((rows, 256)).astype(np.float32)
                cpu = []
                for _ in range(reps):
                    t = time.thread_time()
                    for _ in range(count):
                        product(h)
                    cpu.append((time.thread_time() - t) / count)
                out[f"{name}_{rows}_rows_cpu_us"] = round(statistics.median(cpu) * 1e6, 1)
        walls = {name: [] for name in cases}
        for _ in range(reps):
            for name, fns in cases.items():
                t = time.perf_counter()
                helpers = [threading.Thread(target=f) for f in fns[1:]]
                for h in helpers:
                    h.start()
                fns[0]()
                for h in helpers:
                    h.join(60)
                walls[name].append(time.perf_counter() - t)
    out.update({name + "_wall_ms": round(statistics.median(v) * 1e3, 2)
                for name, v in walls.items()})
    return out


def summary(clock):
    result = {}
    for name, pairs in clock.samples.items():
        wall = statistics.median(p[0] for p in pairs)
        cpu = statistics.median(p[1] for p in pairs)
        own = statistics.median(p[2] for p in pairs)
        result[name] = {"wall_s": round(wall, 4), "cpu_s": round(cpu, 4),
                        "calling_thread_cpu_s": round(own, 4),
                        "cores": round(cpu / wall, 2) if wall else None,
                        "page_faults": statistics.median(p[3] for p in pairs),
                        "system_cpu_s": round(statistics.median(p[4] for p in pairs), 4)}
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=2, help="steps per setting and round")
    ap.add_argument("--settings", default="1,auto",
                    help="MINIGLUON_RNN_ROW_PARTS values to compare ('auto': unset)")
    args = ap.parse_args()
    settings = args.settings.split(",")
    load = os.getloadavg()[0]
    x, y = batch_arrays(SPEC)
    data, label = nd.array(x), nd.array(y)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    apart, hybrid = build(False), build(True)
    clocks = {s: Clock() for s in settings}
    for s in settings:                     # warm: first calls trace and allocate
        use_setting(s)
        step_apart(*apart, loss_fn, data, label, Clock())
        whole_step(*hybrid, loss_fn, data, label, Clock())

    def measure(setting):
        for _ in range(args.steps):
            step_apart(*apart, loss_fn, data, label, clocks[setting])
            whole_step(*hybrid, loss_fn, data, label, clocks[setting])
    threads_seen = harness.settings_in_turn(settings, args.rounds, use_setting, measure)
    harness.report({"benchmark": "lm_stretches", "rounds": args.rounds, "steps": args.steps,
                    "settings": {s: summary(c) for s, c in clocks.items()},
                    "products": products(), "compute_threads_min_max": threads_seen,
                    **harness.load_fields(load)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
