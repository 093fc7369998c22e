"""`one_blas_thread()`: run a stretch of small matrix products on one BLAS thread.

A recurrent layer multiplies its (N, H) state by the recurrent weight once per step:
for the language model 35 products of (32 x 256) x (256 x 1024) per layer and pass, too
small to gain from a second thread. Split over two OpenBLAS threads, each product wakes
the other thread and waits for it; when another process holds that core the product
waits a time slice. One forward and backward of the 2-layer LSTM (T=35, N=32, H=256)
with the compute threads fixed at 2 took 0.90 CPU s and 1.54 s wall at load 8, 0.28 and
0.23 at load 7, against 0.18-0.20 and 0.19-0.23 with its step products on one thread.

The process's BLAS count is minigluon.threads'; this holds it at 1 for the block (the
count's periodic refresh, from any thread of ours, leaves it there meanwhile) and restores
`threads.compute_threads()` when the last open block ends.
"""
import contextlib

from .. import threads


@contextlib.contextmanager
def one_blas_thread():
    """BLAS runs on one thread inside the block, on `threads.compute_threads()` after.

    >>> with one_blas_thread():
    ...     for t in range(steps):
    ...         ph = h @ wh.T
    """
    if threads.compute_threads() == 1:
        yield
        return
    threads.hold_blas_at_one()
    try:
        yield
    finally:
        threads.release_blas(threads.compute_threads())
