"""Time one optimizer step (SGD with momentum, Adam) on dense parameters, and the lazy
row_sparse step beside the dense step of a large embedding-like weight.

    python benchmarks/optimizer_step.py [--repeats 100]

Prints ONE JSON line of microseconds per `optimizer.update` call: the best of `repeats`
timings of a batch of calls each (the best, as on a shared machine anything slower is
other load). `compare_trees.py` runs it on two checkouts to see whether a change cost the
dense hot path anything."""
import argparse
import json
import time

import numpy as np

import minigluon as mx

DENSE = {"small (64,)": (64,), "large (256, 256)": (256, 256)}
RULES = {"sgd_mom": lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=1e-4),
         "adam": lambda: mx.optimizer.Adam(wd=1e-4)}


def best_of(update, calls, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            update()
        best = min(best, (time.perf_counter() - start) / calls)
    return round(best * 1e6, 2)


def time_step(make, weight, grad, calls, repeats):
    opt = make()
    state = opt.create_state(0, weight)
    return best_of(lambda: opt.update(0, weight, grad, state), calls, repeats)


def dense_cases(repeats):
    out = {}
    for rule, make in RULES.items():
        for name, shape in DENSE.items():
            w = mx.nd.array(np.random.rand(*shape).astype(np.float32))
            calls = 100 if np.prod(shape) < 10_000 else 10
            out[f"{rule} {name}"] = time_step(make, w, w.copy(), calls, repeats)
    return out


def sparse_cases(repeats):
    """A (20000, 64) weight whose gradient stores 100 rows: lazy step vs dense step."""
    rows, width, touched = 20000, 64, 100
    values = np.random.rand(rows, width).astype(np.float32)
    ids = np.sort(np.random.choice(rows, touched, replace=False))
    grad = mx.nd.sparse.row_sparse_array((values[ids], ids), shape=(rows, width))
    out = {}
    for rule, make in RULES.items():
        out[f"{rule} lazy row_sparse grad (20000, 64), 100 rows"] = time_step(
            make, mx.nd.array(values), grad, 5, max(1, repeats // 10))
        out[f"{rule} dense grad (20000, 64)"] = time_step(
            make, mx.nd.array(values), grad.tostype("default"), 5, max(1, repeats // 10))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    result = {"dense_us": dense_cases(args.repeats)}
    # only trees with sparse optimizer updates have nd.sparse.adagrad_update
    if hasattr(getattr(mx.nd, "sparse", None), "adagrad_update"):
        result["sparse_us"] = sparse_cases(args.repeats)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
