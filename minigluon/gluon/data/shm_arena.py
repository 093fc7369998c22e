"""Shared-memory transport of a batch from a DataLoader worker process to the main process.

A worker writes all arrays of a batch into one shared-memory block and sends the block's
name with each array's offset, shape and dtype. The main process copies the arrays out at
once and hands the name back with that worker's next task, so in steady state no block is
created or unlinked. Every block of a pass carries the pass's name prefix; the main
process unlinks them all when the pass ends.
"""
import os
from multiprocessing import shared_memory

import numpy as np

from ...context import cpu
from ...ndarray import NDArray
from ...numpy.mode import in_array_mode
from .batchify import host_array

__all__ = ["Shared", "Arena", "map_leaves", "copy_out", "unlink_block", "sweep_blocks"]

_SHM_DIR = "/dev/shm"   # where POSIX shared memory is visible as files (Linux)
_ALIGN = 64     # byte alignment of each array inside a block


class Shared:
    """One array inside a block: byte offset, shape, dtype, and whether it was an NDArray."""
    __slots__ = ("offset", "shape", "dtype", "is_nd")

    def __init__(self, offset, shape, dtype, is_nd):
        self.offset, self.shape, self.dtype, self.is_nd = offset, shape, dtype, is_nd


def map_leaves(fn, obj):
    """Apply `fn` to the leaves of nested lists, tuples and dicts."""
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_leaves(fn, o) for o in obj)
    if isinstance(obj, dict):
        return {k: map_leaves(fn, v) for k, v in obj.items()}
    return fn(obj)


class Arena:
    """A worker's blocks, each reused once the main process has copied it out."""

    def __init__(self, prefix):
        self._prefix, self._blocks, self._free = prefix, {}, []

    def reuse(self, names):
        self._free.extend(names)

    def pack(self, batch):
        """(block name or None, the batch with every array replaced by its `Shared`)."""
        arrays, end = [], 0

        def place(leaf):
            nonlocal end
            array = host_array(leaf)
            if not isinstance(array, np.ndarray) or array.dtype.hasobject:
                return leaf     # numbers, strings, object arrays: small, pickled as they are
            arrays.append((end, array))
            shared = Shared(end, array.shape, array.dtype.str, isinstance(leaf, NDArray))
            end += -(-array.nbytes // _ALIGN) * _ALIGN
            return shared
        tree = map_leaves(place, batch)
        if not arrays:
            return None, tree
        block = self._block(end)
        for offset, array in arrays:
            np.ndarray(array.shape, array.dtype, buffer=block.buf, offset=offset)[...] = array
        return block.name, tree

    def _block(self, size):
        for i, name in enumerate(self._free):
            if self._blocks[name].size >= size:
                return self._blocks[self._free.pop(i)]
        size = 1 << max(12, (size - 1).bit_length())    # powers of two: few distinct sizes
        block = shared_memory.SharedMemory(name=f"{self._prefix}{len(self._blocks)}",
                                           create=True, size=size)
        self._blocks[block.name] = block
        return block

    def unlink_all(self):
        for block in self._blocks.values():
            unlink_block(block.name)


def copy_out(block, shared):
    """A copy of array `shared` out of `block` (an NDArray if it was one)."""
    data = np.ndarray(shared.shape, shared.dtype, buffer=block.buf,
                      offset=shared.offset).copy()
    return in_array_mode(NDArray(data, cpu())) if shared.is_nd else data


def unlink_block(name):
    """Unlink shared-memory block `name`, if it still exists."""
    try:
        block = shared_memory.SharedMemory(name=name)
    except OSError:     # already gone
        return
    block.close()
    block.unlink()


def sweep_blocks(prefix):
    """Unlink every block whose name starts with `prefix` (Linux, where they are files)."""
    try:
        names = [n for n in os.listdir(_SHM_DIR) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        unlink_block(name)
