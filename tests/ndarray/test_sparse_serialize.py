"""mx.nd.save / mx.nd.load of row_sparse and csr arrays, in MXNet's binary format: exact
round trips, and the bytes checked field by field against docs/ndarray-format.md."""
import struct

import numpy as np
import pytest

import minigluon as mx
from minigluon.ndarray import sparse
from minigluon.ndarray.mxnet_format import FormatError

V2 = 0xF993FAC9


def shape_bytes(shape):
    return struct.pack(f"<i{len(shape)}q", len(shape), *shape)


def test_round_trip_of_a_dict_with_sparse_and_dense_arrays(tmp_path):
    rng = np.random.RandomState(0)
    csr_values = rng.uniform(size=(5, 7)) * (rng.uniform(size=(5, 7)) < 0.4)
    rsp_values = np.zeros((6, 2, 3))
    rsp_values[[1, 4]] = rng.uniform(size=(2, 2, 3))
    arrays = {"csr": mx.nd.array(csr_values).tostype("csr"),
              "rsp": mx.nd.array(rsp_values, dtype="float64").tostype("row_sparse"),
              "empty": sparse.zeros("row_sparse", (3, 4), dtype="float16"),
              "dense": mx.nd.array(np.arange(6).reshape(2, 3), dtype="int32"),
              "none": mx.nd.zeros((0, 3))}
    mx.nd.save(str(tmp_path / "a.nd"), arrays)
    back = mx.nd.load(str(tmp_path / "a.nd"))
    assert sorted(back) == sorted(arrays)
    for name, want in arrays.items():
        got = back[name]
        assert (got.stype, got.dtype, got.shape) == (want.stype, want.dtype, want.shape), name
        np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
    np.testing.assert_array_equal(back["rsp"].indices.asnumpy(), [1, 4])


def test_with_numpy_shapes_a_scalar_beside_a_sparse_array_round_trips(tmp_path):
    arrays = {"rsp": mx.nd.array([[0, 0], [3, 4]]).tostype("row_sparse"),
              "scalar": mx.nd.array(np.array(2.5, np.float32))}
    with mx.np_shape(True):
        mx.nd.save(str(tmp_path / "s.nd"), arrays)
        back = mx.nd.load(str(tmp_path / "s.nd"))
    assert back["scalar"].shape == () and back["scalar"].asscalar() == 2.5
    np.testing.assert_array_equal(back["rsp"].asnumpy(), [[0, 0], [3, 4]])
    with pytest.raises(mx.MXNetError, match="NumPy shape semantics on"):
        mx.nd.load(str(tmp_path / "s.nd"))          # saved with NumPy shapes, loaded without
    with pytest.raises(mx.MXNetError, match="0-d array cannot be saved"):
        mx.nd.save(str(tmp_path / "t.nd"), arrays)  # legacy shapes: () means unknown


def test_round_trip_of_a_list_keeps_order_and_components():
    x = mx.nd.array([[0, 1.5], [0, 0], [2, 0]]).tostype("csr")
    y = mx.nd.array([[0, 0], [3, 4]]).tostype("row_sparse")
    back = mx.nd.load_frombuffer(mx.nd.save_to_bytes([x, y]))
    assert isinstance(back, list) and [b.stype for b in back] == ["csr", "row_sparse"]
    for got, want in zip(back, (x, y)):
        for part in ("data", "indices"):
            np.testing.assert_array_equal(getattr(got, part).asnumpy(),
                                          getattr(want, part).asnumpy())
    np.testing.assert_array_equal(back[0].indptr.asnumpy(), [0, 1, 1, 2])


def test_dense_only_files_keep_minigluons_format():
    assert mx.nd.save_to_bytes([mx.nd.ones((2,))]).startswith(b"MGNDARR\0")


def test_the_bytes_follow_the_documented_layout():
    x = sparse.row_sparse_array(([[1.0, 2.0]], [2]), shape=(4, 2))
    y = sparse.csr_matrix(([5.0], [1], [0, 0, 1]), shape=(2, 3))
    want = struct.pack("<QQQ", 0x112, 0, 2)
    # row_sparse: magic, stype 1, storage shape, shape, cpu(0), float32, aux int64 (1,)
    want += struct.pack("<Ii", V2, 1) + shape_bytes((1, 2)) + shape_bytes((4, 2))
    want += struct.pack("<iii", 1, 0, 0) + struct.pack("<i", 6) + shape_bytes((1,))
    want += np.array([1, 2], "<f4").tobytes() + np.array([2], "<i8").tobytes()
    # csr: stype 2, aux indptr then indices
    want += struct.pack("<Ii", V2, 2) + shape_bytes((1,)) + shape_bytes((2, 3))
    want += struct.pack("<iii", 1, 0, 0) + struct.pack("<i", 6) + shape_bytes((3,))
    want += struct.pack("<i", 6) + shape_bytes((1,))
    want += np.array([5], "<f4").tobytes() + np.array([0, 0, 1], "<i8").tobytes()
    want += np.array([1], "<i8").tobytes()
    want += struct.pack("<Q", 2) + struct.pack("<Q", 1) + b"x" + struct.pack("<Q", 1) + b"y"
    assert mx.nd.save_to_bytes({"x": x, "y": y}) == want


def test_a_record_with_bad_indices_is_refused():
    payload = bytearray(mx.nd.save_to_bytes(
        [sparse.row_sparse_array(([[1.0], [2.0]], [1, 3]), shape=(4, 1))]))
    ids_at = len(payload) - 8 - 16          # the two int64 row ids before the name count
    payload[ids_at:ids_at + 16] = np.array([3, 1], "<i8").tobytes()
    with pytest.raises(FormatError, match="sorted and unique"):
        mx.nd.load_frombuffer(bytes(payload))
    with pytest.raises(FormatError, match="truncated"):
        mx.nd.load_frombuffer(bytes(payload[:-20]))


def test_a_pickled_sparse_handle_is_refused():
    from minigluon.ndarray import mxnet_format
    record = mx.nd.save_to_bytes([sparse.zeros("csr", (2, 2))])[24:-8]
    with pytest.raises(FormatError, match="pickled csr array"):
        mxnet_format.read_handle(record)
