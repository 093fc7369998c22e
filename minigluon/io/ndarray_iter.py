"""`NDArrayIter`: batches from arrays held in memory, with MXNet's three last-batch modes."""
from collections import OrderedDict

import numpy as np

from ..ndarray.ndarray import NDArray
from .base import DataDesc, DataIter, check_count, to_ndarray

__all__ = ["NDArrayIter"]


# ---- the epoch's last, short batch: one small object per last_batch_handle mode ------------
# `rows(it)` returns (arrays of the next batch, pad) and advances `it`, or None at the end.

class _Pad:
    """Complete the last batch with samples from the start of the data; report them in pad."""

    @staticmethod
    def rows(it):
        if it._pos >= it.num_data:
            return None
        end = it._pos + it.batch_size
        rows = it._rows(np.arange(it._pos, end) % it.num_data)
        it._pos = end
        return rows, max(0, end - it.num_data)


class _Discard:
    """Drop the last batch when it is short."""

    @staticmethod
    def rows(it):
        end = it._pos + it.batch_size
        if end > it.num_data:
            return None
        rows = it._rows(np.arange(it._pos, end))
        it._pos = end
        return rows, 0


class _RollOver:
    """Keep the short last batch and put it at the start of the next epoch's first batch."""

    @staticmethod
    def rows(it):
        end = it._pos + it.batch_size - len(it._carry[0])
        if end > it.num_data:
            # carried by value: the next epoch may reshuffle the order
            it._carry = _concat(it._carry, it._rows(np.arange(it._pos, it.num_data)))
            it._pos = it.num_data
            return None
        rows = _concat(it._carry, it._rows(np.arange(it._pos, end)))
        it._carry, it._pos = it._empty_carry(), end
        return rows, 0


def _concat(first, second):
    return [np.concatenate([a, b]) for a, b in zip(first, second)]


_MODES = {"pad": _Pad, "discard": _Discard, "roll_over": _RollOver}


def _named_sources(data, default_name, allow_empty):
    """[(name, array)] sorted by name, from an array, a list of arrays or a dict (MXNet's rule:
    one unnamed array is `default_name`, several are `_0_<default_name>`, `_1_...`)."""
    if data is None:
        data = []
    if isinstance(data, (np.ndarray, NDArray)):
        data = [data]
    if isinstance(data, (list, tuple)):
        if len(data) == 1:
            data = OrderedDict([(default_name, data[0])])
        else:
            data = OrderedDict((f"_{i}_{default_name}", d) for i, d in enumerate(data))
    if not isinstance(data, dict):
        raise TypeError(f"NDArrayIter: {default_name} must be an NDArray, a NumPy array, a list "
                        f"of them or a dict of them, got {type(data).__name__}")
    if not data and not allow_empty:
        raise ValueError(f"NDArrayIter: {default_name} is empty; pass at least one array")
    return [(name, _as_source(name, value)) for name, value in sorted(data.items())]


def _as_source(name, value):
    """(NumPy array, context): NDArrays keep dtype and device; anything else becomes float32."""
    if isinstance(value, NDArray):
        return value.asnumpy(), value.context
    try:
        return np.array(value, dtype=np.float32), None
    except (TypeError, ValueError) as err:
        raise TypeError(f"NDArrayIter: input {name!r} of type {type(value).__name__} is not an "
                        f"array ({err}); pass an NDArray or a NumPy array") from None


class NDArrayIter(DataIter):
    """Iterate over NDArrays or NumPy arrays in memory, `batch_size` samples at a time.

    Parameters
    ----------
    data : NDArray, NumPy array, list of them, or dict name -> array
        The inputs; axis 0 is the sample axis. NumPy and list inputs become float32, as in
        MXNet. Sources are ordered by name.
    label : same kinds as `data`, optional
        The labels.
    batch_size : int
        Samples per batch.
    shuffle : bool
        Shuffle the samples at construction and at every `reset()` (NumPy's global RNG, so
        `np.random.seed` makes it repeat).
    last_batch_handle : {'pad', 'discard', 'roll_over'}
        When the samples do not fill the last batch: 'pad' completes it with samples from
        the start of the data and sets `pad` to their number; 'discard' drops it;
        'roll_over' drops it from this epoch and puts its samples at the start of the next
        epoch's first batch (after `reset()`).
    data_name, label_name : str
        Names of a single data and label source.

    Unlike MXNet, whose roll-over batch reports the carried samples as `pad`, that batch
    has `pad == 0` here: every sample in it is real.

    >>> it = mx.io.NDArrayIter(np.arange(5), batch_size=2, last_batch_handle='pad')
    >>> [(b.data[0].asnumpy().tolist(), b.pad) for b in it]
    [([0.0, 1.0], 0), ([2.0, 3.0], 0), ([4.0, 0.0], 1)]
    """

    def __init__(self, data, label=None, batch_size=1, shuffle=False,
                 last_batch_handle="pad", data_name="data", label_name="softmax_label"):
        super().__init__(check_count(batch_size, "batch_size", 1, "NDArrayIter"))
        if last_batch_handle not in _MODES:
            raise ValueError(f"NDArrayIter: last_batch_handle must be 'pad', 'discard' or "
                             f"'roll_over', got {last_batch_handle!r}")
        self._data = _named_sources(data, data_name, allow_empty=False)
        self._label = _named_sources(label, label_name, allow_empty=True)
        self._sources = self._data + self._label
        self.num_data = self._check_lengths()
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self._mode = _MODES[last_batch_handle]
        self.idx = np.arange(self.num_data)
        self._order = np.arange(self.num_data)
        self._carry = self._empty_carry()
        self._pos = 0
        self._batch = None
        self.reset()

    def _check_lengths(self):
        """The number of samples: the first data array's, as in MXNet; an input with more
        samples is read only that far, one with fewer cannot be."""
        lengths = {name: arr.shape[0] if arr.ndim else 0 for name, (arr, _) in
                   self._sources}
        count = next(iter(lengths.values()))
        short = {name: n for name, n in lengths.items() if n < count}
        if short:
            raise ValueError(f"NDArrayIter: every input needs at least the first data array's "
                             f"{count} samples (axis 0), got {lengths}")
        return count

    def _descs(self, sources):
        return [DataDesc(name, (self.batch_size,) + arr.shape[1:], arr.dtype.type)
                for name, (arr, _) in sources]

    @property
    def provide_data(self):
        """[DataDesc] of the data sources, with the batch size as first dimension."""
        return self._descs(self._data)

    @property
    def provide_label(self):
        """[DataDesc] of the label sources."""
        return self._descs(self._label)

    def _empty_carry(self):
        return [arr[:0] for _, (arr, _) in self._sources]

    def hard_reset(self):
        """Go back to the start and forget samples carried over by 'roll_over'."""
        self._carry = self._empty_carry()
        self.reset()

    def reset(self):
        """Start the next epoch: reshuffle when asked; 'roll_over' keeps its carried samples."""
        if self.shuffle:
            # compose with the previous order, as MXNet reshuffles already-shuffled data
            np.random.shuffle(self.idx)
            self._order = self._order[self.idx]
        if self.last_batch_handle != "roll_over":
            self._carry = self._empty_carry()
        self._pos = 0
        self._batch = None

    def iter_next(self):
        """Prepare the next batch; False when the epoch is over."""
        taken = self._mode.rows(self)
        if taken is None:
            self._batch = None
            return False
        rows, pad = taken
        self._batch = ([to_ndarray(r, ctx) for r, (_, (_, ctx)) in zip(rows, self._sources)],
                       pad)
        return True

    def _rows(self, positions):
        index = self._order[positions]
        return [arr[index] for _, (arr, _) in self._sources]

    def _current(self):
        if self._batch is None:
            raise RuntimeError("NDArrayIter: no current batch; call iter_next() (or next()) "
                               "first, and reset() after the end of an epoch")
        return self._batch

    def getdata(self):
        """The data NDArrays of the current batch."""
        return self._current()[0][:len(self._data)]

    def getlabel(self):
        """The label NDArrays of the current batch ([] without labels)."""
        return self._current()[0][len(self._data):]

    def getpad(self):
        """Filler samples at the end of the current batch ('pad' mode's last batch)."""
        return self._current()[1]
