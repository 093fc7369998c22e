"""`long_product(a, b)`: a matrix product with a long sum and a small result, its sum split
over the compute threads.

The weight gradient of a convolution on the columns path is rows (F, n*P) times columns^T
(n*P, C*kh*kw): the result is small (MobileNet-v2's 1x1 layers: 16x96 to 320x960), the sum
runs over every position of the batch (up to 16*112*112). OpenBLAS splits a product over
its result and, between blocks of the sum, its threads wait for each other: on two fixed
threads, beside other processes, `conv_host.HostConv._weight_part` did 92% of its CPU
work on the calling thread, and 16x the CPU it takes on one thread (the rest waiting for
the other BLAS thread; benchmarks/thread_share.py, docs/performance.md). Here each thread
sums its own stretch of the positions on one BLAS thread, and the caller adds the parts:
the threads meet once per product.
"""
import concurrent.futures
import os
import threading

import numpy as np

from .. import threads
from ..base import MXNetError
from .one_blas_thread import one_blas_thread

__all__ = ["long_product", "MIN_PART"]

# a stretch of the sum shorter than this is not worth a thread: one product does it
MIN_PART = 2048
# a part that has not finished after this long means a stuck BLAS call, not a slow one
PART_DEADLINE_S = 600.0

_lock = threading.Lock()
_pool = None        # (workers, ThreadPoolExecutor), made on first use


def _forget_pool():
    # a forked child has none of the parent's threads: it starts its own pool when needed
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def _executor(workers):
    global _pool
    with _lock:
        if _pool is None or _pool[0] < workers:
            _pool = (workers, concurrent.futures.ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="minigluon-long-product"))
        return _pool[1]


def long_product(a, b, parts=None):
    """a @ b for a (..., M, L) and b (..., L, N) host arrays, the sum over L split into
    `parts` (default: the compute threads, fewer where a part would be under MIN_PART).

    >>> dw = long_product(rows, cols.swapaxes(-1, -2))     # (F, n*P) @ (n*P, K)
    """
    length = a.shape[-1]
    if parts is None:
        parts = min(threads.compute_threads(), length // MIN_PART)
    if parts < 2 or not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return a @ b
    cuts = [length * k // parts for k in range(parts + 1)]
    with one_blas_thread():
        pending = [_executor(parts - 1).submit(np.matmul, a[..., lo:hi], b[..., lo:hi, :])
                   for lo, hi in zip(cuts[1:-1], cuts[2:])]
        out = a[..., :cuts[1]] @ b[..., :cuts[1], :]
        for future in pending:
            try:
                out += future.result(timeout=PART_DEADLINE_S)
            except concurrent.futures.TimeoutError:
                raise MXNetError(f"long_product: a part of the product {a.shape} @ {b.shape} "
                                 f"took over {PART_DEADLINE_S} s; help: check the BLAS "
                                 "library (threadpoolctl.threadpool_info())") from None
    return out
