"""`MNISTIter`: batches of MNIST digits read from the IDX files, as MXNet's C++ iterator."""
import logging
import os

import numpy as np

from ..base import MXNetError
from .base import check_count
from .idx import read_idx
from .single_source import PLUMBING_ARGS, SingleSourceIter, check_kwargs, split_part

__all__ = ["MNISTIter"]

_log = logging.getLogger(__name__)

# MXNet scripts often pass the network's input shape; MXNet ignores it, and so do we.
_ACCEPTED = PLUMBING_ARGS | {"input_shape", "data_shape"}


class MNISTFileError(MXNetError, FileNotFoundError):
    """An MNIST IDX file that does not exist."""


def _resolve(path, what):
    """`path`, or `path + '.gz'` when only the compressed file exists."""
    path = os.fspath(path)
    for candidate in (path, path + ".gz"):
        if os.path.isfile(candidate):
            return candidate
    raise MNISTFileError(f"MNISTIter: {what} file {path!r} not found (nor {path + '.gz'!r}); "
                         f"help: pass {what}= the path of the IDX file (.gz is fine)")


class MNISTIter(SingleSourceIter):
    """Iterate over MNIST from its IDX files (`train-images-idx3-ubyte` and labels).

    Pixels are scaled by 1/256 to float32 in [0, 1), as MXNet does. Batches hold
    `(batch_size, 1, 28, 28)` images, or `(batch_size, 784)` with `flat`, and
    `(batch_size,)` float32 labels; an epoch ends with the last full batch (`pad` is 0).

    Parameters
    ----------
    image, label : str
        Paths of the image and label IDX files; gzip-compressed files work, and when a
        path does not exist its `.gz` sibling is used.
    batch_size : int
        Samples per batch.
    shuffle : bool
        Shuffle the samples once, at construction (MXNet's default and behaviour: every
        epoch then reads the same order). The order comes from NumPy's RandomState(seed),
        so it differs from MXNet's for the same seed.
    flat : bool
        Return images as 784-vectors.
    seed : int
        Seed of the shuffle.
    silent : bool
        Do not log what was loaded (at INFO level).
    num_parts, part_index : int
        Read only part `part_index` of `num_parts` contiguous parts, for data-parallel
        training (`kv.num_workers`, `kv.rank`). Parts are disjoint and of equal size
        (`N // num_parts`); unlike MXNet, whose parts may differ by one sample, the last
        `N % num_parts` samples are left out so every worker runs as many batches.
    data_name, label_name : str
        Names in `provide_data` / `provide_label`.

    Other MXNet arguments (`prefetch_buffer`, `ctx`, `input_shape`, ...) are accepted and
    ignored.

    >>> train = mx.io.MNISTIter(image='data/train-images-idx3-ubyte',
    ...                         label='data/train-labels-idx1-ubyte', batch_size=100,
    ...                         num_parts=kv.num_workers, part_index=kv.rank)
    """

    def __init__(self, image="./train-images-idx3-ubyte", label="./train-labels-idx1-ubyte",
                 batch_size=128, shuffle=True, flat=False, seed=0, silent=False, num_parts=1,
                 part_index=0, data_name="data", label_name="softmax_label", **kwargs):
        check_kwargs("MNISTIter", kwargs, _ACCEPTED, {})
        batch_size = check_count(batch_size, "batch_size", 1, "MNISTIter")
        images, labels = self._load(image, label)
        start, stop = split_part(len(images), num_parts, part_index, "MNISTIter")
        self._index = np.arange(start, stop, dtype=np.uint64)
        if shuffle:
            self._index = self._index[np.random.RandomState(seed).permutation(stop - start)]
        self._images = images
        self._labels = labels.astype(np.float32)
        shape = (images[0].size,) if flat else (1,) + images.shape[1:]
        super().__init__(batch_size, shape, (), data_name, label_name)
        self._pos = 0
        if not silent:
            _log.info("MNISTIter: load %d images (part %s of %s), shuffle=%s, shape=%s",
                      stop - start, part_index, num_parts, bool(shuffle),
                      self.provide_data[0].shape)

    @staticmethod
    def _load(image, label):
        image, label = _resolve(image, "image"), _resolve(label, "label")
        images, labels = read_idx(image, 3), read_idx(label, 1)
        if len(images) != len(labels):
            raise MXNetError(f"MNISTIter: {image!r} holds {len(images)} images but {label!r} "
                             f"holds {len(labels)} labels; pass matching files")
        return images, labels

    def reset(self):
        """Start the next epoch (same sample order: MNISTIter shuffles once)."""
        self._pos = 0
        self._batch = None

    def _next_batch(self):
        end = self._pos + self.batch_size
        if end > len(self._index):
            return None
        index = self._index[self._pos:end]
        self._pos = end
        data = self._images[index].astype(np.float32) * np.float32(1.0 / 256)
        return (data.reshape(self.provide_data[0].shape), self._labels[index], 0, index)
