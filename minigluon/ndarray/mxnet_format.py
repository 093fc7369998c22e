"""Reading MXNet's own binary NDArray format, so `mx.nd.load` takes files written by MXNet
(`.params`, `.nd`) and unpickling takes an MXNet NDArray's `{'handle': bytes}` state.
minigluon writes its own format (serialize.py); this module only reads.

The layout, little-endian, as MXNet 0.x-1.x writes it (docs/ndarray-format.md):

    file    uint64 0x112, uint64 reserved, uint64 n, n records,
            uint64 m, m names (uint64 length + bytes): m is 0 for a list, n for a dict
    record  uint32 magic: 0xF993FAC8 (v1), 0xF993FAC9 (v2, adds the storage type),
            0xF993FACA (v3, NumPy shapes: 0-d allowed); any other value is the ndim of
            a v0 record, whose dimensions are uint32
            [v2, v3: int32 storage type, 0 = dense]
            shape: int32 ndim + ndim x int64 (v0: ndim x uint32); no dims = an empty array
            int32 device type, int32 device id (ignored: arrays load on cpu)
            int32 type flag, then the elements in C order
"""
import struct

import numpy as np

from ..base import MXNetError
from . import shape_semantics

LIST_MAGIC = 0x112
_V1, _V2, _V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
# MXNet's type flags (mshadow's): 12 is bfloat16, which NumPy has no type for
TYPE_FLAGS = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32,
              5: np.int8, 6: np.int64, 7: np.bool_, 8: np.int16, 9: np.uint16, 10: np.uint32,
              11: np.uint64}


class FormatError(MXNetError, ValueError):
    """A file or buffer that is not a valid array file (minigluon's or MXNet's)."""


class ByteReader:
    """Reads little-endian fields from `buf`, naming the field and `source` on truncation."""

    def __init__(self, buf, source):
        self.buf, self.pos, self.source = memoryview(buf), 0, source

    def take(self, n, what):
        if n < 0 or self.pos + n > len(self.buf):
            raise FormatError(f"{self.source}: truncated while reading {what} at byte {self.pos}")
        chunk = self.buf[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt, what):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def at_end(self):
        return self.pos == len(self.buf)


def is_mxnet_file(buf):
    """True if `buf` starts with the header of a file written by MXNet's `nd.save`."""
    return len(buf) >= 8 and struct.unpack_from("<Q", buf)[0] == LIST_MAGIC


def read_file(buf, source="buffer"):
    """The arrays of an MXNet file: a list of NumPy arrays, or a dict when it has names."""
    r = ByteReader(buf, source)
    r.unpack("QQ", "the header")
    (count,) = r.unpack("Q", "the array count")
    arrays = [read_record(r) for _ in range(count)]
    (n_names,) = r.unpack("Q", "the name count")
    names = [bytes(r.take(r.unpack("Q", "a name length")[0], "a name")).decode("utf-8", "replace")
             for _ in range(n_names)]
    if not r.at_end():
        raise FormatError(f"{source}: {len(r.buf) - r.pos} unexpected bytes after the names")
    if n_names and n_names != count:
        raise FormatError(f"{source}: {n_names} names for {count} arrays")
    return dict(zip(names, arrays)) if n_names else arrays


def read_handle(buf, source="pickled NDArray"):
    """The NumPy array of one MXNet record filling `buf` (an MXNet NDArray's pickled state)."""
    r = ByteReader(buf, source)
    out = read_record(r)
    if not r.at_end():
        raise FormatError(f"{source}: {len(r.buf) - r.pos} unexpected bytes after the array")
    return out


def read_record(r):
    """One NDArray record at the reader's position, as a NumPy array."""
    (magic,) = r.unpack("I", "an array's magic")
    # as MXNet: a v3 record loads only with NumPy shape semantics on, any other only off
    shape_semantics.check_loadable(magic == _V3, r.source)
    if magic in (_V2, _V3):
        (stype,) = r.unpack("i", "the storage type")
        if stype != 0:
            raise FormatError(f"{r.source}: an array with sparse storage type {stype}; "
                              "minigluon reads dense arrays only")
    shape = _read_shape(r, magic)
    if shape is None:
        return np.zeros((0,), np.float32)    # MXNet's "none" array, saved without data
    r.unpack("ii", "the device")
    (flag,) = r.unpack("i", "the type flag")
    if flag not in TYPE_FLAGS:
        raise FormatError(f"{r.source}: unsupported MXNet type flag {flag} (known: "
                          f"{sorted(TYPE_FLAGS)}; 12, bfloat16, has no NumPy type)")
    dtype = np.dtype(TYPE_FLAGS[flag]).newbyteorder("<")
    size = int(np.prod(shape, dtype=np.int64))
    data = r.take(size * dtype.itemsize, "an array's data")
    return np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _read_shape(r, magic):
    """The shape, or None for an array saved without one."""
    if magic in (_V1, _V2, _V3):
        (ndim,) = r.unpack("i", "ndim")
        if ndim < 0 or (ndim == 0 and magic != _V3):
            return None
        shape = r.unpack(f"{ndim}q", "a shape")
        if any(d < 0 for d in shape):
            raise FormatError(f"{r.source}: an array of unknown shape {shape} cannot be loaded")
        return shape
    if magic == 0:      # v0: the magic is the ndim
        return None
    if magic > 32:
        raise FormatError(f"{r.source}: not an array record (magic {magic:#x})")
    return r.unpack(f"{magic}I", "a shape")
