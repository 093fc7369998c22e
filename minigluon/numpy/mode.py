"""NumPy mode: the one switch that makes Gluon speak mx.np (`npx.set_np()`).

With it on, Parameters are created as mx.np.ndarrays, so blocks return mx.np.ndarrays and
losses too, and the default DataLoader batchify gives mx.np.ndarrays. Arrays themselves
never look at the switch: an mx.np.ndarray has NumPy semantics in either mode.

The switch is process-wide (DataLoader worker threads see it too), as in MXNet 1.x.
"""

from ..ndarray import shape_semantics

_mode = {"shape": False, "array": False}


def set_np(shape=True, array=True, dtype=False):
    """Turn on NumPy shape semantics (0-d and zero-size arrays) and mx.np arrays in Gluon.

    >>> from minigluon import npx
    >>> npx.set_np()
    """
    if dtype:
        raise ValueError("set_np(dtype=True) (float64 as the default dtype) is not supported "
                         "by minigluon; keep dtype=False and pass dtype='float64' to the "
                         "creation functions where you need it")
    if array and not shape:
        raise ValueError("set_np(shape=False, array=True) is not allowed: mx.np arrays need "
                         "NumPy shape semantics; use set_np() or set_np(shape=True, "
                         "array=False)")
    _mode.update(shape=bool(shape), array=bool(array))


def reset_np():
    """Back to legacy mode: Gluon creates mx.nd.NDArrays again."""
    _mode.update(shape=False, array=False)


def is_np_array():
    """True after `npx.set_np()`: Gluon creates and returns mx.np.ndarrays."""
    return _mode["array"]


def is_np_shape():
    """True after `npx.set_np()`: NumPy shape semantics are on."""
    return _mode["shape"]


def in_array_mode(array):
    """`array` (same buffer) as the type Gluon makes in the current mode: mx.np.ndarray
    after set_np(), mx.nd.NDArray otherwise."""
    return array.as_np_ndarray() if _mode["array"] else array.as_nd_ndarray()


shape_semantics.set_switch(is_np_shape)   # mx.nd.save / load mark and check files with it
