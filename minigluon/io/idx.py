"""The IDX file format of MNIST and Fashion-MNIST: a magic number giving the element type
and rank, big-endian dimensions, then the elements. Read by `mx.io.MNISTIter` and by
`gluon.data.vision.MNIST`."""
import gzip
import struct
import zlib

import numpy as np

from .format_error import DatasetFormatError

__all__ = ["read_idx"]


def read_idx(path, ndim):
    """An IDX file of unsigned bytes (gzip-compressed when its name ends in .gz)."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as fin:
            raw = fin.read()
    except (OSError, EOFError, zlib.error) as err:
        raise DatasetFormatError(f"{path}: unreadable ({err}); the file is corrupt or "
                                 "truncated: delete it and download it again") from None
    header = 4 + 4 * ndim
    if len(raw) < header or raw[:4] != bytes([0, 0, 0x08, ndim]):
        raise DatasetFormatError(f"{path}: not an IDX file of unsigned bytes with {ndim} "
                                 f"dimension(s) (starts with {raw[:4].hex() or 'nothing'})")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    count = int(np.prod(dims))
    if len(raw) - header != count:
        raise DatasetFormatError(f"{path}: the header announces shape {dims} ({count} bytes) "
                                 f"but {len(raw) - header} bytes follow; the file is truncated "
                                 "or corrupt")
    return np.frombuffer(raw, np.uint8, count, header).reshape(dims)
