"""Sharing memory with NumPy and other frameworks: `from_numpy` (zero-copy from a NumPy
array) and DLPack (`to_dlpack_for_read`/`_for_write`, `from_dlpack`), on the array module
of the device (NumPy on CPU, CuPy on a GPU)."""
import ctypes

import numpy as np

from ..context import Context
from .creation import array
from .ndarray import NDArray

_DLPACK_CPU, _DLPACK_CUDA = 1, 2


def from_numpy(ndarray, zero_copy=True):
    """An NDArray on cpu() from a NumPy array.

    With `zero_copy` (the default) the two share memory and the NumPy array becomes
    read-only, so writes can only come through the NDArray; it must be C-contiguous.
    Without it, the data are copied (keeping the NumPy dtype).
    """
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(ndarray).__name__}")
    if not zero_copy:
        return array(ndarray, ctx=Context("cpu", 0), dtype=ndarray.dtype)
    if not ndarray.flags["C_CONTIGUOUS"]:
        raise ValueError("from_numpy: zero_copy needs a C-contiguous array, got one of strides "
                         f"{ndarray.strides}; pass np.ascontiguousarray(a) or zero_copy=False")
    shared = ndarray.view() if ndarray.flags.writeable else _writable_alias(ndarray)
    ndarray.flags.writeable = False
    return NDArray(shared, Context("cpu", 0))


def _writable_alias(ndarray):
    """A writable array on the memory of the read-only `ndarray` (e.g. one handed to
    from_numpy before), keeping `ndarray` alive: MXNet shares the memory either way."""
    if ndarray.size == 0:
        return ndarray.copy()
    raw = (ctypes.c_char * ndarray.nbytes).from_address(ndarray.__array_interface__["data"][0])
    raw.owner = ndarray
    return np.frombuffer(raw, dtype=ndarray.dtype).reshape(ndarray.shape)


class _Capsule:
    """A DLPack capsule dressed as an object with `__dlpack__`, as `from_dlpack` of NumPy
    and CuPy expect (a capsule can be consumed once)."""

    def __init__(self, capsule, device):
        self._capsule, self._device = capsule, device

    def __dlpack__(self, stream=None, **kwargs):
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise BufferError("from_dlpack: this DLPack capsule was already consumed")
        return capsule

    def __dlpack_device__(self):
        return self._device


def to_dlpack_for_read(data):
    """A DLPack capsule sharing `data`'s memory, for another framework to read."""
    return data.to_dlpack_for_read()


def to_dlpack_for_write(data):
    """A DLPack capsule sharing `data`'s memory, for another framework to write."""
    return data.to_dlpack_for_write()


def from_dlpack(dlpack):
    """An NDArray sharing memory with a DLPack capsule or an object with `__dlpack__`
    (a capsule from `to_dlpack_for_read`, a NumPy, CuPy or PyTorch array).

    >>> x = mx.nd.ones((2, 3))
    >>> y = mx.nd.from_dlpack(x.to_dlpack_for_write())   # y and x share memory
    """
    if not hasattr(dlpack, "__dlpack__"):
        if type(dlpack).__name__ != "PyCapsule":
            raise TypeError("from_dlpack: expected a DLPack capsule or an object with "
                            f"__dlpack__, got {type(dlpack).__name__}")
        dlpack = _Capsule(dlpack, capsule_device(dlpack))
    device_type, device_id = dlpack.__dlpack_device__()
    if device_type == _DLPACK_CUDA:
        ctx = Context("gpu", device_id)
        with ctx.scope():
            return NDArray(ctx.xp.from_dlpack(dlpack), ctx)
    if device_type != _DLPACK_CPU:
        raise ValueError(f"from_dlpack: memory on DLPack device type {device_type}; minigluon "
                         f"takes CPU ({_DLPACK_CPU}) and CUDA ({_DLPACK_CUDA}) memory")
    return _cpu_array(np.from_dlpack(dlpack))


def capsule_device(capsule):
    """(device type, device id) of an unconsumed "dltensor" capsule, read from the
    DLTensor it points to: its `data` pointer is followed by the int32 pair DLDevice."""
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                  ctypes.c_char_p]
    try:
        address = get_pointer(capsule, b"dltensor")
    except ValueError:
        raise ValueError("from_dlpack: the capsule is not an unused DLPack tensor (each "
                         "capsule can be imported once)") from None
    device = (ctypes.c_int32 * 2).from_address(address + ctypes.sizeof(ctypes.c_void_p))
    return int(device[0]), int(device[1])


def _cpu_array(shared):
    """NumPy marks arrays from unversioned capsules read-only; the memory is the producer's
    to share, and an NDArray is writable, as in MXNet."""
    return NDArray(shared if shared.flags.writeable else _writable_alias(shared), Context("cpu", 0))
