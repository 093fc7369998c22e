"""Samplers: which dataset indices a DataLoader reads, and in what order.

`Sampler`s yield single indices; `BatchSampler` groups them into lists. `SplitSampler` and
`SplitBatchSampler` give each of `num_parts` workers its own equal-sized share of the data
for data-parallel training:

    kv = mx.kv.create('dist_sync')
    sampler = SplitSampler(len(dataset), num_parts=kv.num_workers, part_index=kv.rank)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)

Out of scope: weighted sampling, samplers that need the dataset's contents (FilterSampler).
"""
import numpy as np

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "IntervalSampler", "BatchSampler",
           "SplitSampler", "SplitBatchSampler"]


def _count(value, name, minimum):
    """`value` as an int >= `minimum`, or a ValueError naming the argument and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class Sampler:
    """Base class: iterating yields dataset indices; `len()` says how many per epoch."""

    def __iter__(self):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Indices `start, start + 1, ..., start + length - 1`, in order.

    >>> list(SequentialSampler(3, start=2))
    [2, 3, 4]
    """

    def __init__(self, length, start=0):
        self._length = _count(length, "length", 0)
        self._start = _count(start, "start", 0)

    def __iter__(self):
        return iter(range(self._start, self._start + self._length))

    def __len__(self):
        return self._length


class RandomSampler(Sampler):
    """Indices `0 .. length-1` in a new random order each epoch (NumPy's global RNG, as in
    MXNet, so `numpy.random.seed` makes it repeat).

    >>> sorted(RandomSampler(4))
    [0, 1, 2, 3]
    """

    def __init__(self, length):
        self._length = _count(length, "length", 0)

    def __iter__(self):
        return iter(np.random.permutation(self._length).tolist())

    def __len__(self):
        return self._length


class IntervalSampler(Sampler):
    """Every `interval`-th index, starting at 0; with `rollover`, then from 1, 2, ...

    >>> list(IntervalSampler(6, interval=3))
    [0, 3, 1, 4, 2, 5]
    >>> list(IntervalSampler(6, interval=3, rollover=False))
    [0, 3]
    """

    def __init__(self, length, interval, rollover=True):
        self._length = _count(length, "length", 0)
        self._interval = _count(interval, "interval", 1)
        if self._length and self._interval > self._length:
            raise ValueError(f"interval must be at most length={self._length}, "
                             f"got {interval!r}")
        self._rollover = rollover

    def __iter__(self):
        starts = range(self._interval) if self._rollover else range(1)
        return (i for s in starts for i in range(s, self._length, self._interval))

    def __len__(self):
        if self._rollover:
            return self._length
        return len(range(0, self._length, self._interval))


# ---- what happens to the last, short batch of an epoch: one small object per mode ---------

class _Keep:
    """Yield the short batch."""

    @staticmethod
    def count(n, size):
        return -(-n // size)

    @staticmethod
    def tail(batch):
        return batch, []        # (batch to yield or [], indices carried to next epoch)


class _Discard:
    """Drop the short batch."""

    @staticmethod
    def count(n, size):
        return n // size

    @staticmethod
    def tail(batch):
        return [], []


class _Rollover:
    """Carry the short batch's indices into the start of the next epoch."""

    @staticmethod
    def count(n, size):
        return n // size

    @staticmethod
    def tail(batch):
        return [], batch


_LAST_BATCH = {"keep": _Keep, "discard": _Discard, "rollover": _Rollover}


def _last_batch_mode(last_batch):
    try:
        return _LAST_BATCH[last_batch]
    except (KeyError, TypeError):
        raise ValueError(f"last_batch must be one of 'keep', 'discard' or 'rollover', "
                         f"got {last_batch!r}") from None


class BatchSampler(Sampler):
    """Groups the indices of `sampler` into lists of `batch_size`.

    Parameters
    ----------
    sampler : Sampler (or any iterable of indices with a length)
    batch_size : int
        Indices per batch, >= 1.
    last_batch : {'keep', 'discard', 'rollover'}
        The epoch's last batch when it is short: yield it ('keep'), drop it ('discard'), or
        put its indices at the start of the next epoch ('rollover'). `len()` counts the
        batches the next epoch yields in every mode.

    >>> list(BatchSampler(SequentialSampler(5), 2, 'keep'))
    [[0, 1], [2, 3], [4]]
    >>> s = BatchSampler(SequentialSampler(5), 2, 'rollover')
    >>> list(s), len(s), list(s)
    ([[0, 1], [2, 3]], 3, [[4, 0], [1, 2], [3, 4]])
    """

    def __init__(self, sampler, batch_size, last_batch="keep"):
        self._sampler = sampler
        self._batch_size = _count(batch_size, "batch_size", 1)
        self._last_batch = last_batch
        self._mode = _last_batch_mode(last_batch)
        self._prev = []

    def __iter__(self):
        batch, self._prev = self._prev, []
        for index in self._sampler:
            batch.append(index)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            short, self._prev = self._mode.tail(batch)
            if short:
                yield short

    def __len__(self):
        return self._mode.count(len(self._prev) + len(self._sampler), self._batch_size)


class SplitSampler(Sampler):
    """The indices of part `part_index` of `num_parts` disjoint, equal parts of
    `range(length)`.

    Every part has `length // num_parts` indices, so every worker of a synchronous job
    runs the same number of steps and no sample is read twice in an epoch. The remainder
    (fewer than `num_parts` indices) is left out of that epoch; with `shuffle` a different
    remainder is left out each epoch, so over epochs every sample is read. With `pad=True`
    every part has `ceil(length / num_parts)` indices instead: the (shuffled) index list is
    padded by wrapping around to its start, so nothing is left out but a few indices
    appear twice in the epoch (PyTorch's DistributedSampler with `drop_last=False`).

    With `shuffle`, all parts cut the same permutation of `range(length)`, drawn from
    `seed` and the epoch, so parts stay disjoint and every worker agrees without talking.
    Each iteration uses the current epoch and then advances it by one; call
    `set_epoch(epoch)` before an epoch to pin it (e.g. when resuming).

    Parameters
    ----------
    length : int
        Number of samples in the dataset.
    num_parts : int
        Number of parts, usually `kv.num_workers`.
    part_index : int
        This worker's part, `0 <= part_index < num_parts`, usually `kv.rank`.
    shuffle : bool
        Shuffle the whole dataset each epoch before splitting (default True: MXNet's
        distributed-training tutorial shuffles too). False gives contiguous parts in order.
    seed : int
        Seed of the shuffle; use the same on every worker.
    pad : bool
        Pad the parts up to `ceil(length / num_parts)` by repeating indices instead of
        leaving the remainder out (default False).

    >>> list(SplitSampler(10, num_parts=2, part_index=1, shuffle=False))
    [5, 6, 7, 8, 9]
    >>> list(SplitSampler(5, num_parts=2, part_index=1, shuffle=False))
    [2, 3]
    >>> list(SplitSampler(5, num_parts=2, part_index=1, shuffle=False, pad=True))
    [3, 4, 0]
    """

    def __init__(self, length, num_parts=1, part_index=0, shuffle=True, seed=0, pad=False):
        self._length = _count(length, "length", 0)
        self._num_parts = _count(num_parts, "num_parts", 1)
        self._part_index = _count(part_index, "part_index", 0)
        if self._part_index >= self._num_parts:
            raise ValueError(f"part_index must be in [0, num_parts={self._num_parts}), got "
                             f"{part_index!r}; pass kv.rank and kv.num_workers")
        if not isinstance(pad, (bool, np.bool_)):
            raise ValueError(f"pad must be True or False, got {pad!r}")
        if 0 < self._length < self._num_parts and not pad:
            raise ValueError(f"SplitSampler: {self._length} samples cannot make "
                             f"{self._num_parts} disjoint non-empty parts; help: use fewer "
                             "workers, or pass pad=True to repeat samples")
        self._pad = bool(pad)
        self._part_len = (-(-self._length // self._num_parts) if pad
                          else self._length // self._num_parts)
        self._shuffle = shuffle
        self._seed = _count(seed, "seed", 0)
        self._epoch = 0

    def set_epoch(self, epoch):
        """Use `epoch`'s permutation for the next iteration (then epoch + 1, ...)."""
        self._epoch = _count(epoch, "epoch", 0)

    def _order(self, epoch):
        if not self._shuffle:
            return np.arange(self._length)
        # RandomState's stream is frozen across NumPy versions, so workers on different
        # machines draw the same permutation.
        return np.random.RandomState([self._seed, epoch]).permutation(self._length)

    def __iter__(self):
        order, self._epoch = self._order(self._epoch), self._epoch + 1
        total = self._part_len * self._num_parts
        if total > self._length:
            order = np.resize(order, total)     # repeats from the start: wrap-around padding
        start = self._part_index * self._part_len
        return iter(order[start:start + self._part_len].tolist())

    def __len__(self):
        return self._part_len


class SplitBatchSampler(BatchSampler):
    """Batches of one part of the data: `BatchSampler(SplitSampler(...), batch_size,
    last_batch)` in one object, for `DataLoader(dataset, batch_sampler=...)`.

    Every part yields the same number of batches in every `last_batch` mode (the parts are
    equal-sized), so synchronous workers never wait on a peer that has run out of data.
    See `SplitSampler` for how parts are cut and shuffled, and `BatchSampler` for
    `last_batch`.

    >>> s = SplitBatchSampler(11, 2, num_parts=2, part_index=0, shuffle=False)
    >>> list(s), len(s)
    ([[0, 1], [2, 3], [4]], 3)
    """

    def __init__(self, length, batch_size, num_parts=1, part_index=0, last_batch="keep",
                 shuffle=True, seed=0, pad=False):
        super().__init__(SplitSampler(length, num_parts, part_index, shuffle, seed, pad),
                         batch_size, last_batch)

    def set_epoch(self, epoch):
        """Use `epoch`'s permutation for the next iteration (then epoch + 1, ...)."""
        self._sampler.set_epoch(epoch)
