"""Oracle helpers for the mx.np tests: compare an mx.np result with NumPy's."""
import numpy as onp

from minigluon import np


def check_np(got, want, dtype=None, rtol=1e-5, atol=1e-6):
    """`got` is an mx.np.ndarray with `want`'s shape and values, and dtype `dtype` (default:
    want's dtype)."""
    assert isinstance(got, np.ndarray), type(got)
    want = onp.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    dtype = onp.dtype(dtype or want.dtype)
    assert got.dtype == dtype, f"dtype {got.dtype} != {dtype}"
    if want.dtype.kind in "biu" and got.dtype.kind in "biu":
        onp.testing.assert_array_equal(got.asnumpy(), want)
    else:
        onp.testing.assert_allclose(got.asnumpy().astype(onp.float64),
                                    want.astype(onp.float64), rtol=rtol, atol=atol)
