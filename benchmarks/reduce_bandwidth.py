"""Bandwidth of minigluon_ext's sum_into and 2-bit kernels against NumPy; prints one JSON line.

Figures, all from the same run, medians of --repeats rounds whose measurements are
interleaved (so a noisy neighbour hits every figure alike):

- copy_gbps: np.copyto of a 256 MB float32 array into a preallocated one, bytes of the
  array per second: the practical memory limit.
- numpy_loop_k{4,8}_gbps: `out[:] = a0; out += a1; ...` over K arrays of N float32, in
  bytes of input read (K*N*4) per second; sum_into_k{4,8}_gbps: sum_into on the same arrays
  with the default thread count (MXNET_KVSTORE_REDUCTION_NTHREADS capped at the cores).
- quantize_1t_gbps / dequantize_1t_gbps: quantize_2bit and dequantize_2bit on one thread,
  in bytes of float32 gradient (N*4) per second.

Targets: sum_into >= 1.5x the NumPy loop and >= 0.8x copy; quantize >= 2 GB/s.
Memory: about 1.2 GB with the defaults.

    python benchmarks/reduce_bandwidth.py [--repeats 7] [--n 11200000]
"""
import argparse
import json
import statistics
import time

import numpy as np

import minigluon_ext as ext

COPY_BYTES = 256 * 2**20
THRESHOLD = 0.5


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def numpy_loop(out, arrays):
    out[:] = arrays[0]
    for a in arrays[1:]:
        out += a


def measurements(n, nthreads):
    """name -> (callable, bytes it counts); the arrays are made and touched once here."""
    rng = np.random.default_rng(0)
    src = rng.random(COPY_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)
    arrays = [rng.standard_normal(n, dtype=np.float32) for _ in range(8)]
    out = np.zeros(n, np.float32)
    residual = np.zeros(n, np.float32)
    packed = np.zeros(ext.words_for(n), np.uint32)
    decoded = np.zeros(n, np.float32)
    grad = arrays[0]
    ext.quantize_2bit(grad, residual, THRESHOLD, out=packed)  # packed now holds real codes
    return {
        "copy": (lambda: np.copyto(dst, src), src.nbytes),
        "numpy_loop_k4": (lambda: numpy_loop(out, arrays[:4]), 4 * n * 4),
        "sum_into_k4": (lambda: ext.sum_into(out, arrays[:4], nthreads=nthreads), 4 * n * 4),
        "numpy_loop_k8": (lambda: numpy_loop(out, arrays), 8 * n * 4),
        "sum_into_k8": (lambda: ext.sum_into(out, arrays, nthreads=nthreads), 8 * n * 4),
        "quantize_1t": (lambda: ext.quantize_2bit(grad, residual, THRESHOLD, out=packed,
                                                  nthreads=1), n * 4),
        "dequantize_1t": (lambda: ext.dequantize_2bit(packed, THRESHOLD, decoded, nthreads=1),
                          n * 4),
    }


def run(n, repeats, nthreads):
    cases = measurements(n, nthreads)
    times = {name: [] for name in cases}
    for fn, _ in cases.values():  # warm up: page faults, caches, lazy dispatch
        fn()
    for _ in range(repeats):
        for name, (fn, _) in cases.items():
            times[name].append(timed(fn))
    return {name: nbytes / statistics.median(times[name]) / 1e9
            for name, (_, nbytes) in cases.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--n", type=int, default=11_200_000, help="float32 values per array")
    parser.add_argument("--nthreads", type=int, default=None,
                        help="sum_into threads (default: MXNET_KVSTORE_REDUCTION_NTHREADS)")
    args = parser.parse_args()
    gbps = run(args.n, args.repeats, args.nthreads)
    report = {"benchmark": "reduce_bandwidth", "backend": ext.backend(), "n": args.n,
              "repeats": args.repeats, "sum_into_threads": ext.threads_for(args.n, args.nthreads)}
    report.update({f"{name}_gbps": round(v, 2) for name, v in gbps.items()})
    for k in (4, 8):
        report[f"sum_into_k{k}_vs_numpy_loop"] = round(gbps[f"sum_into_k{k}"] /
                                                       gbps[f"numpy_loop_k{k}"], 2)
        report[f"sum_into_k{k}_vs_copy"] = round(gbps[f"sum_into_k{k}"] / gbps["copy"], 2)
    report["targets_met"] = all(
        [report[f"sum_into_k{k}_vs_numpy_loop"] >= 1.5 for k in (4, 8)] +
        [report[f"sum_into_k{k}_vs_copy"] >= 0.8 for k in (4, 8)] +
        [gbps["quantize_1t"] >= 2.0])
    print(json.dumps(report))


if __name__ == "__main__":
    main()
