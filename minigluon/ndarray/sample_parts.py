"""Copies and sums of big host arrays split over the compute threads by their leading axis
(the samples): `concatenate(arrays, axis)` and `add(a, b)`, each part one NumPy call, which
releases the GIL while it copies or adds.

DenseNet's hybridized step joins every layer's 32 new channels to the block's map so far
(`concat`), and its backward adds the gradient a layer's BatchNorm sends back to the one
the next concatenation's split left (`graph._step_backward`); both pass over the whole
growing map, O(L^2) bytes a block, and NumPy does them on the calling thread alone: on two
threads of a quiet machine they were 0.14 s of a 2.1 s profiled step with the second core
idle (benchmarks/thread_share.py; docs/performance.md, "DenseNet-121 on two threads"). The
values are NumPy's, bit for bit: each element is copied or added once, as there.
"""
import concurrent.futures

import numpy as np

from .. import threads
from ..base import MXNetError
from .long_product import PART_DEADLINE_S, part_executor

__all__ = ["concatenate", "add", "MIN_BYTES"]

# arrays of fewer bytes are one NumPy call: a thread hop costs about as much as the copy
MIN_BYTES = 1 << 20


def concatenate(arrays, axis):
    """np.concatenate(arrays, axis) of host arrays of one dtype, split by samples where
    `axis` > 0 and the result is big.

    >>> x = concatenate([features, new], 1)      # (N, C, H, W) and (N, 32, H, W)
    """
    shape = list(arrays[0].shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    parts = _parts(shape[0], np.prod(shape) * arrays[0].itemsize) if axis > 0 else 1
    if parts < 2:
        return np.concatenate(arrays, axis=axis)
    out = np.empty(shape, arrays[0].dtype)
    _run(lambda lo, hi: np.concatenate([a[lo:hi] for a in arrays], axis=axis, out=out[lo:hi]),
         shape[0], parts)
    return out


def add(a, b):
    """a + b; split by samples for two big host arrays of one shape and dtype."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.ndim and
            a.shape == b.shape and a.dtype == b.dtype):
        return a + b
    parts = _parts(a.shape[0], a.nbytes)
    if parts < 2:
        return a + b
    out = np.empty(a.shape, a.dtype)
    _run(lambda lo, hi: np.add(a[lo:hi], b[lo:hi], out=out[lo:hi]), a.shape[0], parts)
    return out


def _parts(samples, nbytes):
    return 1 if nbytes < MIN_BYTES else min(threads.compute_threads(), samples)


def _run(part, samples, parts):
    """part(lo, hi) for `parts` stretches of the samples, the first on the calling thread."""
    cuts = [samples * k // parts for k in range(parts + 1)]
    pending = [part_executor(parts - 1).submit(part, lo, hi)
               for lo, hi in zip(cuts[1:-1], cuts[2:])]
    part(0, cuts[1])
    for future in pending:
        try:
            future.result(timeout=PART_DEADLINE_S)
        except concurrent.futures.TimeoutError:
            raise MXNetError(f"sample_parts: a part of {samples} samples took over "
                             f"{PART_DEADLINE_S} s; help: check for a stopped or starved "
                             "process (the machine's load)") from None
