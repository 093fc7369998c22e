"""`mx.nd.save` / `mx.nd.load`: lists and dicts of arrays in a small binary format.

A file holding a sparse array is written in MXNet's own format instead (mxnet_format.py),
which carries storage types; `load` reads both. minigluon's format (docs/ndarray-format.md)
is little-endian and pickle-free:

    magic  b"MGNDARR\\0"          8 bytes
    version                      uint32 (2; 1 has no flags field)
    kind                         uint32 (0 = list, 1 = dict)
    flags                        uint32, bit 0: saved with NumPy shape semantics
    count                        uint64
    count entries, each:
        name length, name        uint32, UTF-8 bytes (length 0 in a list)
        dtype length, dtype      uint8, ASCII NumPy dtype string such as '<f4'
        ndim, shape              uint32, ndim x uint64
        nbytes, data             uint64, the elements in C order
"""
import io
import math
import struct

import numpy as np

from ..base import MXNetError
from ..context import cpu
from . import mxnet_format, shape_semantics
from .mxnet_format import FormatError  # noqa: F401  (raised here too; mx.nd's error for files)
from . import registry, sparse_storage
from .ndarray import NDArray

MAGIC = b"MGNDARR\0"
VERSION = 2
NP_SHAPE_FLAG = 1       # flags bit: the arrays were saved with NumPy shape semantics on




def _entries(data):
    if isinstance(data, NDArray):
        return 0, [("", data)]
    if isinstance(data, dict):
        for k, v in data.items():
            if not isinstance(k, str) or not isinstance(v, NDArray):
                raise MXNetError(f"save: a dict must map str to NDArray, got {k!r}: "
                                 f"{type(v).__name__}")
        return 1, list(data.items())
    if isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            if not isinstance(v, NDArray):
                raise MXNetError(f"save: item {i} of the list is a {type(v).__name__}, "
                                 "not an NDArray")
        return 0, [("", v) for v in data]
    raise MXNetError(f"save: expected an NDArray, a list of them or a dict of str to them, "
                     f"got {type(data).__name__}")


def save_to_bytes(data):
    """Serialize an NDArray, a list of them, or a dict of str to them, to bytes (in MXNet's
    format when one of them is sparse)."""
    kind, entries = _entries(data)
    if any(arr.stype != "default" for _, arr in entries):
        return _to_mxnet(kind, entries)
    out = io.BytesIO()
    flags = NP_SHAPE_FLAG if shape_semantics.np_shape_on() else 0
    out.write(MAGIC + struct.pack("<IIIQ", VERSION, kind, flags, len(entries)))
    for name, arr in entries:
        raw = np.asarray(arr.asnumpy(), order="C")    # (ascontiguousarray makes 0-d 1-D)
        dt = raw.dtype.newbyteorder("<") if raw.dtype.byteorder == ">" else raw.dtype
        raw = raw.astype(dt, copy=False)
        name_b, dtype_b = name.encode("utf-8"), dt.str.encode("ascii")
        out.write(struct.pack("<I", len(name_b)) + name_b)
        out.write(struct.pack("<B", len(dtype_b)) + dtype_b)
        out.write(struct.pack("<I", raw.ndim) + struct.pack(f"<{raw.ndim}Q", *raw.shape))
        out.write(struct.pack("<Q", raw.nbytes))
        out.write(raw.tobytes())
    return out.getvalue()


def _to_mxnet(kind, entries):
    """The entries in MXNet's format, every array on the host."""
    arrays = [_on_host(arr) for _, arr in entries]
    names = [name for name, _ in entries] if kind == 1 else []
    return mxnet_format.write_file(arrays, names)


def _on_host(arr):
    """The array's NumPy data, or its sparse container with NumPy components."""
    raw = arr._data
    if sparse_storage.is_sparse(raw):
        return raw.map(lambda part: NDArray(part, arr.context).asnumpy())
    return arr.asnumpy()


def save(fname, data):
    """Write arrays to `fname` (see save_to_bytes)."""
    payload = save_to_bytes(data)
    with open(fname, "wb") as f:
        f.write(payload)


class _Reader:
    def __init__(self, buf, source):
        self.buf, self.pos, self.source = memoryview(buf), 0, source

    def take(self, n, what):
        if self.pos + n > len(self.buf):
            raise FormatError(f"{self.source}: truncated while reading {what} at byte {self.pos}")
        chunk = self.buf[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt, what):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))


def load_frombuffer(buf, source="buffer"):
    """Read arrays saved by `save_to_bytes`; returns a list or a dict of NDArrays on cpu."""
    if mxnet_format.is_mxnet_file(buf):
        return _from_mxnet(mxnet_format.read_file(buf, source))
    r = _Reader(buf, source)
    if bytes(r.take(len(MAGIC), "the header")) != MAGIC:
        raise FormatError(f"{source}: not an array file (bad magic); it must be written by "
                          "mx.nd.save of minigluon or of MXNet")
    version, kind = r.unpack("<II", "the header")
    if version not in (1, VERSION) or kind not in (0, 1):
        raise FormatError(f"{source}: unsupported version {version} or kind {kind}")
    # version 1 files predate the flags: they were saved with legacy shape semantics
    (flags,) = r.unpack("<I", "the header") if version == VERSION else (0,)
    (count,) = r.unpack("<Q", "the header")
    shape_semantics.check_loadable(bool(flags & NP_SHAPE_FLAG), source)
    items = [_read_entry(r) for _ in range(count)]
    if r.pos != len(r.buf):
        raise FormatError(f"{source}: {len(r.buf) - r.pos} unexpected bytes after the last array")
    if kind == 1:
        return {name: arr for name, arr in items}
    return [arr for _, arr in items]


def _from_mxnet(arrays):
    """The arrays of an MXNet file (NumPy arrays and sparse containers) as NDArrays on cpu,
    in a list or a dict."""
    if isinstance(arrays, dict):
        return {name: registry.wrap(a, cpu()) for name, a in arrays.items()}
    return [registry.wrap(a, cpu()) for a in arrays]


def _read_entry(r):
    (n,) = r.unpack("<I", "a name length")
    raw_name = bytes(r.take(n, "a name"))
    (n,) = r.unpack("<B", "a dtype length")
    raw_dtype = bytes(r.take(n, "a dtype"))
    try:
        name = raw_name.decode("utf-8")
        dtype = np.dtype(raw_dtype.decode("ascii"))
    except (TypeError, ValueError) as err:   # UnicodeDecodeError is a ValueError
        raise FormatError(f"{r.source}: bad name or dtype {raw_dtype!r} in entry "
                          f"{raw_name!r}: {err}") from None
    if dtype.hasobject:
        raise FormatError(f"{r.source}: object dtype in entry {name!r} is not allowed")
    (ndim,) = r.unpack("<I", "ndim")
    shape = r.unpack(f"<{ndim}Q", "a shape")
    (nbytes,) = r.unpack("<Q", "a data length")
    if nbytes != math.prod(shape) * dtype.itemsize:   # Python ints: no overflow
        raise FormatError(f"{r.source}: entry {name!r} has {nbytes} bytes of data, which does "
                          f"not fit shape {shape} of {dtype}")
    chunk = r.take(nbytes, f"the data of {name!r}")
    try:
        data = np.frombuffer(chunk, dtype=dtype).reshape(shape)
    except ValueError as err:   # e.g. an empty shape with a dimension too large for NumPy
        raise FormatError(f"{r.source}: entry {name!r} has an invalid shape {shape}: "
                          f"{err}") from None
    return name, NDArray(data.copy(), cpu())


def load(fname):
    """Read arrays written by `mx.nd.save`: a list, or a dict when a dict was saved."""
    with open(fname, "rb") as f:
        return load_frombuffer(f.read(), source=str(fname))
