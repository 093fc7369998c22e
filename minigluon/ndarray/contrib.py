"""`mx.nd.contrib`: MXNet's contrib operators that minigluon has so far, the floating-point
class tests isinf, isnan and isfinite, and getnnz of a csr matrix (ops_sparse.py). Each is
registered as `_contrib_<name>` (so `mx.sym` and traced graphs see it) and exposed here
under its short name."""
from .ndarray import NDArray
from .registry import OPS, invoke, register


def _class_test(name, test):
    """Register `_contrib_<name>`: 1 where `test` holds, 0 elsewhere, in the input's dtype
    (MXNet's convention); a test has no gradient."""
    def op(xp, data):
        return getattr(xp, test)(data).astype(data.dtype), None
    op.__name__ = name
    op.__doc__ = f"1 where numpy.{test} holds for `data`, 0 elsewhere, in the dtype of `data`."
    register("_contrib_" + name)(op)

    def function(data, out=None, **kwargs):
        if not isinstance(data, NDArray):
            raise TypeError(f"contrib.{name}: expected an NDArray, got {type(data).__name__}; "
                            "wrap the values with mx.nd.array(...)")
        return invoke(OPS["_contrib_" + name], (data,), kwargs, out)
    function.__name__ = name
    function.__doc__ = op.__doc__ + f"\n\n    >>> mx.nd.contrib.{name}(mx.nd.array([1, float('inf')]))"
    return function


isinf = _class_test("isinf", "isinf")
isnan = _class_test("isnan", "isnan")
isfinite = _class_test("isfinite", "isfinite")


def getnnz(data, axis=None, out=None):
    """The number of stored values of a csr matrix: in all, per column (axis=0) or per row
    (axis=1), as int64.

    >>> mx.nd.contrib.getnnz(mx.nd.array([[0, 1], [2, 3]]).tostype("csr"), axis=1)
    """
    return invoke(OPS["_contrib_getnnz"], (data,), {"axis": axis}, out)
