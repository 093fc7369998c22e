"""MXNet's binary NDArray format: `mx.nd.load` reads files written by MXNet (`.params`,
`.nd`) and unpickling takes an MXNet NDArray's `{'handle': bytes}` state. minigluon writes
its own format for dense arrays (serialize.py) and this one for files holding sparse arrays,
which its own format cannot carry.

The layout, little-endian, as MXNet 0.x-1.x writes it (docs/ndarray-format.md):

    file    uint64 0x112, uint64 reserved, uint64 n, n records,
            uint64 m, m names (uint64 length + bytes): m is 0 for a list, n for a dict
    record  uint32 magic: 0xF993FAC8 (v1), 0xF993FAC9 (v2, adds the storage type),
            0xF993FACA (v3, NumPy shapes: 0-d allowed); any other value is the ndim of
            a v0 record, whose dimensions are uint32
            [v2, v3: int32 storage type: 0 dense, 1 row_sparse, 2 csr]
            [sparse: the storage shape, the shape of the stored values]
            shape: int32 ndim + ndim x int64 (v0: ndim x uint32); no dims = an empty array
            int32 device type, int32 device id (ignored: arrays load on cpu)
            int32 type flag
            [sparse: per aux array (row_sparse: indices; csr: indptr, indices) its int32
             type flag and its shape]
            the values in C order, [sparse: then each aux array's elements]
"""
import struct

import numpy as np

from ..base import MXNetError
from . import shape_semantics, sparse_storage

LIST_MAGIC = 0x112
_V1, _V2, _V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
_STYPE_IDS = {"default": 0, "row_sparse": 1, "csr": 2}
_CPU = (1, 0)    # MXNet's device type and id of cpu(0): saved arrays are on the host
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
    if sparse_storage.is_sparse(out):
        raise FormatError(f"{source}: a pickled {out.stype} array; only dense NDArray "
                          "states unpickle into an NDArray (save sparse arrays with mx.nd.save)")
    return out


def read_record(r):
    """One NDArray record at the reader's position: a NumPy array, or for a sparse record
    a `sparse_storage` container of NumPy arrays."""
    (magic,) = r.unpack("I", "an array's magic")
    # as MXNet: a v3 record loads only with NumPy shape semantics on, any other only off
    shape_semantics.check_loadable(magic == _V3, r.source)
    stype = 0
    if magic in (_V2, _V3):
        (stype,) = r.unpack("i", "the storage type")
        if stype not in _STYPE_IDS.values():
            raise FormatError(f"{r.source}: unknown storage type {stype} (known: 0 dense, "
                              "1 row_sparse, 2 csr)")
    if stype:
        return _read_sparse(r, magic, stype)
    shape = _read_shape(r, magic)
    if shape is None:
        return np.zeros((0,), np.float32)    # MXNet's "none" array, saved without data
    r.unpack("ii", "the device")
    return _read_elements(r, _read_dtype(r, "the type flag"), shape, "an array's data")


def _read_dtype(r, what):
    (flag,) = r.unpack("i", what)
    if flag not in TYPE_FLAGS:
        raise FormatError(f"{r.source}: unsupported MXNet type flag {flag} (known: "
                          f"{sorted(TYPE_FLAGS)}; 12, bfloat16, has no NumPy type)")
    return np.dtype(TYPE_FLAGS[flag]).newbyteorder("<")


def _read_elements(r, dtype, shape, what):
    size = int(np.prod(shape, dtype=np.int64))
    data = r.take(size * dtype.itemsize, what)
    return np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _read_sparse(r, magic, stype_id):
    """A row_sparse (1) or csr (2) record after its storage type, as a checked container."""
    stored_shape = _read_shape(r, magic)
    shape = _read_shape(r, magic)
    if stored_shape is None or shape is None:
        raise FormatError(f"{r.source}: a sparse record without a shape")
    r.unpack("ii", "the device")
    dtype = _read_dtype(r, "the type flag")
    n_aux = 1 if stype_id == 1 else 2
    aux_meta = [(_read_dtype(r, "an aux type flag"), _read_shape(r, _V3)) for _ in range(n_aux)]
    values = _read_elements(r, dtype, stored_shape, "a sparse array's values")
    aux = [_read_elements(r, t, s, "a sparse array's indices").astype(np.int64)
           for t, s in aux_meta]
    if stype_id == 1:
        storage = sparse_storage.RowSparseStorage(values, aux[0], shape)
    else:
        storage = sparse_storage.CSRStorage(values, aux[1], aux[0], shape)
    try:
        storage.check(np, full_check=True)
    except sparse_storage.SparseFormatError as err:
        raise FormatError(f"{r.source}: {err}") from None
    return storage


# ---- writing ------------------------------------------------------------------------------
_FLAG_OF = {np.dtype(t): flag for flag, t in TYPE_FLAGS.items()}


def write_file(arrays, names=()):
    """MXNet's file of `arrays` (NumPy arrays or sparse containers of NumPy arrays), with
    `names` for a dict (none for a list)."""
    out = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    out += [write_record(a) for a in arrays]
    out.append(struct.pack("<Q", len(names)))
    for name in names:
        raw = name.encode("utf-8")
        out.append(struct.pack("<Q", len(raw)) + raw)
    return b"".join(out)


def write_record(array):
    """One record, marked as MXNet marks it with the shape semantics on at saving: v3 with
    NumPy shapes, else v2 (both carry the storage type)."""
    magic = _V3 if shape_semantics.np_shape_on() else _V2
    if sparse_storage.is_sparse(array):
        return _sparse_record(array, magic)
    array = np.asarray(array, order="C")
    if array.ndim == 0 and magic == _V2:
        raise FormatError("a 0-d array cannot be saved in MXNet's format under legacy shapes "
                          "(there a shape () means 'unknown'); save it inside "
                          "`with mx.np_shape(True):`, or reshape it to (1,)")
    return (struct.pack("<Ii", magic, 0) + _shape_bytes(array.shape) + struct.pack("<ii", *_CPU)
            + struct.pack("<i", _flag(array.dtype)) + _element_bytes(array))


def _sparse_record(storage, magic):
    aux = list(storage.aux)
    head = struct.pack("<Ii", magic, _STYPE_IDS[storage.stype])
    head += _shape_bytes(storage.data.shape) + _shape_bytes(storage.shape)
    head += struct.pack("<ii", *_CPU) + struct.pack("<i", _flag(storage.dtype))
    for a in aux:
        head += struct.pack("<i", _flag(a.dtype)) + _shape_bytes(a.shape)
    return head + b"".join(_element_bytes(a) for a in [storage.data] + aux)


def _shape_bytes(shape):
    return struct.pack(f"<i{len(shape)}q", len(shape), *shape)


def _flag(dtype):
    try:
        return _FLAG_OF[np.dtype(dtype).newbyteorder("=")]
    except KeyError:
        raise FormatError(f"MXNet's format has no type flag for dtype {np.dtype(dtype)}; "
                          "cast the array to a numeric dtype first") from None


def _element_bytes(array):
    array = np.asarray(array, order="C")
    return array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()


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
