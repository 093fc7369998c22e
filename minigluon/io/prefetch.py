"""`PrefetchingIter`: read the next batch of one or more iterators in a background thread.

While the network trains on one batch, a thread reads the next one into a bounded queue.
Every wait on either side is a short timed wait that re-checks the other side, so neither
hangs when the other has stopped. The thread ends at the end of the epoch, on an error
(re-raised by the consumer), on `reset()`, and when the iterator is garbage collected.
"""
import functools
import queue
import threading
import time
import weakref

from ..base import MXNetError
from .base import DataBatch, DataDesc, DataIter

__all__ = ["PrefetchingIter"]

_POLL_S = 0.05          # a blocked put or get re-checks the other side this often
_STOP_TIMEOUT_S = 60.0  # longest wait for the thread to finish the batch it is reading
_END = object()         # the epoch is over


class _Failure:
    """An exception raised in the thread, to be raised again by the consumer."""

    def __init__(self, error):
        self.error = error


class _Prefetcher:
    """A daemon thread putting `read_batch()` results into a queue of `capacity` until
    `read_batch` returns _END or raises, or until `stop()`."""

    def __init__(self, read_batch, capacity=1):
        self._queue = queue.Queue(capacity)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(read_batch,),
                                        name="PrefetchingIter", daemon=True)
        self._thread.start()

    def _run(self, read_batch):
        while not self._stop.is_set():
            try:
                item = read_batch()
            except BaseException as err:    # handed over: the consumer raises it
                item = _Failure(err)
            if not self._put(item) or item is _END or isinstance(item, _Failure):
                return

    def _put(self, item):
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                pass
        return False

    def get(self):
        """The next batch or _END; raises what the thread raised."""
        while True:
            try:
                item = self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise MXNetError("PrefetchingIter: the prefetch thread has stopped (after "
                                     "an error or the end of the epoch); call reset()") from None
                continue
            if isinstance(item, _Failure):
                raise item.error
            return item

    def stop(self, wait=True):
        """End the thread; with `wait`, until it has finished the batch it is reading."""
        self._stop.set()
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        while True:
            self._drain()
            if not wait or not self._thread.is_alive():
                return
            if time.monotonic() > deadline:
                raise MXNetError(f"PrefetchingIter: the prefetch thread did not stop within "
                                 f"{_STOP_TIMEOUT_S:.0f} s; an inner iterator's next() seems "
                                 "stuck")
            self._thread.join(_POLL_S)

    def _drain(self):
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass


def _read_combined(iters, provide_data, provide_label):
    """One batch from each iterator, joined into one DataBatch (or _END)."""
    batches = []
    for it in iters:
        try:
            batches.append(it.next())
        except StopIteration:
            batches.append(None)
    ended = [i for i, batch in enumerate(batches) if batch is None]
    if len(ended) == len(batches):
        return _END
    if ended:
        raise MXNetError(f"PrefetchingIter: iterator(s) {ended} of {len(iters)} ended their "
                         "epoch while the others still had batches; combined iterators must "
                         "yield the same number of batches")
    pads = [batch.pad for batch in batches]
    if len(set(pads)) > 1:
        raise MXNetError(f"PrefetchingIter: the combined batches have different pads {pads}; "
                         "combined iterators must pad their last batch alike")
    return DataBatch(sum((list(b.data) for b in batches), []),
                     sum((list(b.label or []) for b in batches), []),
                     pads[0], batches[0].index, provide_data=provide_data,
                     provide_label=provide_label)


class PrefetchingIter(DataIter):
    """Read batches of `iters` in a background thread, one batch ahead.

    Parameters
    ----------
    iters : DataIter or list of DataIter
        Iterators read in step; a batch joins their data and labels (in this order).
        They must yield the same number of batches with the same pads.
    rename_data, rename_label : list of dict, optional
        One dict per iterator mapping its data (label) names to new names.

    >>> it = mx.io.PrefetchingIter(mx.io.NDArrayIter(x, y, batch_size=32))
    >>> for batch in it: ...       # batch i+1 is read while batch i is used
    >>> it.reset()
    """

    def __init__(self, iters, rename_data=None, rename_label=None):
        super().__init__()
        self.iters = list(iters) if isinstance(iters, (list, tuple)) else [iters]
        if not self.iters:
            raise ValueError("PrefetchingIter needs at least one iterator")
        self.n_iter = len(self.iters)
        self.rename_data, self.rename_label = rename_data, rename_label
        self.batch_size = self.provide_data[0].shape[0]
        self.current_batch = None
        self._prefetcher, self._finalizer = None, None
        self._start()

    def _start(self):
        # the thread must hold no reference to self, or self would never be collected
        self._prefetcher = _Prefetcher(functools.partial(
            _read_combined, self.iters, self.provide_data, self.provide_label))
        self._exhausted = False
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, self._prefetcher.stop, False)

    def _renamed(self, attr, renames):
        descs = []
        for i, it in enumerate(self.iters):
            rename = renames[i] if renames else {}
            for desc in getattr(it, attr):
                desc = desc if isinstance(desc, DataDesc) else DataDesc(*desc)
                descs.append(DataDesc(rename.get(desc.name, desc.name), desc.shape,
                                      desc.dtype, desc.layout))
        return descs

    @property
    def provide_data(self):
        """The inner iterators' data descriptions, renamed."""
        return self._renamed("provide_data", self.rename_data)

    @property
    def provide_label(self):
        """The inner iterators' label descriptions, renamed."""
        return self._renamed("provide_label", self.rename_label)

    def reset(self):
        """Stop the thread, reset every inner iterator and start prefetching again."""
        self._prefetcher.stop()
        for it in self.iters:
            it.reset()
        self._start()

    def iter_next(self):
        """Take the prefetched batch; False when the epoch is over."""
        if self._exhausted:
            return False
        item = self._prefetcher.get()
        if item is _END:
            self._exhausted, self.current_batch = True, None
            return False
        self.current_batch = item
        return True

    def next(self):
        """The next DataBatch; raises StopIteration at the end of the epoch."""
        if not self.iter_next():
            raise StopIteration
        return self.current_batch

    def getdata(self):
        return self.current_batch.data

    def getlabel(self):
        return self.current_batch.label

    def getindex(self):
        return self.current_batch.index

    def getpad(self):
        return self.current_batch.pad
