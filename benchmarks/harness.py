"""Shared plumbing for the benchmarks: thread counts, timing, and a PyTorch worker process.

PyTorch is never a minigluon dependency. A benchmark's PyTorch half runs in a subprocess
(the same script with --torch-worker) under the Python given by --torch-python or
$MINIGLUON_BENCH_TORCH_PYTHON, else this Python when it can import torch. The worker
answers timing requests on stdin, so minigluon and PyTorch rounds can alternate: on a
shared machine, alternating and taking medians keeps the ratio fair.
"""
import argparse
import ctypes
import io
import json
import os
import pstats
import signal
import statistics
import subprocess
import sys
import time


def blas_threads():
    """Threads NumPy's OpenBLAS uses: asked from the loaded library, else from the env."""
    import numpy  # noqa: F401  (loads OpenBLAS)
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        paths = set()
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        for symbol in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                       "openblas_get_num_threads"):
            if hasattr(lib, symbol):
                return int(getattr(lib, symbol)())
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return len(os.sched_getaffinity(0))


def time_steps(step, n):
    """Seconds that `n` calls of `step()` take."""
    start = time.perf_counter()
    for _ in range(n):
        step()
    return time.perf_counter() - start


def torch_python(arg):
    """(interpreter for the torch half, None) or (None, the reason there is none)."""
    python = arg or os.environ.get("MINIGLUON_BENCH_TORCH_PYTHON")
    if python:
        return python, None
    try:
        import torch  # noqa: F401
        return sys.executable, None
    except ImportError:
        return None, ("torch not measured: give --torch-python PATH or set "
                      "MINIGLUON_BENCH_TORCH_PYTHON to a Python that can import torch")


def serve_torch(step, threads):
    """The worker's loop: report torch's version, then time N steps per request line."""
    import torch
    print(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads()}),
          flush=True)
    for line in sys.stdin:
        print(time_steps(step, int(line)), flush=True)


class TorchClient:
    """The torch worker subprocess of `script`; `run(n)` returns the seconds n steps took."""

    def __init__(self, python, script, args, timeout=600):
        self.proc = subprocess.Popen([python, os.path.abspath(script), "--torch-worker", *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.timeout = timeout
        self.info = json.loads(self._read())

    def _read(self):
        return read_reply(self.proc)

    def run(self, n):
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return float(self._read())

    def close(self):
        end_process(self.proc)


def read_reply(proc):
    """The next line a benchmark worker (a Popen with text pipes) writes; an error naming
    its command when it exited instead."""
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"a benchmark worker exited; run `{' '.join(map(str, proc.args))}` "
                           "by hand to see its error")
    return line


def end_process(proc, timeout=30):
    """Close a worker's stdin (its cue to exit) and wait for it; kill it (by its Popen, so
    by PID) if it has not exited within `timeout` s."""
    proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def pass_timer(make_iter):
    """f(n): seconds to read n batches from iterators `make_iter()` makes, each pass's
    first batch (worker start-up) untimed; a pass that ends starts another."""
    def run(n):
        it, elapsed, left = make_iter(), 0.0, n
        next(it)
        while left:
            start = time.perf_counter()
            read = sum(1 for _ in zip(range(left), it))
            elapsed += time.perf_counter() - start
            left -= read
            if left:            # the pass ended: start another, its first batch untimed
                it = make_iter()
                next(it)
        if hasattr(it, "close"):
            it.close()
        del it                  # ends the pass's workers before the other side runs
        return elapsed
    return run


def interleaved_rounds(runners, samples_per_step, rounds, steps, warmup, pause=0.3):
    """Samples/s of each runner (name -> f(n) returning seconds) in each round, the runners
    taking turns within a round, so round k of every runner saw about the same machine."""
    for run in runners.values():
        run(warmup)
    rates = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            time.sleep(pause)   # let the other side's idle BLAS threads stop spinning
            rates[name].append(samples_per_step * steps / run(steps))
    return rates


def interleaved_rates(runners, samples_per_step, rounds, steps, warmup, pause=0.3):
    """Median samples/s of each runner over interleaved rounds."""
    rounds_ = interleaved_rounds(runners, samples_per_step, rounds, steps, warmup, pause)
    return {name: statistics.median(r) for name, r in rounds_.items()}


def paired(rounds_, a, b):
    """Runner a against runner b round by round: (median of the per-round ratios a/b, in
    how many rounds a was faster). A shared machine's slow spells hit both of a round."""
    ratios = [x / y for x, y in zip(rounds_[a], rounds_[b])]
    return statistics.median(ratios), sum(r > 1 for r in ratios)


def settings_in_turn(settings, rounds, use, measure):
    """Run `measure(setting)` after `use(setting)` for every setting in each of `rounds`
    rounds, the order reversed every other round (neither goes first each time), in this
    process; returns [min, max] of minigluon's compute threads at the start of the turns."""
    from minigluon import threads   # the torch workers that import harness lack minigluon
    seen = []
    for r in range(rounds):
        for setting in (settings if r % 2 == 0 else settings[::-1]):
            use(setting)
            seen.append(threads.compute_threads())
            measure(setting)
    return [min(seen), max(seen)]


def load_fields(before):
    """The JSON line's 1-minute load average before (given) and now."""
    return {"loadavg_1min_before": round(before, 2),
            "loadavg_1min_after": round(os.getloadavg()[0], 2)}


def report(fields):
    """Print the benchmark's one JSON line."""
    print(json.dumps(fields), flush=True)


# ---- per-model drivers: workers on pinned threads taking turns (small_step, zoo_layers) ---
def models_parser(doc, default_models):
    """The command line of a per-model benchmark: --models, --threads, --rounds,
    --torch-python, and --worker (the script's own worker arguments are added to it)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--models", default=default_models)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--torch-python", default=None)
    ap.add_argument("--worker", action="store_true", help="(internal)")
    return ap


def run_models(name, args, known, bench_model):
    """Check --models against `known`, --threads and --rounds, measure each model with
    bench_model(model, torch python or None, args) and print the one JSON line (with the
    1-minute load average before and after); exits with what was wrong instead."""
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in known]
    if unknown:
        sys.exit(f"{name}.py: unknown models {unknown}; choose from {list(known)}")
    if args.threads < 1 or args.rounds < 1:
        sys.exit(f"{name}.py: --threads and --rounds must be at least 1, got "
                 f"{args.threads} and {args.rounds}")
    python, note = torch_python(args.torch_python)
    load_before = os.getloadavg()[0]
    results = {m: bench_model(m, python, args) for m in models}
    report({"benchmark": name, "threads": args.threads, "rounds": args.rounds,
            "models": results, "loadavg_1min_before": round(load_before, 2),
            "loadavg_1min_after": round(os.getloadavg()[0], 2), "note": note})


def start_worker(python, script, worker_args, threads, first_line=None):
    """`script --worker *worker_args --threads threads` under `python`, on that many
    compute threads (OpenBLAS and OpenMP pinned, minigluon's adaptive count off, so both
    sides use as many), sent `first_line` if given; returned once it said it is ready."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads), "MINIGLUON_ADAPTIVE_THREADS": "0"}
    proc = subprocess.Popen([python, os.path.abspath(script), "--worker",
                             *map(str, worker_args), "--threads", str(threads)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    if first_line is not None:
        proc.stdin.write(first_line + "\n")
        proc.stdin.flush()
    read_reply(proc)
    return proc


def take_turns(procs, request, rounds):
    """{name: [each round's JSON answer]}: in every round each worker of `procs` (name ->
    Popen) in turn answers the line `request`; the workers are ended at the end."""
    answers = {name: [] for name in procs}
    try:
        for _ in range(rounds):
            for name, proc in procs.items():
                proc.stdin.write(f"{request}\n")
                proc.stdin.flush()
                answers[name].append(json.loads(read_reply(proc)))
    finally:
        for proc in procs.values():
            end_process(proc)
    return answers


def launched_pid(launcher, role, rank):
    """The PID of the Python process running as `role` `rank` under the minigluon-launch
    process `launcher` (a Popen): the leaf of its guard or mpi_role, found by its
    environment; None while there is none."""
    import psutil
    for proc in psutil.Process(launcher.pid).children(recursive=True):
        try:
            env = proc.environ()
            if env.get("DMLC_ROLE") == role and \
                    env.get("MINIGLUON_LAUNCH_RANK") == str(rank) and not proc.children():
                return proc.pid
        except psutil.Error:
            continue
    return None


class BusyProcesses:
    """`n` processes that each spin a pure-Python loop, started on entry and ended by
    their PIDs on exit: the contention of other jobs on the same cores."""

    def __init__(self, n):
        self.n, self.procs = n, []

    def __enter__(self):
        # a SIGTERM to the benchmark would skip __exit__ and leave the loops spinning; the
        # caller's own handler comes back in __exit__ (a test process outlives this block)
        self._previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()
        self.procs = []
        signal.signal(signal.SIGTERM, self._previous)


def run_workers(argv, env, count, procs, deadline_s, what="a worker"):
    """Start `count` kvstore workers (`argv` with DMLC_ROLE=worker), each printing one JSON
    line last; their parsed lines once every process in `procs` has ended, all within
    `deadline_s`. The workers join `procs` first, so the caller's cleanup ends them by PID
    when this raises."""
    workers = [subprocess.Popen(argv, env=dict(env, DMLC_ROLE="worker"),
                                stdout=subprocess.PIPE, text=True) for _ in range(count)]
    procs += workers
    end = time.monotonic() + deadline_s
    results = []
    for proc in workers:
        out, _ = proc.communicate(timeout=max(1.0, end - time.monotonic()))
        if proc.returncode != 0:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    for proc in procs:
        proc.wait(timeout=max(1.0, end - time.monotonic()))
    return results


def top(profiler, n):
    """The `n` functions of most own time, as pstats prints them."""
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(n)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    return [" ".join(line.split()) for line in lines[start:] if line.strip()]
