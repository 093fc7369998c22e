"""Batchify functions: a list of samples -> one batch, in this process
(`default_batchify_fn`) or in a DataLoader worker (`default_mp_batchify_fn`)."""
import numpy as np

from ... import ndarray as nd
from ...context import cpu
from ...ndarray import NDArray
from ...numpy.mode import in_array_mode

__all__ = ["default_batchify_fn", "default_mp_batchify_fn", "host_array", "as_in_context"]


def default_batchify_fn(data):
    """Stack a list of samples into a batch: NDArrays with `nd.stack`, NumPy arrays and
    numbers into one NDArray of their dtype; tuples are batched field by field (a list).
    After npx.set_np() the batches are mx.np.ndarrays.

    >>> x, y = default_batchify_fn([(np.zeros(2), 0), (np.ones(2), 1)])
    >>> x.shape, y.asnumpy().tolist()
    ((2, 2), [0, 1])
    """
    if isinstance(data[0], NDArray):
        return in_array_mode(nd.stack(*data))
    if isinstance(data[0], tuple):
        return [default_batchify_fn(field) for field in zip(*data)]
    data = np.asarray(data)
    return in_array_mode(nd.array(data, dtype=data.dtype))


def host_array(item):
    """The NumPy array of an NDArray (a copy only off the CPU); other items as they are."""
    if isinstance(item, NDArray):
        return item._data if isinstance(item._data, np.ndarray) else item.asnumpy()
    return item


def default_mp_batchify_fn(data):
    """`default_batchify_fn` for workers: stacks with NumPy into host-memory NDArrays
    (never on a GPU, and without recording), which the loader moves to the main process
    through shared memory."""
    if isinstance(data[0], tuple):
        return [default_mp_batchify_fn(field) for field in zip(*data)]
    if isinstance(data[0], NDArray):
        return in_array_mode(NDArray(np.stack([host_array(d) for d in data]), cpu()))
    return in_array_mode(NDArray(np.asarray(data), cpu()))


def as_in_context(data, ctx):
    """NDArrays of a (nested list or tuple) batch moved to `ctx`."""
    if isinstance(data, NDArray):
        return data.as_in_context(ctx)
    if isinstance(data, (list, tuple)):
        return type(data)(as_in_context(d, ctx) for d in data)
    return data
