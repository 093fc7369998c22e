"""from_numpy (zero-copy and copying) and DLPack round trips."""
import numpy as np
import pytest

from minigluon import nd


def test_from_numpy_zero_copy_shares_memory_and_locks_numpy():
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    m = nd.from_numpy(a)
    with pytest.raises(ValueError):
        a[0, 0] = 1
    m[2, 1] = 100
    assert a[2, 1] == 100
    again = nd.from_numpy(a)          # a read-only source still shares its memory
    again[0, 0] = -1
    assert a[0, 0] == -1


@pytest.mark.parametrize("a", [np.array(3.0).reshape(()), np.zeros((1, 0, 2)),
                               np.arange(4, dtype=np.int32)])
@pytest.mark.parametrize("zero_copy", [False, True])
def test_from_numpy_keeps_values_shape_and_dtype(a, zero_copy):
    m = nd.from_numpy(a.copy(), zero_copy=zero_copy)
    assert m.shape == a.shape and m.dtype == a.dtype
    np.testing.assert_array_equal(m.asnumpy(), a)


def test_from_numpy_copy_is_independent():
    a = np.ones((2, 2))
    m = nd.from_numpy(a, zero_copy=False)
    m[0, 0] = 5
    assert a[0, 0] == 1 and a.flags.writeable


def test_from_numpy_rejects_non_contiguous_and_non_numpy():
    with pytest.raises(ValueError, match="C-contiguous"):
        nd.from_numpy(np.ones((3, 2)).T)
    with pytest.raises(TypeError, match="numpy.ndarray, got list"):
        nd.from_numpy([1, 2])


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_dlpack_round_trip_shares_memory(dtype):
    a = nd.array(np.arange(12).reshape(3, 4), dtype=dtype)
    for pack in (a.to_dlpack_for_read(), nd.to_dlpack_for_write(a)):
        b = nd.from_dlpack(pack)
        assert b.dtype == dtype
        np.testing.assert_array_equal(b.asnumpy(), a.asnumpy())
    b = nd.from_dlpack(a.to_dlpack_for_write())
    b[0, 0] = 42
    assert a.asnumpy()[0, 0] == 42


def test_from_dlpack_takes_numpy_arrays_and_rejects_other_objects():
    np.testing.assert_array_equal(nd.from_dlpack(np.arange(3.0)).asnumpy(), [0, 1, 2])
    with pytest.raises(TypeError, match="DLPack capsule"):
        nd.from_dlpack("not a capsule")


def test_capsule_names_its_device_and_is_used_once():
    from minigluon.ndarray.interop import capsule_device
    pack = nd.ones((2,)).to_dlpack_for_read()
    assert capsule_device(pack) == (1, 0)       # DLPack's kDLCPU, device 0
    nd.from_dlpack(pack)
    with pytest.raises(ValueError, match="imported once"):
        nd.from_dlpack(pack)
