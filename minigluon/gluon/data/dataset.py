"""Datasets: indexable collections of samples, and the lazy views that Dataset methods
return (transformed, filtered, sharded, sampled).

Example::

    data = gluon.data.ArrayDataset(nd.random.uniform(shape=(100, 3)), nd.arange(100))
    train = data.shard(num_shards=4, index=rank).transform_first(lambda x: x * 2)
"""
import os

from ...base import MXNetError
from ...ndarray.ndarray import NDArray

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset", "RecordFileDataset"]


class Dataset:
    """Abstract dataset: subclasses define `__getitem__(idx)` and `__len__()`."""

    def __getitem__(self, idx):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def transform(self, fn, lazy=True):
        """A dataset whose samples are `fn(*sample)` (or `fn(sample)` when a sample is not a
        tuple). `lazy=False` applies `fn` to every sample now and keeps the results.

        >>> squared = dataset.transform(lambda x, y: (x * x, y))
        """
        trans = _LazyTransformDataset(self, fn)
        if lazy:
            return trans
        return SimpleDataset([trans[i] for i in range(len(trans))])

    def transform_first(self, fn, lazy=True):
        """Like transform(), but `fn` sees and replaces only the first element of each
        sample (the data), leaving the label as it is.

        >>> train = mnist.transform_first(transforms.ToTensor())
        """
        return self.transform(_TransformFirstClosure(fn), lazy)

    def filter(self, fn):
        """The samples for which `fn(sample)` is true (evaluated once, now)."""
        return _SampledDataset(self, [i for i in range(len(self)) if fn(self[i])])

    def shard(self, num_shards, index):
        """Part `index` of `num_shards` contiguous parts; sizes differ by at most one, the
        first `len % num_shards` parts holding the extra samples.

        >>> [len(ArrayDataset(list(range(10))).shard(3, i)) for i in range(3)]
        [4, 3, 3]
        """
        if not isinstance(num_shards, int) or num_shards <= 0:
            raise MXNetError(f"shard: num_shards must be a positive int, got {num_shards!r}")
        if not isinstance(index, int) or not 0 <= index < num_shards:
            raise MXNetError(f"shard: index must be in [0, {num_shards}), got {index!r}")
        size, rest = divmod(len(self), num_shards)
        start = size * index + min(index, rest)
        return _SampledDataset(self, range(start, start + size + (index < rest)))

    def take(self, count):
        """The first `count` samples (all of them when count is None or too large)."""
        if count is None or count > len(self):
            count = len(self)
        if count < 0:
            raise MXNetError(f"take: count must be >= 0 or None, got {count}")
        return _SampledDataset(self, range(count))

    def sample(self, sampler):
        """The samples at the indices that `sampler` (a Sampler or any iterable of indices)
        yields, in that order; the sampler is iterated once, now."""
        if not hasattr(sampler, "__iter__"):
            raise MXNetError(f"sample: expected a Sampler or an iterable of indices, got "
                             f"{type(sampler).__name__}")
        return _SampledDataset(self, list(sampler))


class SimpleDataset(Dataset):
    """A dataset over any sequence (list, NumPy array, NDArray...).

    >>> SimpleDataset([1, 2, 3])[1]
    2
    """

    def __init__(self, data):
        self._data = data

    def __len__(self):
        return len(self._data)

    def __getitem__(self, idx):
        return self._data[idx]


class _LazyTransformDataset(Dataset):
    """`fn` applied to the samples of `data` when they are read."""

    def __init__(self, data, fn):
        self._data = data
        self._fn = fn

    def __len__(self):
        return len(self._data)

    def __getitem__(self, idx):
        item = self._data[idx]
        if isinstance(item, tuple):
            return self._fn(*item)
        return self._fn(item)


class _TransformFirstClosure:
    """Applies `fn` to the first element only; a class (not a lambda) so that a transformed
    dataset can be pickled for DataLoader worker processes."""

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, x, *args):
        if args:
            return (self._fn(x),) + args
        return self._fn(x)


class _SampledDataset(Dataset):
    """The samples of `data` at `indices` (a list or range)."""

    def __init__(self, data, indices):
        self._dataset = data
        self._indices = indices

    def __len__(self):
        return len(self._indices)

    def __getitem__(self, idx):
        return self._dataset[self._indices[idx]]


class ArrayDataset(Dataset):
    """Samples taken from several arrays of the same length: sample i is
    `(arrays[0][i], arrays[1][i], ...)`, or `arrays[0][i]` for a single array.

    Arrays may be NDArrays, NumPy arrays, lists or datasets. A 1-D NDArray is converted to
    NumPy once, so its items are NumPy scalars (as in MXNet); items of other NDArrays stay
    NDArrays.

    >>> data = ArrayDataset(nd.zeros((4, 2)), np.array([0, 1, 0, 1]))
    >>> x, y = data[3]
    """

    def __init__(self, *args):
        if not args:
            raise MXNetError("ArrayDataset needs at least one array")
        lengths = [len(a) for a in args]
        if len(set(lengths)) > 1:
            shown = ", ".join(f"array {i}: {n}" for i, n in enumerate(lengths))
            raise MXNetError(f"ArrayDataset: all arrays must have the same length, got "
                             f"{shown}")
        self._length = lengths[0]
        self._data = [a.asnumpy() if isinstance(a, NDArray) and a.ndim == 1 else a
                      for a in args]

    def __len__(self):
        return self._length

    def __getitem__(self, idx):
        if len(self._data) == 1:
            return self._data[0][idx]
        return tuple(data[idx] for data in self._data)


class RecordFileDataset(Dataset):
    """The raw records of a RecordIO file, read through its index (`name.idx` beside
    `name.rec`).

    >>> records = RecordFileDataset('train.rec')
    >>> header, payload = mx.recordio.unpack(records[0])
    """

    def __init__(self, filename):
        from ... import recordio
        self.idx_file = os.path.splitext(filename)[0] + ".idx"
        self.filename = filename
        self._record = recordio.MXIndexedRecordIO(self.idx_file, self.filename, "r")

    def __getitem__(self, idx):
        return self._record.read_idx(self._record.keys[idx])

    def __len__(self):
        return len(self._record.keys)
