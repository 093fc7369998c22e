"""`mx.recordio`: read and write MXNet RecordIO files (`.rec`) and their `.idx` indexes.

The on-disk format is dmlc-core's, so files written here are read by MXNet (`ImageRecordIter`,
`im2rec.py`) and the other way round. Each record is stored as

    uint32 magic (0xced7230a) | uint32 lrec | payload | zero padding to a multiple of 4 bytes

all little-endian, where `lrec` holds the payload length in its lower 29 bits and a
continuation flag in its upper 3 bits: 0 a whole record, 1 the first part, 2 a middle part,
3 the last part. The writer splits a record wherever the magic number occurs at a 4-byte
aligned offset of the payload (dropping those 4 bytes); the reader puts the magic back
between the parts. That keeps the magic word a reliable record boundary for splitting a
file between readers.

The `.idx` file is text, one `key<TAB>byte offset` line per record.

`record_file` holds the file format and its readers/writers, `payload` the labelled-sample
records (IRHeader, pack, pack_img) stored in it.

Records of 2**29 bytes or more are out of scope (MXNet refuses them too).

Example::

    rec = mx.recordio.MXIndexedRecordIO('data.idx', 'data.rec', 'w')
    rec.write_idx(0, mx.recordio.pack(mx.recordio.IRHeader(0, 3.0, 0, 0), b'payload'))
    rec.close()
"""
from .errors import RecordIOError
from .payload import IRHeader, pack, pack_img, unpack, unpack_img
from .record_file import MXIndexedRecordIO, MXRecordIO

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img", "RecordIOError"]
