"""A recurrence's batch rows in parts, each part on its own thread for the whole sequence.

The rows of a recurrent layer's batch never mix: row r's state at step t depends only on
row r's inputs and state. So the batch can be cut into parts and each part run through
all T steps on a thread of its own (its own per-step product on one BLAS thread, its own
cell updates), with no meeting of the threads between steps; forward and backward alike.
The weight gradients are then still one product each over all steps and all rows, after
the parts have written their rows of the gate gradients (ops_rnn_sequence.py).

Before, the per-step products ran on one BLAS thread for the whole batch (one_blas_thread:
split per product, each (32 x 256) x (256 x 1024) product waited for the second thread
every step), so the language model's recurrence kept one core busy and the other idle.

MINIGLUON_RNN_ROW_PARTS (config.rnn_row_parts) fixes the number of parts; 1 turns the
split off. Unset, there is one part per compute thread (threads.compute_threads(): the
cores other processes leave free), where each part's per-step product is big enough to
pay for a thread.
"""
import threading
import time

import numpy as np

from .. import config, threads
from ..base import MXNetError

# per-step multiply-adds each part must have (rows x H x gates*H) before the rows are split
# on their own: in the Python loop a part's step also runs ~20 us of Python holding the
# GIL, which its product (2M multiply-adds: ~80 us on one core) must outweigh for two parts
# to overlap (an LSTM's C loop holds no GIL between steps; the bound was kept for it)
MIN_PART_WORK = 1 << 21
# how long a helper part may take beyond the calling thread's own part before the wait
# gives up: the parts are of one size, so a part this late is stuck, not slow
LATE_FACTOR, LATE_SLACK_S = 100.0, 60.0


def row_parts(xp, rows, width, gates):
    """[(lo, hi), ...]: the row ranges to run apart, in order, covering range(rows).

    `width` is the hidden size H, `gates` the gates per unit (4 for an LSTM). Host (NumPy)
    arrays only: a device runs its own kernels in order.
    """
    wanted = config.rnn_row_parts()
    if xp is not np or wanted == 1 or rows < 2:
        return [(0, rows)]
    if wanted is None:
        per_row = width * gates * width
        wanted = min(threads.compute_threads(), rows * per_row // MIN_PART_WORK)
    parts = max(1, min(wanted, rows))
    bounds = [rows * k // parts for k in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def run_parts(fn, parts):
    """[fn(k, lo, hi) for each part k]: part 0 on this thread, the others on threads of
    their own, started here and joined before returning. A part's exception is raised
    here once every part has ended."""
    if len(parts) == 1:
        return [fn(0, *parts[0])]
    results, errors = [None] * len(parts), [None] * len(parts)

    def work(k):
        try:
            results[k] = fn(k, *parts[k])
        except BaseException as e:     # raised again on the calling thread
            errors[k] = e

    helpers = [threading.Thread(target=work, args=(k,), name=f"minigluon-rnn-rows-{k}",
                                daemon=True) for k in range(1, len(parts))]
    for t in helpers:
        t.start()
    began = time.monotonic()
    work(0)
    _join(helpers, LATE_SLACK_S + LATE_FACTOR * (time.monotonic() - began))
    for e in errors:
        if e is not None:
            raise e
    return results


def _join(helpers, limit_s):
    """Wait for the helper threads, at most `limit_s` seconds in all."""
    deadline = time.monotonic() + limit_s
    for t in helpers:
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            raise MXNetError(
                f"{t.name}: a part of a recurrent layer's rows did not finish within "
                f"{limit_s:.1f} s of the calling thread's own part; the machine may be "
                "starved of cores. Set MINIGLUON_RNN_ROW_PARTS=1 to run every row on the "
                "calling thread")
