"""mx.recordio: the dmlc RecordIO byte format, the .idx index, pack/unpack and errors."""
import pickle
import struct

import numpy as np
import pytest

from minigluon import image, recordio
from minigluon.recordio import IRHeader, RecordIOError

MAGIC = 0xced7230a
MAGIC_BYTES = struct.pack("<I", MAGIC)


def reference_read(path):
    """An independent, straightforward reader of dmlc RecordIO files."""
    with open(path, "rb") as f:
        raw = f.read()
    records, pos, parts = [], 0, []
    while pos < len(raw):
        magic, lrec = struct.unpack_from("<II", raw, pos)
        assert magic == MAGIC
        flag, length = lrec >> 29, lrec & ((1 << 29) - 1)
        parts.append(raw[pos + 8:pos + 8 + length])
        pos += 8 + length + (-length % 4)
        if flag in (0, 3):
            records.append(MAGIC_BYTES.join(parts))
            parts = []
    return records


PAYLOADS = [b"", b"a", b"ab", b"abc", b"abcd", b"abcde", bytes(range(256)) * 3,
            MAGIC_BYTES,                                  # the whole payload is the magic
            b"1234" + MAGIC_BYTES + b"5678",              # aligned: split into 2 parts
            b"12" + MAGIC_BYTES + b"56",                  # unaligned: no split
            MAGIC_BYTES * 3 + b"tail",                    # consecutive aligned magics
            b"head" + MAGIC_BYTES]


def write_all(path, payloads):
    writer = recordio.MXRecordIO(str(path), "w")
    for p in payloads:
        writer.write(p)
    writer.close()


def test_round_trip_and_reference_reader_agree(tmp_path):
    path = tmp_path / "a.rec"
    write_all(path, PAYLOADS)
    reader = recordio.MXRecordIO(str(path), "r")
    got = []
    while (rec := reader.read()) is not None:
        got.append(rec)
    assert got == PAYLOADS
    assert reference_read(path) == PAYLOADS
    reader.reset()
    assert reader.read() == PAYLOADS[0]
    reader.close()


def test_bytes_on_disk_follow_the_dmlc_layout(tmp_path):
    path = tmp_path / "b.rec"
    write_all(path, [b"hello", b"1234" + MAGIC_BYTES + b"5678" + MAGIC_BYTES + b"9"])
    raw = path.read_bytes()
    # record 1: magic, lrec = length 5 with flag 0, payload, 3 zero bytes of padding
    assert raw[:16] == MAGIC_BYTES + struct.pack("<I", 5) + b"hello\0\0\0"
    # record 2: three parts with flags 1, 2, 3; the magic words themselves are dropped
    heads = [struct.unpack_from("<II", raw, off) for off in (16, 28, 40)]
    assert [(m, lrec >> 29, lrec & 0x1fffffff) for m, lrec in heads] == \
        [(MAGIC, 1, 4), (MAGIC, 2, 4), (MAGIC, 3, 1)]
    assert raw[36:40] == b"5678" and raw[48:] == b"9\0\0\0"


def test_tell_gives_record_offsets(tmp_path):
    writer = recordio.MXRecordIO(str(tmp_path / "c.rec"), "w")
    offsets = []
    for p in (b"x" * 3, b"y" * 8, b""):
        offsets.append(writer.tell())
        writer.write(p)
    writer.close()
    assert offsets == [0, 12, 28]


def test_indexed_records_and_index_text_format(tmp_path):
    idx, rec = str(tmp_path / "d.idx"), str(tmp_path / "d.rec")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    for key in (3, 1, 2):
        writer.write_idx(key, b"value-%d" % key)
    writer.close()
    assert (tmp_path / "d.idx").read_text() == "3\t0\n1\t16\n2\t32\n"
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    assert reader.keys == [3, 1, 2]
    assert reader.read_idx(2) == b"value-2" and reader.read_idx(3) == b"value-3"
    with pytest.raises(RecordIOError, match="key 9"):
        reader.read_idx(9)
    clone = pickle.loads(pickle.dumps(reader))       # DataLoader workers pickle datasets
    assert clone.read_idx(1) == b"value-1"
    reader.close()
    clone.close()


def test_truncated_and_corrupt_files_name_file_and_offset(tmp_path):
    path = tmp_path / "e.rec"
    write_all(path, [b"first", b"second record"])
    raw = path.read_bytes()
    (tmp_path / "cut.rec").write_bytes(raw[:-6])
    reader = recordio.MXRecordIO(str(tmp_path / "cut.rec"), "r")
    assert reader.read() == b"first"
    with pytest.raises(RecordIOError, match=r"cut\.rec.*offset 16.*ends after"):
        reader.read()
    (tmp_path / "bad.rec").write_bytes(raw[:16] + b"\x00" * 4 + raw[20:])
    reader = recordio.MXRecordIO(str(tmp_path / "bad.rec"), "r")
    reader.read()
    with pytest.raises(RecordIOError, match=r"bad\.rec.*offset 16.*magic"):
        reader.read()
    (tmp_path / "head.rec").write_bytes(raw[:20])
    reader = recordio.MXRecordIO(str(tmp_path / "head.rec"), "r")
    reader.read()
    with pytest.raises(RecordIOError, match="truncated"):
        reader.read()


def test_wrong_mode_and_missing_file_are_clear(tmp_path):
    with pytest.raises(RecordIOError, match="flag"):
        recordio.MXRecordIO(str(tmp_path / "f.rec"), "a")
    with pytest.raises(RecordIOError, match="cannot open"):
        recordio.MXRecordIO(str(tmp_path / "missing.rec"), "r")
    writer = recordio.MXRecordIO(str(tmp_path / "g.rec"), "w")
    with pytest.raises(RecordIOError, match="'r'"):
        writer.read()
    writer.close()


def test_pack_unpack_scalar_and_vector_labels():
    header, payload = recordio.unpack(recordio.pack(IRHeader(0, 4.5, 17, 2), b"img"))
    assert header == IRHeader(0, 4.5, 17, 2) and payload == b"img"
    packed = recordio.pack(IRHeader(0, [1.0, 2.5, -3.0], 5, 0), b"xyz")
    assert len(packed) == 24 + 12 + 3
    header, payload = recordio.unpack(packed)
    assert header.flag == 3 and payload == b"xyz"
    np.testing.assert_array_equal(header.label, np.array([1.0, 2.5, -3.0], np.float32))


def test_pack_img_stores_bgr_like_opencv():
    bgr = np.random.default_rng(0).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    packed = recordio.pack_img(IRHeader(0, 1.0, 0, 0), bgr, img_fmt=".png")
    header, back = recordio.unpack_img(packed)
    assert header.label == 1.0
    np.testing.assert_array_equal(back, bgr)
    # the stored file is a normal PNG: decoding it as RGB gives the channels reversed
    rgb = image.imdecode(recordio.unpack(packed)[1]).asnumpy()
    np.testing.assert_array_equal(rgb, bgr[:, :, ::-1])
    gray = recordio.unpack_img(packed, iscolor=0)[1]
    assert gray.shape == (6, 5)
