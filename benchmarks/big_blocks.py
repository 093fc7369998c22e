"""What glibc's mmap of big blocks costs a training step: a zoo model's hybridized step
(zoo_train's, default the language model, whose logits and their gradient are 45 MB each)
with the allocator tuning as it is (minigluon/_allocator.py: mmap off, every block from
the heap and reused) and with mmap back at glibc's default (blocks above 32 MiB mapped at
each allocation and unmapped when freed). Each setting runs in a fresh process of its
own, the settings taking turns each round; figures are medians over rounds of the
per-step wall and CPU seconds, system CPU seconds and minor page faults. Prints ONE JSON
line:

    python benchmarks/big_blocks.py [--model lstm_lm] [--rounds 3] [--steps 5]
"""
import argparse
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SETTINGS = ("heap", "mmap")
M_MMAP_MAX = -4
GLIBC_MMAP_MAX = 65536      # glibc's default count of mapped blocks


def worker(model, setting, steps):
    """One process: warm the step, then time `steps` steps; print their per-step means."""
    import minigluon  # noqa: F401  (applies the tuning at import)
    if setting == "mmap":
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        if not libc.mallopt(M_MMAP_MAX, GLIBC_MMAP_MAX):
            raise SystemExit("big_blocks: mallopt(M_MMAP_MAX) refused: not glibc?")
    import zoo_train
    from zoo_models import SPECS
    train = zoo_train.minigluon_steps(model, SPECS[model], True)[0]
    for _ in range(3):
        train()
    before, wall, cpu = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), \
        time.process_time()
    for _ in range(steps):
        train()
    after = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"wall_s": (time.perf_counter() - wall) / steps,
                      "cpu_s": (time.process_time() - cpu) / steps,
                      "system_cpu_s": (after.ru_stime - before.ru_stime) / steps,
                      "page_faults": (after.ru_minflt - before.ru_minflt) / steps,
                      "peak_mb": after.ru_maxrss / 1024}))


def run(model, setting, steps):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", setting,
                          "--model", model, "--steps", str(steps)],
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"big_blocks: the {setting} worker failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="lstm_lm")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--worker", choices=SETTINGS, help="(internal)")
    args = ap.parse_args()
    if args.worker:
        return worker(args.model, args.worker, args.steps)
    load = os.getloadavg()[0]
    results = {s: [] for s in SETTINGS}
    for r in range(args.rounds):
        for setting in (SETTINGS if r % 2 == 0 else SETTINGS[::-1]):
            results[setting].append(run(args.model, setting, args.steps))
    summary = {s: {k: round(statistics.median(x[k] for x in v), 4) for k in v[0]}
               for s, v in results.items()}
    print(json.dumps({"benchmark": "big_blocks", "model": args.model, "rounds": args.rounds,
                      "steps": args.steps, "settings": summary,
                      "loadavg_1min_before": round(load, 2),
                      "loadavg_1min_after": round(os.getloadavg()[0], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
