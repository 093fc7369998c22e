"""Reading MXNet's binary NDArray format (mxnet_format.py): files built here byte by byte
from the documented layout, in each record version, as lists and dicts, loaded through
mx.nd.load / load_frombuffer and through unpickling an MXNet NDArray's state."""
import struct

import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.ndarray.mxnet_format import FormatError

V1, V2, V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
FLAGS = {np.float32: 0, np.float64: 1, np.float16: 2, np.uint8: 3, np.int32: 4, np.int64: 6}


def record(a, version=V2, stype=0, device=(1, 0)):
    """One record of the NumPy array `a` in MXNet's layout."""
    a = np.asarray(a, order="C")    # (ascontiguousarray would make a 0-d array 1-D)
    if version == 0:
        head = struct.pack(f"<I{a.ndim}I", a.ndim, *a.shape)
    else:
        head = struct.pack("<I", version)
        if version in (V2, V3):
            head += struct.pack("<i", stype)
        head += struct.pack(f"<i{a.ndim}q", a.ndim, *a.shape)
    flag = FLAGS[a.dtype.type]
    return head + struct.pack("<iii", *device, flag) + a.astype(a.dtype.newbyteorder("<")).tobytes()


def mxnet_file(arrays, names=()):
    body = struct.pack("<QQQ", 0x112, 0, len(arrays)) + b"".join(record(a, v) for a, v in arrays)
    body += struct.pack("<Q", len(names))
    for n in names:
        body += struct.pack("<Q", len(n)) + n.encode()
    return body


ARRAYS = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, -2], dtype=np.int64),
          np.linspace(0, 1, 4).astype(np.float16), np.arange(3, dtype=np.uint8)]


@pytest.mark.parametrize("version", [0, V1, V2])
def test_list_file_in_each_record_version(version):
    back = nd.load_frombuffer(mxnet_file([(a, version) for a in ARRAYS]))
    assert isinstance(back, list) and len(back) == len(ARRAYS)
    for got, want in zip(back, ARRAYS):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.asnumpy(), want)


def test_dict_file_from_disk(tmp_path):
    path = tmp_path / "net.params"
    path.write_bytes(mxnet_file([(ARRAYS[0], V2), (ARRAYS[1], V2)], names=["arg:w", "aux:m"]))
    back = nd.load(str(path))
    assert sorted(back) == ["arg:w", "aux:m"]
    np.testing.assert_array_equal(back["aux:m"].asnumpy(), ARRAYS[1])


def test_v3_scalar_and_gpu_device_load_on_cpu():
    with mx.np_shape(True):     # v3 records are NumPy-shape records (see the next test)
        (got,) = nd.load_frombuffer(mxnet_file([(np.array(2.5, dtype=np.float64), V3)]))
    assert got.shape == () and got.asscalar() == 2.5
    x = nd.zeros((3,))
    x.__setstate__({"handle": bytearray(record(ARRAYS[0], V2, device=(2, 0)))})
    assert x.context.device_type == "cpu"
    np.testing.assert_array_equal(x.asnumpy(), ARRAYS[0])


def test_records_load_only_under_the_shape_semantics_they_were_saved_in():
    """As MXNet: a v3 (NumPy shape) record needs NumPy shape semantics on, older ones off."""
    v3 = mxnet_file([(np.zeros((2, 0), np.float32), V3)])
    with pytest.raises(mx.MXNetError, match=r"saved with NumPy shape semantics.*np_shape\(True\)"):
        nd.load_frombuffer(v3)
    with mx.np_shape(True):
        (got,) = nd.load_frombuffer(v3)
        assert got.shape == (2, 0)
        with pytest.raises(mx.MXNetError, match=r"legacy shape semantics.*np_shape\(False\)"):
            nd.load_frombuffer(mxnet_file([(ARRAYS[0], V2)]))


def test_bad_files_raise_format_error_naming_the_problem():
    good = mxnet_file([(ARRAYS[0], V2)])
    with pytest.raises(FormatError, match="truncated while reading an array's data"):
        nd.load_frombuffer(good[:-20])
    sparse = struct.pack("<QQQ", 0x112, 0, 1) + record(ARRAYS[0], V2, stype=3)[:8] + b"\0" * 8
    with pytest.raises(FormatError, match="unknown storage type 3"):
        nd.load_frombuffer(sparse)
    with pytest.raises(FormatError, match="2 names for 1 arrays"):
        nd.load_frombuffer(mxnet_file([(ARRAYS[0], V2)], names=["a", "b"]))
