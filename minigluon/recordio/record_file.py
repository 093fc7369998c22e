"""RecordIO files (`.rec`) and their `.idx` indexes: `MXRecordIO` reads or writes records
in order, `MXIndexedRecordIO` also by key. See the package doc for the on-disk framing."""
import os
import struct

from .errors import RecordIOError

__all__ = ["MXRecordIO", "MXIndexedRecordIO"]

_MAGIC = 0xced7230a
_MAGIC_BYTES = struct.pack("<I", _MAGIC)
_MAX_LENGTH = (1 << 29) - 1
_FULL, _FIRST, _MIDDLE, _LAST = 0, 1, 2, 3


def _pad(length):
    return (4 - length % 4) % 4


def _split_at_magic(buf):
    """The parts of `buf` between 4-byte aligned occurrences of the magic word."""
    parts, start, pos = [], 0, buf.find(_MAGIC_BYTES)
    while pos != -1:
        if pos % 4 == 0:
            parts.append(buf[start:pos])
            start = pos + 4
            pos = buf.find(_MAGIC_BYTES, start)
        else:
            pos = buf.find(_MAGIC_BYTES, pos + 1)
    parts.append(buf[start:])
    return parts


def _encode(buf):
    """The bytes that store record `buf`, split into continuation parts where needed."""
    if len(buf) > _MAX_LENGTH:
        raise RecordIOError(f"a RecordIO record holds at most {_MAX_LENGTH} bytes, got "
                            f"{len(buf)}; split the payload over several records")
    parts = _split_at_magic(buf)
    if len(parts) == 1:
        flags = [_FULL]
    else:
        flags = [_FIRST] + [_MIDDLE] * (len(parts) - 2) + [_LAST]
    out = []
    for flag, part in zip(flags, parts):
        out.append(struct.pack("<II", _MAGIC, (flag << 29) | len(part)))
        out.append(part)
    out.append(b"\0" * _pad(len(buf)))   # earlier parts are multiples of 4 by construction
    return b"".join(out)


class MXRecordIO:
    """Sequential reader or writer of a RecordIO file.

    Parameters
    ----------
    uri : str
        Path of the `.rec` file.
    flag : str
        'r' to read, 'w' to write (truncates the file).

    Example::

        writer = mx.recordio.MXRecordIO('tmp.rec', 'w')
        for i in range(3):
            writer.write(b'record_%d' % i)
        writer.close()
        reader = mx.recordio.MXRecordIO('tmp.rec', 'r')
        reader.read()     # b'record_0'
    """

    def __init__(self, uri, flag):
        if flag not in ("r", "w"):
            raise RecordIOError(f"MXRecordIO flag must be 'r' or 'w', got {flag!r}")
        self.uri = os.fspath(uri)
        self.flag = flag
        self.handle = None
        self.is_open = False
        self.open()

    def open(self):
        """Open the file (done by the constructor; after close(), opens it again)."""
        mode = "wb" if self.flag == "w" else "rb"
        try:
            self.handle = open(self.uri, mode)
        except OSError as err:
            raise RecordIOError(f"cannot open RecordIO file {self.uri!r} for "
                                f"{'writing' if self.flag == 'w' else 'reading'}: "
                                f"{err.strerror or err}") from err
        self.writable = self.flag == "w"
        self.is_open = True
        self.pid = os.getpid()

    def close(self):
        """Close the file; further reads or writes need open() or reset()."""
        if self.is_open:
            self.handle.close()
        self.handle = None
        self.is_open = False

    def reset(self):
        """Go back to the first record (a writer starts the file anew, as in MXNet)."""
        self.close()
        self.open()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the file object may already be gone
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        # a file object cannot be pickled (DataLoader workers): reopen on the other side
        state = dict(self.__dict__)
        state["handle"] = None
        return state

    def __setstate__(self, state):
        was_open = state["is_open"]
        self.__dict__.update(state)
        self.is_open = False
        if was_open:
            if self.flag == "w":
                raise RecordIOError(f"cannot unpickle an open RecordIO writer of {self.uri!r}")
            self.open()

    def _check_open(self, writing):
        if not self.is_open:
            raise RecordIOError(f"RecordIO file {self.uri!r} is closed; call open() or reset()")
        if writing != self.writable:
            need = "'w'" if writing else "'r'"
            raise RecordIOError(f"RecordIO file {self.uri!r} was opened with flag "
                                f"{self.flag!r}; {'write' if writing else 'read'} needs {need}")
        if not writing and self.pid != os.getpid():
            # a forked worker shares the parent's file offset: give it its own file object
            offset = self.handle.tell()
            self.handle = open(self.uri, "rb")
            self.handle.seek(offset)
            self.pid = os.getpid()

    def tell(self):
        """Byte offset where the next record will be read or written."""
        if not self.is_open:
            raise RecordIOError(f"RecordIO file {self.uri!r} is closed; call open() or reset()")
        return self.handle.tell()

    def write(self, buf):
        """Append one record (bytes-like)."""
        self._check_open(writing=True)
        self.handle.write(_encode(bytes(buf)))

    def read(self):
        """The next record as bytes, or None at the end of the file."""
        self._check_open(writing=False)
        parts = []
        while True:
            offset = self.handle.tell()
            head = self.handle.read(8)
            if not head and not parts:
                return None
            flag, length = self._parse_head(head, offset, in_record=bool(parts))
            payload = self.handle.read(length + _pad(length))
            if len(payload) < length + _pad(length):
                raise self._corrupt(offset, f"the record announces {length} bytes but the "
                                            f"file ends after {len(payload)}")
            parts.append(payload[:length])
            if flag in (_FULL, _LAST):
                return _MAGIC_BYTES.join(parts)

    def _parse_head(self, head, offset, in_record):
        if len(head) < 8:
            what = "in the middle of a multi-part record" if in_record else "in a record header"
            raise self._corrupt(offset, f"the file ends {what} (truncated file)")
        magic, lrec = struct.unpack("<II", head)
        if magic != _MAGIC:
            raise self._corrupt(offset, f"expected the magic number 0x{_MAGIC:08x}, found "
                                        f"0x{magic:08x} (not a RecordIO file, or a wrong "
                                        "offset in the .idx file)")
        flag, length = lrec >> 29, lrec & _MAX_LENGTH
        if in_record != (flag in (_MIDDLE, _LAST)) or flag > _LAST:
            raise self._corrupt(offset, f"unexpected continuation flag {flag}")
        return flag, length

    def _corrupt(self, offset, what):
        return RecordIOError(f"corrupt RecordIO file {self.uri!r} at byte offset {offset}: "
                             f"{what}")


class MXIndexedRecordIO(MXRecordIO):
    """RecordIO file with an index (`.idx`) for random access by key.

    Parameters
    ----------
    idx_path : str
        Path of the index file (text, one `key<TAB>offset` line per record).
    uri : str
        Path of the `.rec` file.
    flag : str
        'r' to read, 'w' to write.
    key_type : type
        How keys in the index file are parsed (int by default).

    Example::

        rec = mx.recordio.MXIndexedRecordIO('tmp.idx', 'tmp.rec', 'r')
        rec.keys            # [0, 1, 2]
        rec.read_idx(2)
    """

    def __init__(self, idx_path, uri, flag, key_type=int):
        self.idx_path = os.fspath(idx_path)
        self.idx = {}
        self.keys = []
        self.key_type = key_type
        self.fidx = None
        super().__init__(uri, flag)

    def open(self):
        super().open()
        self.idx, self.keys = {}, []
        if self.writable:
            self.fidx = open(self.idx_path, "w")
            return
        self.fidx = None
        self._load_index()

    def _load_index(self):
        try:
            with open(self.idx_path) as fin:
                lines = fin.read().splitlines()
        except OSError as err:
            raise RecordIOError(f"cannot read the RecordIO index {self.idx_path!r}: "
                                f"{err.strerror or err}") from err
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            fields = line.strip().split("\t")
            try:
                key, pos = self.key_type(fields[0]), int(fields[1])
            except (IndexError, ValueError):
                raise RecordIOError(f"{self.idx_path}:{lineno}: expected 'key<TAB>offset', "
                                    f"got {line!r}") from None
            self.idx[key] = pos
            self.keys.append(key)

    def close(self):
        if self.fidx is not None:
            self.fidx.close()
            self.fidx = None
        super().close()

    def __getstate__(self):
        state = super().__getstate__()
        state["fidx"] = None
        return state

    def seek(self, idx):
        """Move the reader to the record with key `idx`."""
        self._check_open(writing=False)
        try:
            pos = self.idx[idx]
        except KeyError:
            raise RecordIOError(f"key {idx!r} is not in the index {self.idx_path!r} "
                                f"({len(self.keys)} keys)") from None
        self.handle.seek(pos)

    def read_idx(self, idx):
        """The record with key `idx`."""
        self.seek(idx)
        record = self.read()
        if record is None:
            raise RecordIOError(f"{self.idx_path!r} points key {idx!r} at byte "
                                f"{self.idx[idx]}, past the end of {self.uri!r}")
        return record

    def write_idx(self, idx, buf):
        """Append record `buf` under key `idx` and note its offset in the index."""
        key = self.key_type(idx)
        pos = self.tell()
        self.write(buf)
        self.fidx.write(f"{key}\t{pos}\n")
        self.idx[key] = pos
        self.keys.append(key)
