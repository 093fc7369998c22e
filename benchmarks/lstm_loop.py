"""Wall and CPU milliseconds of one LSTM layer's `_rnn_sequence` (the language model's:
256 hidden, 35 steps, batch 32), forward alone and forward + backward, per setting of its
recurrence: the per-step loop in Python or in C (ops_rnn_sequence.NATIVE_LOOP), the
batch rows in 1 part or one per compute thread (MINIGLUON_RNN_ROW_PARTS unset). The
settings take turns each round in one process; figures are medians over rounds of each
round's median, and each setting's per-round ratio to the first named. Prints ONE JSON
line:

    python benchmarks/lstm_loop.py [--rounds 4] [--repeats 5] [--settings a,b]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness                                          # noqa: E402
from minigluon.ndarray import ops_rnn_sequence as ors   # noqa: E402

T, N, H = 35, 32, 256
# name: (C loop, MINIGLUON_RNN_ROW_PARTS or None for unset)
SETTINGS = {"python_loop": (False, None), "c_loop": (True, None),
            "c_loop_one_part": (True, "1")}


def layer_arrays(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, N, H)).astype(np.float32)
    wx, wh = ((rng.standard_normal((4 * H, H)) * 0.05).astype(np.float32) for _ in range(2))
    zeros = [np.zeros(4 * H, np.float32)] * 2 + [np.zeros((N, H), np.float32)] * 2
    return [x, wx, wh] + zeros


def passes(arrays):
    """(forward, forward + backward) of the layer on raw arrays, as the operator runs."""
    x, wx, wh, bx, bh, h0, c0 = arrays
    dout = np.ones((T + 1, N, H), np.float32)

    def forward():
        run = ors.SequenceRun(np, ors.steps_for("lstm", np, [x, wx, wh]), x, wx, wh, bx, bh,
                              False)
        run.forward(h0, c0)
        return run
    return {"forward": forward, "forward_backward": lambda: forward().backward(dout)}


def use(setting):
    ors.NATIVE_LOOP, parts = SETTINGS[setting]
    if parts is None:
        os.environ.pop("MINIGLUON_RNN_ROW_PARTS", None)
    else:
        os.environ["MINIGLUON_RNN_ROW_PARTS"] = parts


def timed(fn, repeats):
    """Median (wall, CPU) seconds of `repeats` calls after one warm call."""
    fn()
    pairs = []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        pairs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def against_first(samples, settings):
    """Each later setting against the first, round by round: the median over rounds of the
    first's wall time / this one's (above 1: this one is faster), and the rounds it won."""
    out = {}
    for setting in settings[1:]:
        out[setting] = {}
        for what in samples[setting]:
            walls = {name: [p[0] for p in samples[name][what]]
                     for name in (settings[0], setting)}
            ratio, won = harness.paired(walls, settings[0], setting)
            out[setting][what] = {"wall_ratio": round(ratio, 3), "rounds_won": won}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--settings", default=",".join(SETTINGS),
                    help="which of the settings take turns (default: all)")
    args = ap.parse_args()
    settings = [s for s in args.settings.split(",") if s]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown or not settings:
        sys.exit(f"lstm_loop.py: --settings must name some of {list(SETTINGS)}, got "
                 f"{args.settings!r}")
    load = os.getloadavg()[0]
    runs = passes(layer_arrays())
    samples = {setting: {what: [] for what in runs} for setting in settings}

    def measure(setting):
        for what, fn in runs.items():
            samples[setting][what].append(timed(fn, args.repeats))
    seen_threads = harness.settings_in_turn(settings, args.rounds, use, measure)
    result = {setting: {what: {"wall_ms": round(statistics.median(p[0] for p in v) * 1e3, 2),
                               "cpu_ms": round(statistics.median(p[1] for p in v) * 1e3, 2)}
                        for what, v in by_pass.items()}
              for setting, by_pass in samples.items()}
    harness.report({"benchmark": "lstm_loop", "rounds": args.rounds, "settings": result,
                    "against_first": against_first(samples, settings),
                    "compute_threads_min_max": seen_threads, **harness.load_fields(load)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
