"""mx.nd.save / mx.nd.load: exact round trips of lists and dicts over every dtype and odd
shape, and a clear FormatError (an MXNetError) for anything that is not a valid file."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import MXNetError

DTYPES = ["float32", "float16", "float64", "int32", "int64", "uint8", "int8", "bool"]
SHAPES = [(2, 3), (), (0,), (3, 0, 2), (1,), (2, 1, 4)]


def _sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 50).astype(dtype)


def _same(a, b):
    assert isinstance(a, nd.NDArray)
    assert a.shape == b.shape and a.dtype == b.dtype and a.context == mx.cpu(0)
    np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_list_round_trip(tmp_path, dtype):
    arrays = [nd.array(_sample(s, dtype, i), dtype=dtype) for i, s in enumerate(SHAPES)]
    fname = tmp_path / "arrays.params"
    nd.save(str(fname), arrays)
    back = nd.load(str(fname))
    assert isinstance(back, list) and len(back) == len(arrays)
    for a, b in zip(back, arrays):
        _same(a, b)


def test_dict_round_trip_mixed_dtypes(tmp_path):
    arrays = {f"w{i}_{d}": nd.array(_sample(s, d, i), dtype=d)
              for i, (s, d) in enumerate(zip(SHAPES * 2, DTYPES))}
    arrays["unicodé name"] = nd.array([1.5])
    fname = tmp_path / "arrays.params"
    nd.save(fname, arrays)
    back = nd.load(fname)
    assert isinstance(back, dict) and list(back) == list(arrays)
    for k in arrays:
        _same(back[k], arrays[k])


def test_single_array_empty_containers_and_other_devices():
    x = nd.array([[1, 2], [3, 4]], ctx=mx.cpu(1))
    back = nd.load_frombuffer(nd.save_to_bytes(x))
    assert isinstance(back, list) and len(back) == 1
    _same(back[0], x.as_in_context(mx.cpu(0)))
    assert nd.load_frombuffer(nd.save_to_bytes([])) == []
    assert nd.load_frombuffer(nd.save_to_bytes({})) == {}
    strided = nd.array(np.arange(12.0).reshape(3, 4))[:, ::-2]
    _same(nd.load_frombuffer(nd.save_to_bytes([strided]))[0], strided)


def test_loaded_arrays_are_writable_and_independent():
    payload = nd.save_to_bytes([nd.ones((2,))])
    a = nd.load_frombuffer(payload)[0]
    a[0] = 5
    a += 1
    np.testing.assert_array_equal(a.asnumpy(), [6, 2])
    np.testing.assert_array_equal(nd.load_frombuffer(payload)[0].asnumpy(), [1, 1])


def test_save_rejects_bad_arguments(tmp_path):
    for bad in ([nd.ones((1,)), np.ones(1)], {"a": np.ones(1)}, {1: nd.ones((1,))}, "x", 3):
        with pytest.raises(MXNetError, match="save"):
            nd.save(str(tmp_path / "bad"), bad)


def test_truncated_files_raise_format_errors(tmp_path):
    payload = nd.save_to_bytes({"a": nd.array(_sample((3, 4), "float32")),
                                "b": nd.array([1, 2], dtype="int32")})
    for cut in range(len(payload)):
        with pytest.raises(MXNetError) as err:
            nd.load_frombuffer(payload[:cut])
        assert "truncated" in str(err.value) or "magic" in str(err.value)
    fname = tmp_path / "short.params"
    fname.write_bytes(payload[:-3])
    with pytest.raises(MXNetError, match="short.params"):
        nd.load(str(fname))


def test_corrupt_files_raise_format_errors():
    with pytest.raises(MXNetError, match="magic"):
        nd.load_frombuffer(b"PK\x03\x04 this is a zip file, not arrays")
    payload = nd.save_to_bytes([nd.ones((2, 2))])
    with pytest.raises(MXNetError, match="unexpected bytes"):
        nd.load_frombuffer(payload + b"\0")
    bad_version = bytearray(payload)
    bad_version[8] = 99
    with pytest.raises(MXNetError, match="version"):
        nd.load_frombuffer(bytes(bad_version))


def test_every_single_byte_corruption_loads_or_raises_a_format_error():
    payload = nd.save_to_bytes({"weight": nd.array(_sample((2, 3), "float32")),
                                "idx": nd.array([1, 2, 3], dtype="int64"),
                                "flag": nd.array([True, False], dtype="bool")})
    for pos in range(len(payload)):
        for value in (0x00, 0xFF, payload[pos] ^ 0x80):
            corrupt = bytearray(payload)
            corrupt[pos] = value
            try:
                out = nd.load_frombuffer(bytes(corrupt))
            except MXNetError:
                continue
            assert isinstance(out, (list, dict))


def test_absurd_shapes_raise_format_errors():
    import struct
    head = b"MGNDARR\0" + struct.pack("<IIQ", 1, 0, 1)
    for shape, nbytes in [((0, 2 ** 63), 0), ((2 ** 63, 2 ** 63), 16), ((2 ** 64 - 1,), 4)]:
        entry = (struct.pack("<I", 0) + struct.pack("<B", 3) + b"<f4"
                 + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
                 + struct.pack("<Q", nbytes) + b"\0" * nbytes)
        with pytest.raises(MXNetError):
            nd.load_frombuffer(head + entry)


def test_scalars_and_zero_size_arrays_round_trip_under_numpy_shapes(tmp_path):
    path = str(tmp_path / "np.nd")
    with mx.np_shape(True):
        arrays = [nd.array(np.float32(2.5)), nd.zeros((2, 0, 1)), nd.array(np.array(7), dtype="int64"),
                  nd.zeros((0,)), nd.array([[1, 2]])]
        assert arrays[0].shape == () and arrays[2].shape == ()
        nd.save(path, arrays)
        back = nd.load(path)
    assert [a.shape for a in back] == [(), (2, 0, 1), (), (0,), (1, 2)]
    assert back[0].asscalar() == 2.5 and back[2].dtype == np.int64


def test_files_load_only_under_the_shape_semantics_they_were_saved_in(tmp_path):
    """As MXNet, both ways: a file saved with NumPy shapes on needs them on to load, and a
    legacy file (including a version-1 file, which predates the flag) needs them off."""
    legacy, numpy_shapes = str(tmp_path / "legacy.nd"), str(tmp_path / "np.nd")
    nd.save(legacy, [nd.zeros((2, 0))])
    with mx.np_shape(True):
        nd.save(numpy_shapes, {"w": nd.zeros((0, 4))})
        with pytest.raises(MXNetError, match=r"legacy shape semantics.*np_shape\(False\)"):
            nd.load(legacy)
    with pytest.raises(MXNetError, match=r"legacy\.nd|np\.nd") as err:
        nd.load(numpy_shapes)
    assert "np.nd: the arrays were saved with NumPy shape semantics on" in str(err.value)
    assert nd.load(legacy)[0].shape == (2, 0)
    import struct
    version_1 = b"MGNDARR\0" + struct.pack("<IIQ", 1, 0, 1) + (
        struct.pack("<I", 0) + struct.pack("<B", 3) + b"<f4" + struct.pack("<IQ", 1, 2)
        + struct.pack("<Q", 8) + np.array([1, 2], "<f4").tobytes())
    np.testing.assert_array_equal(nd.load_frombuffer(version_1)[0].asnumpy(), [1, 2])
    with mx.np_shape(True), pytest.raises(MXNetError, match="legacy shape semantics"):
        nd.load_frombuffer(version_1)
