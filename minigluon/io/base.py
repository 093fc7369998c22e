"""The data-iterator protocol of MXNet 1.x: `DataDesc`, `DataBatch` and the `DataIter` base.

An iterator yields `DataBatch`es; `reset()` starts the next epoch. Code written against
MXNet's Module API drives it either with `for batch in it` or with the lower-level
`while it.iter_next(): it.getdata() ...` loop, and both work on every iterator here.
"""
from collections import namedtuple

import numpy as np

from ..context import cpu
from ..ndarray import array as _nd_array

__all__ = ["DataDesc", "DataBatch", "DataIter"]


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """Name, shape, dtype and layout of one input of a network.

    It is a 2-tuple `(name, shape)`, as in MXNet, so `for name, shape in it.provide_data`
    keeps working; `dtype` and `layout` are extra attributes.

    Parameters
    ----------
    name : str
        Input name, e.g. 'data' or 'softmax_label'.
    shape : tuple of int
        Shape of one batch, batch axis included.
    dtype : NumPy dtype
        Element type (float32 by default).
    layout : str
        Axis names; 'N' marks the batch axis.

    >>> DataDesc('data', (32, 1, 28, 28))
    DataDesc[data,(32, 1, 28, 28),<class 'numpy.float32'>,NCHW]
    """

    def __new__(cls, name, shape, dtype=np.float32, layout="NCHW"):
        desc = super().__new__(cls, name, tuple(shape))
        desc.dtype = dtype
        desc.layout = layout
        return desc

    def __repr__(self):
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout):
        """The batch axis of `layout` (the position of 'N'; 0 when layout is None)."""
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes, types):
        """DataDescs from `[(name, shape)]` and, optionally, `[(name, dtype)]`."""
        if types is None:
            return [DataDesc(name, shape) for name, shape in shapes]
        dtypes = dict(types)
        return [DataDesc(name, shape, dtypes[name]) for name, shape in shapes]


class DataBatch:
    """One batch: lists of data and label NDArrays, plus bookkeeping.

    Parameters
    ----------
    data : list of NDArray
    label : list of NDArray, optional
    pad : int, optional
        How many samples at the end of the batch are filler (repeated samples that complete
        the last batch of an epoch); metrics and predictions should ignore them.
    index : NumPy array, optional
        Indices of the samples in their data set.
    bucket_key, provide_data, provide_label : optional
        As in MXNet, for bucketing iterators and modules.
    """

    def __init__(self, data, label=None, pad=None, index=None, bucket_key=None,
                 provide_data=None, provide_label=None):
        for what, value in (("data", data), ("label", label)):
            if value is not None and not isinstance(value, (list, tuple)):
                raise TypeError(f"DataBatch {what} must be a list of NDArrays, got "
                                f"{type(value).__name__}; wrap a single array in [ ]")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self):
        data_shapes = [d.shape for d in self.data]
        label_shapes = [d.shape for d in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data_shapes} label shapes: {label_shapes}"


class DataIter:
    """Base class of data iterators.

    Subclasses implement `iter_next()` (advance; False at the end of the epoch) and
    `getdata()` / `getlabel()` / `getpad()` / `getindex()` for the current batch, plus
    `reset()`; `next()` then builds the `DataBatch`. They also set `provide_data` and
    `provide_label`, lists of `DataDesc`.

    >>> it = mx.io.NDArrayIter(np.zeros((10, 3)), batch_size=5)
    >>> [batch.data[0].shape for batch in it]
    [(5, 3), (5, 3)]
    """

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def reset(self):
        """Go back to the start of the data (the next epoch)."""

    def next(self):
        """The next DataBatch; raises StopIteration at the end of the epoch."""
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                         index=self.getindex())

    def __next__(self):
        return self.next()

    def iter_next(self):
        """Move to the next batch; False when the epoch is over."""
        raise NotImplementedError(f"{type(self).__name__} must implement iter_next()")

    def getdata(self):
        """The data arrays of the current batch."""
        raise NotImplementedError(f"{type(self).__name__} must implement getdata()")

    def getlabel(self):
        """The label arrays of the current batch."""
        raise NotImplementedError(f"{type(self).__name__} must implement getlabel()")

    def getindex(self):
        """The sample indices of the current batch, or None."""
        return None

    def getpad(self):
        """How many samples at the end of the current batch are filler."""
        return 0


def to_ndarray(array, ctx=None):
    """A NumPy batch as an NDArray of the same dtype (on CPU unless `ctx` says otherwise)."""
    return _nd_array(array, ctx=ctx or cpu(), dtype=array.dtype)


def check_count(value, name, minimum, where):
    """`value` as an int >= `minimum`, or a ValueError naming `where`, the argument and value."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{where}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
