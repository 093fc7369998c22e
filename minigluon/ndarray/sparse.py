"""`mx.nd.sparse`: MXNet's sparse storage names, which minigluon does not have yet.

minigluon's arrays are dense. This module exists so that code which imports
`mxnet.ndarray.sparse` (as MXNet's own tests and some scripts do at the top) loads, and so
that every use of sparse storage fails at the call with an error that says what is missing
and what to use instead, rather than at import. Sparse storage (csr, row_sparse) is planned
work; until then `isinstance(x, CSRNDArray)` is False for every array, which is true.
"""
from ..base import MXNetError
from .ndarray import NDArray

__all__ = ["CSRNDArray", "RowSparseNDArray", "BaseSparseNDArray", "csr_matrix",
           "row_sparse_array", "zeros", "empty", "array"]


class SparseStorageError(MXNetError, NotImplementedError):
    """Sparse storage was asked for; minigluon's arrays are dense only."""


def _refuse(what):
    raise SparseStorageError(
        f"{what}: minigluon has no sparse storage (stype 'csr' or 'row_sparse') yet; "
        "help: use dense arrays (mx.nd.array, stype='default'), which every minigluon "
        "operator, Parameter and kvstore takes")


class BaseSparseNDArray(NDArray):
    """MXNet's base class of sparse arrays; no minigluon array is one."""

    def __init__(self, *args, **kwargs):
        _refuse(type(self).__name__)


class CSRNDArray(BaseSparseNDArray):
    """A compressed-sparse-row matrix in MXNet; not available in minigluon."""


class RowSparseNDArray(BaseSparseNDArray):
    """An array of a few non-zero rows in MXNet; not available in minigluon."""


def csr_matrix(arg1, shape=None, ctx=None, dtype=None):
    """MXNet's CSRNDArray constructor: refused with SparseStorageError."""
    _refuse("mx.nd.sparse.csr_matrix")


def row_sparse_array(arg1, shape=None, ctx=None, dtype=None):
    """MXNet's RowSparseNDArray constructor: refused with SparseStorageError."""
    _refuse("mx.nd.sparse.row_sparse_array")


def zeros(stype, shape, ctx=None, dtype=None, **kwargs):
    """Sparse zeros: refused with SparseStorageError (use mx.nd.zeros)."""
    _refuse(f"mx.nd.sparse.zeros(stype={stype!r})")


def empty(stype, shape, ctx=None, dtype=None):
    """Sparse empty: refused with SparseStorageError (use mx.nd.empty)."""
    _refuse(f"mx.nd.sparse.empty(stype={stype!r})")


def array(source_array, ctx=None, dtype=None):
    """A sparse array from a SciPy matrix: refused with SparseStorageError."""
    _refuse("mx.nd.sparse.array")
