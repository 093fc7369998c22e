"""Matrix products split over the compute threads, each part on one BLAS thread:
`long_product(a, b)` splits a long sum with a small result, `stacked_product(a, b)` a
stack of products (Winograd's (M+2)^2 tile positions, a batch of samples) by stack entry,
and `summed_product(a, b)` the sum of a stack of products (a 1x1 layer's weight gradient,
summed over samples) by stack entry too, and `short_sum_product(a, b)` a product whose
sum is a few terms long and whose result is big (Winograd's weight transforms) by the rows
of its result.

The weight gradient of a convolution on the columns path is rows (F, n*P) times columns^T
(n*P, C*kh*kw): the result is small (MobileNet-v2's 1x1 layers: 16x96 to 320x960), the sum
runs over every position of the batch (up to 16*112*112). OpenBLAS splits a product over
its result and, between blocks of the sum, its threads wait for each other: on two fixed
threads, beside other processes, `conv_host.HostConv._weight_part` did 92% of its CPU
work on the calling thread, and 16x the CPU it takes on one thread (the rest waiting for
the other BLAS thread; benchmarks/thread_share.py, docs/performance.md). Here each thread
sums its own stretch of the positions on one BLAS thread, and the caller adds the parts:
the threads meet once per product.

A stack of small products (Winograd's 36 products (32, 128) @ (128, T) per chunk of samples
on DenseNet-121's 3x3 layers, a 1x1 layer's one product per sample) is the same problem
many times over: NumPy calls BLAS once per entry, and on two threads OpenBLAS splits each
small product and meets its other thread every time, or spins waiting for it. The stack's
entries are independent, so each compute thread takes a stretch of them whole, on one BLAS
thread, and writes its stretch of the output: the threads meet once per stack, and each
entry's bits are its one-thread product's. On two fixed threads at load 5, DenseNet's
56x56 weight-gradient stack (36 x (32, 1568) @ (1568, 128)) took 50 ms wall split by
OpenBLAS and 14 split by entries (docs/performance.md, "DenseNet-121 on two threads").

A product with a sum of 9 to 36 terms and millions of results (Winograd's weight transform
(36, 9) @ (9, F*C) and its adjoint (F*C, 36) @ (36, 9)) is a pass over memory: OpenBLAS
split it over two threads at 16x its one-thread time, so it ran on one thread while the
other core idled (35 ms of a 0.73 s CIFAR ResNet-18 step on a quiet machine, 22 of them the
512-channel layers'; docs/performance.md). Each row of the result is its own short sum,
so the rows split over the compute threads without changing a bit.
"""
import concurrent.futures
import os
import threading

import numpy as np

from .. import threads
from ..base import MXNetError
from .one_blas_thread import one_blas_thread

__all__ = ["long_product", "stacked_product", "summed_product", "short_sum_product",
           "part_executor", "MIN_PART", "MIN_STACK_WORK", "MIN_SHORT_SUM_WORK",
           "PART_DEADLINE_S"]

# a stretch of the sum shorter than this is not worth a thread: one product does it
MIN_PART = 2048
# a stack of fewer multiply-adds than this is one call: a thread hop costs about as much
MIN_STACK_WORK = 1 << 20
# a short-sum product of fewer multiply-adds than this is one call: split, the transforms of
# 64- to 256-channel layers (1.3M-21M) took as long or longer on a quiet 2-core machine
# (0.10 -> 0.20 ms at 64 channels), those of 512 channels (38M) 1.5x less (4.6 -> 3.0 ms)
MIN_SHORT_SUM_WORK = 1 << 24
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


def part_executor(workers):
    """The thread pool that runs the parts of split work besides the calling thread: at
    least `workers` threads, made on first use and kept (a forked child makes its own)."""
    return _executor(workers)


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
            out += _result(future, "long_product", a, b)
    return out


def stacked_product(a, b, out=None, parts=None):
    """a @ b for stacks of matrices, a (S or 1, M, K) and b (S or 1, K, N) host arrays,
    the S entries split into `parts` stretches (default: the compute threads, one call
    where the stack has under MIN_STACK_WORK multiply-adds), each on one BLAS thread.
    `out` (S, M, N), if given, must be C-contiguous.

    >>> m = stacked_product(u, v)       # (36, F, C) @ (36, C, T): Winograd's products
    """
    stack = max(a.shape[0], b.shape[0])
    parts = _stack_parts(stack, a, b, parts)
    if parts < 2 or not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return a @ b if out is None else np.matmul(a, b, out=out)
    if out is None:
        out = np.empty((stack, a.shape[1], b.shape[2]), np.result_type(a, b))
    cuts = [stack * k // parts for k in range(parts + 1)]

    def part(lo, hi):
        np.matmul(_entries(a, lo, hi), _entries(b, lo, hi), out=out[lo:hi])
    _run_stretches("stacked_product", a, b, cuts, part)
    return out


def summed_product(a, b, parts=None):
    """The sum over s of a[s] @ b[s], for stacks a (S, M, K) and b (S, K, N) of host
    arrays: each of `parts` threads (default as stacked_product's) adds the products of
    its stretch of entries into its own (M, N) sum on one BLAS thread, the caller adds the
    sums. One entry's products are never stacked: (S, M, N) could be as big as a batch of
    weights.

    >>> dw = summed_product(dy, x.swapaxes(1, 2))      # sum over samples of dy[n] @ x[n]^T
    """
    stack = a.shape[0]
    parts = _stack_parts(stack, a, b, parts)
    if parts < 2 or not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return _sum_of_products(a, b, 0, stack)
    cuts = [stack * k // parts for k in range(parts + 1)]
    with one_blas_thread():
        pending = [_executor(parts - 1).submit(_sum_of_products, a, b, lo, hi)
                   for lo, hi in zip(cuts[1:-1], cuts[2:])]
        out = _sum_of_products(a, b, 0, cuts[1])
        for future in pending:
            out += _result(future, "summed_product", a, b)
    return out


def short_sum_product(a, b, parts=None):
    """a @ b for 2-D host arrays a (M, K) and b (K, N) with a short sum K, the M rows of
    the result split into `parts` stretches (default: the compute threads, one call under
    MIN_SHORT_SUM_WORK multiply-adds), each on one BLAS thread. Every row is its one-call
    product's.

    >>> u = short_sum_product(gg, w2.T)      # (36, 9) @ (9, F*C): a weight transform
    """
    rows = a.shape[0]
    if parts is None:
        parts = threads.compute_threads() if a.size * b.shape[1] >= MIN_SHORT_SUM_WORK else 1
    parts = min(parts, rows)
    if parts < 2 or not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        with one_blas_thread():
            return a @ b
    out = np.empty((rows, b.shape[1]), np.result_type(a, b))
    cuts = [rows * k // parts for k in range(parts + 1)]

    def part(lo, hi):
        np.matmul(a[lo:hi], b, out=out[lo:hi])
    _run_stretches("short_sum_product", a, b, cuts, part)
    return out


def _run_stretches(name, a, b, cuts, part):
    """part(lo, hi) for each stretch between consecutive `cuts`, each on one BLAS thread:
    the first on the calling thread, the others on the pool; returns when all are done."""
    with one_blas_thread():
        pending = [_executor(len(cuts) - 2).submit(part, lo, hi)
                   for lo, hi in zip(cuts[1:-1], cuts[2:])]
        part(0, cuts[1])
        for future in pending:
            _result(future, name, a, b)


def _sum_of_products(a, b, lo, hi):
    """a[lo] @ b[lo] + ... + a[hi - 1] @ b[hi - 1], one (M, N) scratch for the terms."""
    out = a[lo] @ b[lo]
    part = np.empty_like(out) if hi - lo > 1 else None
    for s in range(lo + 1, hi):
        out += np.matmul(a[s], b[s], out=part)
    return out


def _stack_parts(stack, a, b, parts):
    """How many stretches a stack of `stack` products (M, K) @ (K, N) runs in."""
    if parts is None:
        work = stack * a.shape[1] * a.shape[2] * b.shape[2]
        parts = threads.compute_threads() if work >= MIN_STACK_WORK else 1
    return min(parts, stack)


def _entries(a, lo, hi):
    """Entries lo..hi of a stack; a stack of one is every entry's (broadcast)."""
    return a if a.shape[0] == 1 else a[lo:hi]


def _result(future, name, a, b):
    try:
        return future.result(timeout=PART_DEADLINE_S)
    except concurrent.futures.TimeoutError:
        raise MXNetError(f"{name}: a part of the product {a.shape} @ {b.shape} took over "
                         f"{PART_DEADLINE_S} s; help: check the BLAS library "
                         "(threadpoolctl.threadpool_info())") from None
