"""What MNISTIter and ImageRecordIter share: the face of MXNet's C++ iterators (`MXDataIter`).

Such an iterator has one data and one label source; `getdata()` and `getlabel()` return a
single NDArray (not a list), `getindex()` the sample indices, and `provide_data` /
`provide_label` are fixed at construction. It also gives each of `num_parts` workers its
own part of the data.
"""
import numpy as np

from .base import DataBatch, DataDesc, DataIter, check_count, to_ndarray

# Arguments of MXNet's C++ iterators that only tune MXNet's own prefetcher or memory: they
# are accepted, so MXNet scripts run unchanged, and ignored.
PLUMBING_ARGS = {"prefetch_buffer", "ctx", "device_id", "dtype", "verbose"}


def split_part(count, num_parts, part_index, where):
    """(start, stop) of part `part_index` of `num_parts` equal, disjoint, contiguous parts of
    `range(count)`; the last `count % num_parts` samples belong to no part, so every worker
    runs the same number of batches."""
    num_parts = check_count(num_parts, "num_parts", 1, where)
    part_index = check_count(part_index, "part_index", 0, where)
    if part_index >= num_parts:
        raise ValueError(f"{where}: part_index must be in [0, num_parts={num_parts}), got "
                         f"{part_index}; pass kv.rank and kv.num_workers")
    size = count // num_parts
    if size == 0:
        raise ValueError(f"{where}: {count} samples cannot be split into {num_parts} "
                         "non-empty parts; use fewer parts (workers)")
    return part_index * size, (part_index + 1) * size


def check_kwargs(where, kwargs, accepted, unsupported):
    """Reject arguments minigluon does not know, and those MXNet knows but minigluon does not
    implement (`unsupported`: name -> MXNet default) unless they keep their default."""
    for name, value in kwargs.items():
        if name in accepted:
            continue
        if name in unsupported:
            if _is_default(value, unsupported[name]):
                continue
            raise NotImplementedError(f"{where}: {name}={value!r} is not implemented in "
                                      f"minigluon; help: leave {name} at its default "
                                      f"{unsupported[name]!r}, or read the data with "
                                      "gluon.data and its transforms")
        raise TypeError(f"{where} got an unexpected argument {name!r}")
    dtype = kwargs.get("dtype")
    if dtype is not None and np.dtype(dtype) != np.float32:
        raise NotImplementedError(f"{where}: dtype={dtype!r} is not implemented; batches are "
                                  "float32 (help: cast with batch.data[0].astype(...))")


def _is_default(value, default):
    try:
        return bool(value == default)
    except (TypeError, ValueError):     # e.g. an array: not the (scalar) default
        return False


class SingleSourceIter(DataIter):
    """Base of iterators with one data and one label source (MXNet's `MXDataIter` face).

    Subclasses call `super().__init__(...)` with the batch shapes and implement
    `_next_batch()`, returning (data, label, pad, index) NumPy arrays or None at the end of
    the epoch, and `reset()`.
    """

    def __init__(self, batch_size, data_shape, label_shape, data_name="data",
                 label_name="softmax_label"):
        super().__init__(batch_size)
        self.provide_data = [DataDesc(data_name, (batch_size,) + tuple(data_shape),
                                      np.float32)]
        self.provide_label = [DataDesc(label_name, (batch_size,) + tuple(label_shape),
                                       np.float32)]
        self._batch = None

    def _next_batch(self):
        raise NotImplementedError

    def iter_next(self):
        """Prepare the next batch; False when the epoch is over."""
        batch = self._next_batch()
        if batch is None:
            self._batch = None
            return False
        data, label, pad, index = batch
        self._batch = to_ndarray(data), to_ndarray(label), pad, index
        return True

    def next(self):
        """The next DataBatch; raises StopIteration at the end of the epoch."""
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=self.getpad(),
                         index=self.getindex())

    def _current(self, part):
        if self._batch is None:
            raise RuntimeError(f"{type(self).__name__}: no current batch; call iter_next() "
                               "(or next()) first, and reset() after the end of an epoch")
        return self._batch[part]

    def getdata(self):
        """The data NDArray of the current batch."""
        return self._current(0)

    def getlabel(self):
        """The label NDArray of the current batch."""
        return self._current(1)

    def getpad(self):
        """Filler samples at the end of the current batch."""
        return self._current(2)

    def getindex(self):
        """Indices (in the whole file) of the current batch's samples, uint64."""
        return self._current(3)
