"""The raw storage of sparse arrays: row_sparse and csr components and their conversions.

A dense NDArray's `_data` is a NumPy or CuPy array. A sparse NDArray's `_data` is one of the
two containers below, holding raw arrays of the same array module:

- `RowSparseStorage`: `data` of shape (k,) + shape[1:] holds the k stored rows, `indices`
  (int64, sorted, unique) their row ids;
- `CSRStorage` (2-D): `data` and `indices` (int64 column ids) hold each row's non-zeros,
  sorted by column, `indptr` (int64, rows + 1 entries) where each row starts in them.

Everything here is written for the array module `xp` (numpy or cupy), as operators are.
Nothing here knows NDArray: the registry hands these containers to sparse kernels and wraps
the ones they return (see docs/sparse.md).
"""
import math

import numpy as np

from ..base import MXNetError, ShapeError

STYPES = ("default", "row_sparse", "csr")
INDEX_DTYPE = np.int64


class SparseFormatError(MXNetError, ValueError):
    """Sparse components that do not describe a valid array (check_format)."""


class StorageTypeError(MXNetError, ValueError):
    """A storage type name minigluon does not know."""


def check_stype(stype, where):
    """`stype` if it is a storage type minigluon knows, else a clear error."""
    if stype not in STYPES:
        raise StorageTypeError(f"{where}: unknown storage type {stype!r}; use one of "
                               f"{', '.join(map(repr, STYPES))}")
    return stype


def is_sparse(raw):
    """True for a sparse container (anything else is a dense raw array or a scalar)."""
    return isinstance(raw, CONTAINERS)


def stype_of(raw):
    return raw.stype if is_sparse(raw) else "default"


class _Storage:
    """What both containers share: shape, dtype, and mapping a function over components."""

    __slots__ = ()

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        """The number of elements of the dense array it stands for (as MXNet's `size`)."""
        return math.prod(self.shape)

    @property
    def nnz(self):
        return int(self.data.shape[0])

    def astype(self, dtype):
        """The same layout with the values cast to `dtype` (indices are unchanged)."""
        return self.with_data(self.data.astype(np.dtype(dtype)))

    def copy(self):
        return self.map(lambda a: a.copy())


class RowSparseStorage(_Storage):
    """The k stored rows (`data`) of an array of `shape`, at row ids `indices`."""

    __slots__ = ("data", "indices", "shape")
    stype = "row_sparse"

    def __init__(self, data, indices, shape):
        self.data, self.indices, self.shape = data, indices, tuple(int(n) for n in shape)

    @property
    def aux(self):
        return (self.indices,)

    def map(self, fn):
        """`fn` applied to every component (a copy, a move to another device)."""
        return RowSparseStorage(fn(self.data), fn(self.indices), self.shape)

    def with_data(self, data):
        return RowSparseStorage(data, self.indices, self.shape)

    def to_dense(self, xp):
        out = xp.zeros(self.shape, dtype=self.dtype)
        out[self.indices] = self.data
        return out

    def check(self, xp, full_check=True):
        """Raise SparseFormatError unless the components describe an array of `shape`."""
        if self.indices.ndim != 1 or self.indices.shape[0] != self.data.shape[0]:
            raise SparseFormatError(
                f"row_sparse: {self.indices.shape} indices for {self.data.shape[0]} stored "
                "rows; give one row id per row of data")
        if self.data.shape[1:] != self.shape[1:]:
            raise SparseFormatError(f"row_sparse: data rows of shape {self.data.shape[1:]} do "
                                    f"not fit an array of shape {self.shape}")
        if full_check and self.nnz:
            _check_ids(xp, self.indices, self.shape[0], "row_sparse", "row")


class CSRStorage(_Storage):
    """A 2-D array of `shape` in compressed sparse row form."""

    __slots__ = ("data", "indices", "indptr", "shape")
    stype = "csr"

    def __init__(self, data, indices, indptr, shape):
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = tuple(int(n) for n in shape)

    @property
    def aux(self):
        return (self.indptr, self.indices)     # MXNet's order of the aux arrays

    def map(self, fn):
        return CSRStorage(fn(self.data), fn(self.indices), fn(self.indptr), self.shape)

    def with_data(self, data):
        return CSRStorage(data, self.indices, self.indptr, self.shape)

    def row_ids(self, xp):
        """The row id of each stored value: how many rows end at or before it (a search,
        which CuPy has; its repeat takes no array of counts)."""
        positions = xp.arange(self.nnz, dtype=INDEX_DTYPE)
        return xp.searchsorted(self.indptr[1:], positions, side="right").astype(INDEX_DTYPE)

    def as_flat_rows(self, xp):
        """The same values as a 1-D row_sparse container over the row-major positions,
        where csr arithmetic is row_sparse arithmetic (see `from_flat_rows`)."""
        keys = self.row_ids(xp) * self.shape[1] + self.indices
        return RowSparseStorage(self.data, keys, (self.shape[0] * self.shape[1],))

    @staticmethod
    def from_flat_rows(xp, flat, shape):
        """The csr matrix of `shape` whose row-major positions `flat` stores."""
        rows, cols = flat.indices // shape[1], flat.indices % shape[1]
        bounds = xp.arange(shape[0] + 1, dtype=INDEX_DTYPE)
        indptr = xp.searchsorted(rows, bounds, side="left").astype(INDEX_DTYPE)
        return CSRStorage(flat.data, cols.astype(INDEX_DTYPE), indptr, shape)

    def to_dense(self, xp):
        out = xp.zeros(self.shape, dtype=self.dtype)
        out[self.row_ids(xp), self.indices] = self.data
        return out

    def check(self, xp, full_check=True):
        """Raise SparseFormatError unless the components describe a csr matrix of `shape`."""
        rows, cols = self.shape
        if self.indptr.shape != (rows + 1,):
            raise SparseFormatError(f"csr: indptr has shape {self.indptr.shape}, a matrix of "
                                    f"{rows} rows needs {rows + 1} entries")
        if self.indices.shape != (self.nnz,) or self.data.ndim != 1:
            raise SparseFormatError(f"csr: {self.indices.shape} column ids for data of shape "
                                    f"{self.data.shape}; give one column id per value")
        if not full_check:
            return
        ptr = self.indptr
        if int(ptr[0]) != 0 or int(ptr[-1]) != self.nnz or bool((ptr[1:] < ptr[:-1]).any()):
            raise SparseFormatError(
                f"csr: indptr must start at 0, never decrease and end at the number of values "
                f"({self.nnz}), got {_preview(ptr)}")
        if self.nnz:
            _check_csr_columns(xp, self, cols)


def _check_ids(xp, ids, bound, where, what):
    """Ids must be integers in [0, bound), strictly increasing."""
    if ids.dtype.kind not in "iu":
        raise SparseFormatError(f"{where}: {what} ids must be integers, got {ids.dtype}")
    if int(ids.min()) < 0 or int(ids.max()) >= bound:
        raise SparseFormatError(f"{where}: {what} ids {_preview(ids)} out of range [0, {bound})")
    if ids.shape[0] > 1 and bool((ids[1:] <= ids[:-1]).any()):
        raise SparseFormatError(f"{where}: {what} ids {_preview(ids)} must be sorted and unique")


def _check_csr_columns(xp, csr, cols):
    ids = csr.indices
    if ids.dtype.kind not in "iu":
        raise SparseFormatError(f"csr: column ids must be integers, got {ids.dtype}")
    if int(ids.min()) < 0 or int(ids.max()) >= cols:
        raise SparseFormatError(f"csr: column ids {_preview(ids)} out of range [0, {cols})")
    # within a row ids must increase; a step down is allowed only where a new row starts
    step_down = ids[1:] <= ids[:-1]
    starts = xp.zeros(csr.nnz, dtype=bool)
    starts[csr.indptr[1:-1][csr.indptr[1:-1] < csr.nnz]] = True
    if bool((step_down & ~starts[1:]).any()):
        raise SparseFormatError(f"csr: column ids {_preview(ids)} must be sorted and unique "
                                "within each row")


def _preview(a, n=8):
    values = [int(v) for v in a[:n].tolist()]
    return f"{values}{' ...' if a.shape[0] > n else ''}"


CONTAINERS = (RowSparseStorage, CSRStorage)


# ---- building containers ----------------------------------------------------------------
def _index(xp, values):
    return xp.asarray(values, dtype=INDEX_DTYPE)


def zeros(xp, stype, shape, dtype):
    """A container of `stype` with no stored values."""
    shape, dtype = tuple(int(n) for n in shape), np.dtype(dtype)
    if stype == "row_sparse":
        return RowSparseStorage(xp.zeros((0,) + shape[1:], dtype), _index(xp, []), shape)
    _check_2d(shape)
    return CSRStorage(xp.zeros((0,), dtype), _index(xp, []),
                      xp.zeros((shape[0] + 1,), INDEX_DTYPE), shape)


def _check_2d(shape):
    if len(shape) != 2:
        raise ShapeError(f"csr storage is for 2-D arrays, got shape {shape}; use "
                         "row_sparse (any number of dimensions) or reshape to 2-D")


def from_dense(xp, dense, stype):
    """The dense raw array `dense` in `stype` (zeros are dropped; 'default' copies)."""
    if stype == "default":
        return dense.copy()
    if stype == "row_sparse":
        if dense.ndim == 0:
            raise ShapeError("row_sparse storage needs at least one dimension, got a 0-d array")
        flat = dense.reshape(dense.shape[0], -1)
        rows = xp.nonzero((flat != 0).any(axis=1))[0].astype(INDEX_DTYPE)
        return RowSparseStorage(dense[rows], rows, dense.shape)
    _check_2d(dense.shape)
    rows, cols = xp.nonzero(dense)
    counts = xp.bincount(rows, minlength=dense.shape[0])
    indptr = xp.concatenate([xp.zeros((1,), INDEX_DTYPE), xp.cumsum(counts).astype(INDEX_DTYPE)])
    return CSRStorage(dense[rows, cols], cols.astype(INDEX_DTYPE), indptr, dense.shape)


def convert(xp, raw, stype):
    """Any raw array or container in `stype`; a container already in `stype` is returned."""
    if stype_of(raw) == stype:
        return raw
    dense = raw.to_dense(xp) if is_sparse(raw) else raw
    return from_dense(xp, dense, stype)


def densify(xp, raw):
    """The dense raw array of `raw` (itself when it is dense already)."""
    return raw.to_dense(xp) if is_sparse(raw) else raw
