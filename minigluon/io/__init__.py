"""`mx.io`: MXNet 1.x data iterators.

- `NDArrayIter`: arrays in memory, with 'pad', 'discard' and 'roll_over' last batches.
- `MNISTIter`: MNIST IDX files; `ImageRecordIter`: images in RecordIO files. Both take
  `num_parts` / `part_index` to give each worker of a distributed job its own equal part.
- `PrefetchingIter` reads the next batch in a background thread; `ResizeIter` fixes the
  number of batches per epoch.
- `DataIter`, `DataBatch` and `DataDesc`: the protocol they share.

Example::

    kv = mx.kv.create('dist_sync')
    train = mx.io.MNISTIter(image='train-images-idx3-ubyte', label='train-labels-idx1-ubyte',
                            batch_size=64, num_parts=kv.num_workers, part_index=kv.rank)
    for batch in mx.io.PrefetchingIter(train):
        x, y = batch.data[0], batch.label[0]

Out of scope: CSVIter, LibSVMIter, ImageDetRecordIter, MXNet's image augmenter chain
beyond resize/crop/mirror/normalize, and h5py or sparse inputs to NDArrayIter.
"""
from .base import DataBatch, DataDesc, DataIter
from .image_record import ImageRecordIter
from .mnist import MNISTIter
from .ndarray_iter import NDArrayIter
from .prefetch import PrefetchingIter
from .resize import ResizeIter

__all__ = ["DataDesc", "DataBatch", "DataIter", "NDArrayIter", "MNISTIter", "ImageRecordIter",
           "PrefetchingIter", "ResizeIter"]
