"""One DataLoader pass with workers: indices go out round-robin, at most `prefetch` batches
ahead, and batches are yielded in sampler order, each within its `timeout`. The workers
end when the pass ends, fails, is interrupted, or its iterator is garbage-collected."""
import multiprocessing
import time
import weakref

from .batchify import as_in_context
from .worker_task import reraise

__all__ = ["MultiWorkerIter"]

_POLL_S = 0.5           # granularity of the main process's timeout checks


class MultiWorkerIter:
    """One pass over the batches of `loader`, read by `workers`, yielded in sampler order."""

    def __init__(self, loader, workers, num_workers, batch_sampler, prefetch, timeout,
                 pin_ctx):
        self._finalizer = weakref.finalize(self, workers.shutdown)
        self._loader = loader           # the loader outlives its iterators
        self._workers = workers
        self._num_workers = num_workers
        self._batch_sampler = batch_sampler
        self._timeout, self._pin_ctx = timeout, pin_ctx
        self._sent = self._rcvd = 0
        self._closed = self._exhausted = False
        try:
            self._batches = iter(batch_sampler)
            for _ in range(prefetch):
                self._push_next()
        except BaseException:
            self.close()
            raise

    def __len__(self):
        return len(self._batch_sampler)

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return self._next()
        except BaseException:       # exhausted, failed or interrupted: end the workers now
            self.close()
            raise

    def close(self):
        """End the workers now (also done when the pass ends or the iterator is collected)."""
        self._closed = True
        self._finalizer()

    def _push_next(self):
        indices = None if self._closed else next(self._batches, None)
        if indices is None:
            self._exhausted = True
            return
        self._workers.submit(self._sent % self._num_workers, self._sent, indices)
        self._sent += 1

    def _next(self):
        self._push_next()
        if self._closed or self._rcvd == self._sent:
            raise StopIteration
        payload, error = self._wait(self._rcvd)
        self._rcvd += 1
        if error is not None:
            reraise(error)
        batch = self._workers.unpack(payload)
        if self._exhausted and self._rcvd == self._sent:
            self.close()                # that was the last batch: end the workers now
        return batch if self._pin_ctx is None else as_in_context(batch, self._pin_ctx)

    def _wait(self, idx):
        received = self._workers.received
        deadline = time.monotonic() + self._timeout
        while idx not in received:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise multiprocessing.TimeoutError(
                    f"DataLoader: batch {idx} did not arrive from worker "
                    f"{idx % self._num_workers} within timeout={self._timeout} s; help: raise "
                    "`timeout` for a slow dataset or transform, or use num_workers=0 to debug")
            self._workers.receive(min(remaining, _POLL_S))
            if idx not in received:
                self._workers.check()
        return received.pop(idx)
