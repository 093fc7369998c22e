"""DataLoader: batches from a Dataset, read in this process or by worker processes/threads.

With `num_workers > 0` the main process owns the workers for one pass over the data: it
sends each worker lists of indices (round-robin, at most `prefetch` batches ahead) and
yields the batches in sampler order. Worker processes are forked where possible; each
writes its batch's arrays into a `multiprocessing.shared_memory` block and sends only the
block's name and the arrays' offsets, shapes and dtypes; the main process copies the data
out and gives the block back for reuse. All blocks are unlinked when the pass ends.
Each worker answers on its own pipe, so a worker that dies reads as end-of-file at once,
and every wait has a deadline (`timeout` for one batch). The workers are ended (asked,
then SIGTERM, then SIGKILL, by PID) when the pass ends, fails, is interrupted, or its
iterator is garbage-collected.

A worker that replaces a lost one (`minigluon-launch --max-restarts`) skips, through a
SplitSampler loader, the batches its rank already trained on (resume.py).

Out of scope: persistent workers across epochs, custom worker init functions, and CUDA
in forked workers (load GPU data in the main process).
"""
import numpy as np

from ...context import cpu_pinned
from .batchify import as_in_context, default_batchify_fn, default_mp_batchify_fn
from .resume import ResumedBatches, steps_to_skip
from .sampler import BatchSampler, RandomSampler, SequentialSampler
from .thread_pool import ThreadWorkers

__all__ = ["DataLoader", "default_batchify_fn", "default_mp_batchify_fn"]


def _make_batch_sampler(length, batch_size, shuffle, sampler, last_batch, batch_sampler):
    if batch_sampler is not None:
        given = {"batch_size": batch_size, "shuffle": shuffle, "sampler": sampler,
                 "last_batch": last_batch}
        clashes = ", ".join(f"{k}={v!r}" for k, v in given.items() if v not in (None, False))
        if clashes:
            raise ValueError(f"batch_sampler already decides batch size, order and the last "
                             f"batch; do not also pass {clashes}")
        return batch_sampler
    if batch_size is None:
        raise ValueError("batch_size must be specified unless batch_sampler is specified")
    if sampler is None:
        sampler = RandomSampler(length()) if shuffle else SequentialSampler(length())
    elif shuffle:
        raise ValueError(f"shuffle=True cannot be combined with sampler={sampler!r}: the "
                         "sampler decides the order; pass shuffle=False")
    return BatchSampler(sampler, batch_size, last_batch if last_batch else "keep")


class DataLoader:
    """Loads a Dataset and returns mini-batches.

    Parameters
    ----------
    dataset : Dataset
        Anything with `__getitem__(i)` and `__len__()`.
    batch_size : int
        Samples per batch; required unless `batch_sampler` is given.
    shuffle : bool
        Read in a new random order each epoch (not with `sampler` or `batch_sampler`).
    sampler : Sampler
        The order of the samples, e.g. `SplitSampler(len(dataset), kv.num_workers,
        kv.rank)` for data-parallel training (not with `shuffle` or `batch_sampler`).
    last_batch : {'keep', 'discard', 'rollover'}, default 'keep'
        What to do with a short last batch; see `BatchSampler`.
    batch_sampler : Sampler
        Yields lists of indices, e.g. `SplitBatchSampler`; excludes `batch_size`,
        `shuffle`, `sampler` and `last_batch`.
    batchify_fn : callable
        Turns a list of samples into a batch; `default_batchify_fn` (`num_workers=0`) or
        `default_mp_batchify_fn` (workers) by default.
    num_workers : int
        Worker processes (threads with `thread_pool=True`) that read batches; 0 reads in
        this process. Workers live for one pass and are reseeded, each differently from a
        draw of `mx.random`, so random augmentations differ between workers.
    pin_memory : bool
        Return batches on `cpu_pinned(pin_device_id)` (ordinary host memory here).
    pin_device_id : int
        The device id for `pin_memory`.
    prefetch : int
        Batches requested ahead of the one being read; default `2 * num_workers`.
    thread_pool : bool
        Use threads instead of processes (no copies; good when the work releases the GIL).
    timeout : float
        Seconds to wait for one batch from a worker before raising.
    auto_reload : bool, default False
        Start the next pass (and its workers' prefetching) when the loader is made and
        again as soon as a pass ends, so an epoch's first batches are ready early.

    >>> loader = DataLoader(np.arange(10, dtype='float32'), batch_size=4)
    >>> [b.shape for b in loader]
    [(4,), (4,), (2,)]
    """

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None,
                 last_batch=None, batch_sampler=None, batchify_fn=None, num_workers=0,
                 pin_memory=False, pin_device_id=0, prefetch=None, thread_pool=False,
                 timeout=120, auto_reload=False):
        self._dataset = dataset
        self._batch_sampler = _make_batch_sampler(lambda: len(dataset), batch_size, shuffle,
                                                  sampler, last_batch, batch_sampler)
        if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)):
            raise ValueError(f"num_workers must be an integer, got {num_workers!r}")
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._num_workers = max(0, int(num_workers))
        self._prefetch = max(0, int(prefetch) if prefetch is not None
                             else 2 * self._num_workers)
        self._pin_ctx = cpu_pinned(pin_device_id) if pin_memory else None
        self._thread_pool = thread_pool
        self._timeout = timeout
        if batchify_fn is None:
            batchify_fn = default_mp_batchify_fn if self._num_workers else default_batchify_fn
        self._batchify_fn = batchify_fn
        self.auto_reload = bool(auto_reload)
        self.steps_per_epoch = None    # resume: an epoch's steps, when a script stops early
        self._skip = None              # resume: batches still to skip (read at first pass)
        self._ready = self._new_pass() if self.auto_reload else None

    def __iter__(self):
        if self._ready is None and not self.auto_reload:
            return self._new_pass()
        return self._reloading_pass()

    def refresh(self):
        """Start the next pass now (its workers begin reading); the next iter() uses it."""
        self.clean()
        self._ready = self._new_pass()

    def clean(self):
        """Drop a pass started ahead by `refresh` or `auto_reload`, ending its workers."""
        ready, self._ready = self._ready, None
        if ready is not None and hasattr(ready, "close"):
            ready.close()

    def _reloading_pass(self):
        ready, self._ready = self._ready, None
        yield from ready if ready is not None else self._new_pass()
        if self.auto_reload and self._ready is None:
            self._ready = self._new_pass()     # the next epoch starts reading now

    def _new_pass(self):
        batches = self._pass_batches()
        if self._num_workers == 0:
            return self._same_process_iter(batches)
        # here, not at the top: multiprocessing costs the import of every process, and
        # most never start a worker
        from .multi_worker_iter import MultiWorkerIter
        from .process_pool import ProcessWorkers
        pool = ThreadWorkers if self._thread_pool else ProcessWorkers
        workers = pool(self._dataset, self._batchify_fn, self._num_workers)
        return MultiWorkerIter(self, workers, self._num_workers, batches,
                               self._prefetch, self._timeout, self._pin_ctx)

    def _pass_batches(self):
        """This pass's batch sampler: the whole one, or, while a restarted worker skips
        the batches its rank trained on, what is left of the epoch (resume.py)."""
        if self._skip is None:
            self._skip = steps_to_skip(self._batch_sampler)
        if not self._skip:
            return self._batch_sampler
        epoch = self.steps_per_epoch or len(self._batch_sampler)
        skip = min(self._skip, epoch)
        self._skip -= skip
        return ResumedBatches(self._batch_sampler, skip, epoch - skip)

    def _same_process_iter(self, batches):
        for indices in batches:
            batch = self._batchify_fn([self._dataset[i] for i in indices])
            yield batch if self._pin_ctx is None else as_in_context(batch, self._pin_ctx)

    def __len__(self):
        return len(self._batch_sampler)
