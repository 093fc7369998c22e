"""`dense_rows(x, weight, bias)`: x @ weight.T + bias for a dense layer with many rows and
a wide output, its rows split over the compute threads, each part on one BLAS thread.

OpenBLAS (0.3.31, SkylakeX kernels, 2 threads) splits the language model's decoder,
(1120 x 256) @ (256 x 10000), over its output and ran it at 175 GFLOP/s; two halves of
the rows side by side, one BLAS thread each, ran at 230 (24 against 32 ms, quiet), and
each half adds the bias to its own rows while they are in the cache, where NumPy's add
over the 45 MB output ran on one thread (2.5 ms). The products of the backward (the data
and weight gradients) gained nothing split this way and stay whole.
"""
import concurrent.futures
import os
import threading

import numpy as np

from .. import threads
from ..base import MXNetError
from .one_blas_thread import one_blas_thread

__all__ = ["dense_rows", "parts_for", "MIN_ROWS", "MIN_WORK"]

# rows a part needs, and multiply-adds the whole product needs, before it is split
MIN_ROWS = 256
MIN_WORK = 1 << 28
# a part that has not finished after this long means a stuck BLAS call, not a slow one
PART_DEADLINE_S = 600.0

_lock = threading.Lock()
_pool = None        # (workers, ThreadPoolExecutor), made on first use


def _forget_pool():
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def _executor(workers):
    global _pool
    with _lock:
        if _pool is None or _pool[0] < workers:
            _pool = (workers, concurrent.futures.ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="minigluon-dense-rows"))
        return _pool[1]


def parts_for(x, weight):
    """How many row parts `dense_rows` would use for x (N, K) and weight (M, K): 1 where
    the product is small, the arrays are not host floats, or one thread is free."""
    rows, width = x.shape
    if not (isinstance(x, np.ndarray) and isinstance(weight, np.ndarray)) or \
            x.dtype not in (np.float32, np.float64) or weight.dtype != x.dtype or \
            rows * width * weight.shape[0] < MIN_WORK:
        return 1
    return max(1, min(threads.compute_threads(), rows // MIN_ROWS))


def dense_rows(x, weight, bias=None):
    """x @ weight.T (+ bias) for x (N, K), weight (M, K), bias (M,) or None: (N, M).

    >>> logits = dense_rows(h.reshape(-1, 256), decoder_weight, decoder_bias)
    """
    parts = parts_for(x, weight)
    if parts < 2:
        out = x @ weight.T
        if bias is not None:
            out += bias
        return out
    out = np.empty((x.shape[0], weight.shape[0]), x.dtype)
    cuts = [x.shape[0] * k // parts for k in range(parts + 1)]

    def part(lo, hi):
        np.matmul(x[lo:hi], weight.T, out=out[lo:hi])
        if bias is not None:
            out[lo:hi] += bias

    with one_blas_thread():
        pending = [_executor(parts - 1).submit(part, lo, hi)
                   for lo, hi in zip(cuts[1:-1], cuts[2:])]
        part(cuts[0], cuts[1])
        for future in pending:
            try:
                future.result(timeout=PART_DEADLINE_S)
            except concurrent.futures.TimeoutError:
                raise MXNetError(f"dense_rows: a part of the product {x.shape} @ "
                                 f"{weight.shape[::-1]} took over {PART_DEADLINE_S} s; help: "
                                 "check the BLAS library (threadpoolctl.threadpool_info())") \
                    from None
    return out
