"""`mx.nd.sparse`: arrays in row_sparse and csr storage, and the functions that make them.

A sparse array is an NDArray whose `_data` is a container of `sparse_storage`
(`RowSparseStorage`, `CSRStorage`) instead of a dense buffer. Operators with a sparse kernel
(ops_sparse.py) keep sparsity; every other operator runs on dense copies and returns dense
results (the registry's storage fallback). docs/sparse.md describes the design.

    >>> x = mx.nd.sparse.row_sparse_array(([[1., 2.]], [3]), shape=(5, 2))
    >>> x.indices.asnumpy(), (x * 2).stype
    (array([3]), 'row_sparse')
"""
import numpy as np

from ..base import MXNetError, ShapeError
from ..context import Context, current_context
from . import registry, sparse_storage
from .ndarray import NDArray
from .sparse_storage import CSRStorage, RowSparseStorage, SparseFormatError  # noqa: F401

DEFAULT_DTYPE = np.float32    # as mx.nd's (creation.py, which builds on this module)

__all__ = ["CSRNDArray", "RowSparseNDArray", "BaseSparseNDArray", "csr_matrix",
           "row_sparse_array", "zeros", "empty", "array", "SparseFormatError"]


class BaseSparseNDArray(NDArray):
    """An NDArray stored sparsely; see RowSparseNDArray and CSRNDArray."""

    __slots__ = ()

    @property
    def stype(self):
        return self._data.stype

    @property
    def _num_aux(self):
        """How many index arrays the storage has (MXNet's name): 1 row_sparse, 2 csr."""
        return len(self._data.aux)

    @property
    def data(self):
        """The stored values, as a dense NDArray (shares no memory with this array)."""
        return NDArray(self._data.data.copy(), self._ctx)

    @property
    def indices(self):
        """The int64 ids of the stored values: rows (row_sparse) or columns (csr)."""
        return NDArray(self._data.indices.copy(), self._ctx)

    def asnumpy(self):
        """The dense NumPy array this sparse array stands for."""
        return NDArray(self._dense_raw(), self._ctx).asnumpy()

    def astype(self, dtype, copy=True):
        """A copy with the values cast to `dtype` (the same array when `copy=False` and
        the dtype already matches)."""
        if not copy and np.dtype(dtype) == self._data.dtype:
            return self
        return type(self)(self._data.astype(dtype), self._ctx)

    def check_format(self, full_check=True):
        """Raise SparseFormatError unless the components are valid: shapes always, and
        with `full_check` sorted, unique, in-range ids (and a consistent indptr)."""
        with self._ctx.scope():
            self._data.check(self._ctx.xp, full_check)

    def wait_to_read(self):
        if self._ctx.xp is not np:
            NDArray(self._data.data, self._ctx).wait_to_read()

    wait_to_write = wait_to_read

    def as_np_ndarray(self):
        raise MXNetError(f"as_np_ndarray: mx.np arrays are dense; convert this {self.stype} "
                         "array with .tostype('default') first")

    def zeros_like(self):
        """Zeros of this shape in this storage type (nothing stored)."""
        return registry.invoke(registry.get("zeros_like"), (self,), {})

    def ones_like(self):
        """Ones of this shape: a dense array."""
        return registry.invoke(registry.get("ones_like"), (self,), {})

    def reshape(self, *shape, **kwargs):
        raise MXNetError(f"reshape is not defined for {self.stype} arrays; convert with "
                         ".tostype('default') first")

    def __setitem__(self, key, value):
        """Only `x[:] = value`: the whole array takes `value` in its own storage type."""
        if not (isinstance(key, slice) and key == slice(None)):
            raise MXNetError(f"{type(self).__name__} supports only x[:] = value, got index "
                             f"{key!r}; convert with .tostype('default') to index it")
        if isinstance(value, NDArray):
            value.copyto(self)
            return
        xp = self._ctx.xp
        with self._ctx.scope():
            dense = xp.broadcast_to(xp.asarray(value, dtype=self._data.dtype), self.shape)
            self._data = sparse_storage.from_dense(xp, xp.array(dense), self.stype)

    def _inplace(self, name, other):
        """`self op= other`: the result, in this array's storage type, replaces the data."""
        result = registry.invoke(registry.get(name), (self, other), {})
        self._data = registry.invoke(registry.get("cast_storage"), (result,),
                                     {"stype": self.stype})._data
        self._node, self._out_index = result._node, result._out_index
        return self

    def __repr__(self):
        shape = "x".join(str(n) for n in self.shape)
        return f"\n<{type(self).__name__} {shape} @{self._ctx}>"

    def __getstate__(self):
        components = [a if isinstance(a, np.ndarray) else a.get()
                      for a in (self._data.data,) + self._data.aux]
        return {"stype": self.stype, "shape": self.shape, "components": components,
                "ctx": (self._ctx.device_type, self._ctx.device_id)}

    def __setstate__(self, state):
        ctx = Context(*state["ctx"])
        data, *aux = [ctx.xp.asarray(a) for a in state["components"]]
        NDArray.__init__(self, _container(state["stype"], data, aux, state["shape"]), ctx)

    # the tape's view of storage (see autograd): gradients are dense raw buffers
    def _dense_raw(self):
        with self._ctx.scope():
            return self._data.to_dense(self._ctx.xp)

    def _write_dense(self, raw, add=False):
        # `raw` may also be a sparse container (an Embedding's row_sparse weight gradient):
        # row_sparse into row_sparse is stored and summed without a dense copy
        xp = self._ctx.xp
        with self._ctx.scope():
            total = self._data.plus(xp, raw) if add else raw
            total = sparse_storage.convert(xp, total, self.stype)
            # astype copies the values: the buffer never shares the tape's arrays
            self._data = total.astype(self._data.dtype)

    def _wrap_dense(self, raw):
        return NDArray(raw, self._ctx)


class RowSparseNDArray(BaseSparseNDArray):
    """An array of which only some rows are stored: `data` holds them, `indices` their ids.

    Make one with `mx.nd.sparse.row_sparse_array` or `x.tostype('row_sparse')`.
    """

    __slots__ = ()

    def retain(self, indices):
        """The rows of this array whose ids are in `indices` (others become zero)."""
        return registry.invoke(registry.get("_sparse_retain"), (self, indices), {})


class CSRNDArray(BaseSparseNDArray):
    """A 2-D array in compressed sparse row form: row i's values are
    `data[indptr[i]:indptr[i+1]]` at columns `indices[indptr[i]:indptr[i+1]]`.

    Make one with `mx.nd.sparse.csr_matrix` or `x.tostype('csr')`.
    """

    __slots__ = ()

    @property
    def indptr(self):
        """Where each row starts in `data` and `indices` (int64, rows + 1 entries)."""
        return NDArray(self._data.indptr.copy(), self._ctx)

    def __getitem__(self, key):
        """`x[i]` and `x[a:b]`: the rows, as a CSRNDArray."""
        if isinstance(key, (int, np.integer)):
            key = slice(int(key), int(key) + 1 if key != -1 else None)
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise MXNetError(f"CSRNDArray supports only x[i] and x[a:b], got index {key!r}; "
                             "convert with .tostype('default') for other indexing")
        begin, end, _ = key.indices(self.shape[0])
        return registry.invoke(registry.get("slice"), (self,),
                               {"begin": (begin,), "end": (max(begin, end),)})

    def asscipy(self):
        """This matrix as a scipy.sparse.csr_matrix (needs SciPy)."""
        import scipy.sparse
        data, indices, indptr = [a.asnumpy() for a in (self.data, self.indices, self.indptr)]
        return scipy.sparse.csr_matrix((data, indices, indptr), shape=self.shape)


registry.set_sparse_classes({"row_sparse": RowSparseNDArray, "csr": CSRNDArray})


def __getattr__(name):
    """`mx.nd.sparse.<op>`: every registered operator, as in MXNet (sparse.dot,
    sparse.retain, sparse.elemwise_add, ...). Looked up on use, so operator names never
    shadow Python's builtins (slice, max, sum) inside this module."""
    op = registry.OPS.get(name)
    if op is None or name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def function(*args, out=None, **kwargs):
        return registry.invoke(op, args, kwargs, out)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = op.fn.__doc__
    return function


def _container(stype, data, aux, shape):
    if stype == "row_sparse":
        return RowSparseStorage(data, aux[0], shape)
    indptr, indices = aux
    return CSRStorage(data, indices, indptr, shape)


# ---- making sparse arrays -----------------------------------------------------------------
def _raw(source, ctx, dtype=None):
    """`source` (NDArray, NumPy array, list) as a raw array on `ctx`."""
    if isinstance(source, NDArray):
        source = source.asnumpy()
    with ctx.scope():
        return ctx.xp.array(np.asarray(source), dtype=dtype)


def _value_dtype(source, dtype):
    """MXNet's rule: the given dtype, else the source's when it is an array, else float32."""
    if dtype is not None:
        return np.dtype(dtype)
    if isinstance(source, NDArray):
        return np.dtype(source.dtype)
    return source.dtype if isinstance(source, np.ndarray) else np.dtype(DEFAULT_DTYPE)


def _checked(storage, ctx, where):
    """Wrap `storage` after checking that its components' shapes fit (MXNet's constructors
    check no more; `check_format()` checks the ids), naming the call on failure."""
    with ctx.scope():
        try:
            storage.check(ctx.xp, full_check=False)
        except SparseFormatError as err:
            raise SparseFormatError(f"{where}: {err}") from None
    return registry.wrap(storage, ctx)


def _same_shape(arg1, shape, where):
    """The shape given as the first argument, which `shape`, when given too, must repeat."""
    if shape is not None and tuple(shape) != tuple(arg1):
        raise ShapeError(f"{where}: shape {tuple(shape)} does not match the shape {tuple(arg1)} "
                         "given as the first argument")
    return arg1


def _inferred(ids, where):
    """1 + the largest id: the size a shape inferred from `ids` needs."""
    if not ids.size:
        raise ShapeError(f"{where}: cannot infer the shape from empty indices; pass shape=")
    return int(ids.max()) + 1


def _is_shape(arg):
    return isinstance(arg, tuple) and all(isinstance(n, (int, np.integer)) for n in arg)


def scipy_sparse_module(arg):
    """The scipy.sparse module when `arg` is a SciPy sparse matrix, else None (SciPy is
    optional: it is only looked at when it is already imported)."""
    import sys
    module = sys.modules.get("scipy.sparse")
    return module if module is not None and module.issparse(arg) else None


def row_sparse_array(arg1, shape=None, ctx=None, dtype=None):
    """A RowSparseNDArray from `(data, indices)`, from a shape (all zeros), or from a dense
    or sparse array (NDArray, NumPy array or nested list).

        >>> mx.nd.sparse.row_sparse_array(([[1., 2.]], [1]), shape=(3, 2)).asnumpy()
        array([[0., 0.], [1., 2.], [0., 0.]], dtype=float32)
    """
    ctx = current_context() if ctx is None else ctx
    if _is_shape(arg1):
        return zeros("row_sparse", _same_shape(arg1, shape, "row_sparse_array"), ctx, dtype)
    if isinstance(arg1, tuple):
        if len(arg1) != 2:
            raise MXNetError(f"row_sparse_array: expected (data, indices) or a shape, got a "
                             f"tuple of {len(arg1)} items")
        return _rsp_from_parts(arg1[0], arg1[1], shape, ctx, dtype)
    return _convert_source(arg1, "row_sparse", shape, ctx, dtype, "row_sparse_array")


def _rsp_from_parts(data, indices, shape, ctx, dtype):
    values = _raw(data, ctx, _value_dtype(data, dtype))
    ids = _raw(indices, ctx, sparse_storage.INDEX_DTYPE)
    if ids.ndim != 1:
        raise ShapeError(f"row_sparse_array: indices must be 1-D, got shape {ids.shape}")
    if shape is None:
        shape = (_inferred(ids, "row_sparse_array"),) + tuple(values.shape[1:])
    if values.ndim != len(shape):
        raise ShapeError(f"row_sparse_array: data of shape {values.shape} does not fit an "
                         f"array of shape {tuple(shape)}; data needs one row per index")
    return _checked(RowSparseStorage(values, ids, shape), ctx, "row_sparse_array")


def csr_matrix(arg1, shape=None, ctx=None, dtype=None):
    """A CSRNDArray from `(data, indices, indptr)`, from `(data, (row, col))` (duplicates
    are summed), from a shape `(M, N)` (all zeros), from a dense or sparse array, or from a
    scipy.sparse matrix.

        >>> mx.nd.sparse.csr_matrix(([5.], [2], [0, 0, 1]), shape=(2, 3)).asnumpy()
        array([[0., 0., 0.], [0., 0., 5.]], dtype=float32)
    """
    ctx = current_context() if ctx is None else ctx
    if _is_shape(arg1):
        if len(arg1) != 2:
            raise ShapeError(f"csr_matrix: a csr matrix is 2-D, got shape {arg1}")
        return zeros("csr", _same_shape(arg1, shape, "csr_matrix"), ctx, dtype)
    if isinstance(arg1, tuple):
        if len(arg1) == 3:
            return _csr_from_parts(*arg1, shape, ctx, dtype)
        if len(arg1) == 2 and isinstance(arg1[1], tuple) and len(arg1[1]) == 2:
            return _csr_from_coo(arg1[0], *arg1[1], shape, ctx, dtype)
        raise MXNetError("csr_matrix: expected (data, indices, indptr), (data, (row, col)) "
                         f"or a shape (M, N), got a tuple of {len(arg1)} items")
    scipy_sparse = scipy_sparse_module(arg1)
    if scipy_sparse is not None:
        csr = scipy_sparse.csr_matrix(arg1)
        csr.sum_duplicates()    # also sorts each row's columns, as csr storage needs
        return _csr_from_parts(csr.data, csr.indices, csr.indptr, csr.shape, ctx,
                               dtype or csr.dtype)
    return _convert_source(arg1, "csr", shape, ctx, dtype, "csr_matrix")


def _csr_from_parts(data, indices, indptr, shape, ctx, dtype):
    values = _raw(data, ctx, _value_dtype(data, dtype))
    cols = _raw(indices, ctx, sparse_storage.INDEX_DTYPE)
    ptr = _raw(indptr, ctx, sparse_storage.INDEX_DTYPE)
    if values.ndim != 1 or cols.ndim != 1 or ptr.ndim != 1:
        raise ShapeError(f"csr_matrix: data, indices and indptr must be 1-D, got shapes "
                         f"{values.shape}, {cols.shape} and {ptr.shape}")
    if shape is None:
        shape = (ptr.shape[0] - 1, _inferred(cols, "csr_matrix"))
    if len(shape) != 2:
        raise ShapeError(f"csr_matrix: a csr matrix is 2-D, got shape {tuple(shape)}")
    return _checked(CSRStorage(values, cols, ptr, shape), ctx, "csr_matrix")


def _csr_from_coo(data, row, col, shape, ctx, dtype):
    """COO triplets to csr: sorted by (row, column), duplicate positions summed."""
    values = np.asarray(data.asnumpy() if isinstance(data, NDArray) else data,
                        dtype=_value_dtype(data, dtype))
    rows = np.asarray(row.asnumpy() if isinstance(row, NDArray) else row, dtype=np.int64)
    cols = np.asarray(col.asnumpy() if isinstance(col, NDArray) else col, dtype=np.int64)
    if not values.shape == rows.shape == cols.shape or values.ndim != 1:
        raise ShapeError(f"csr_matrix: data, row and col must be 1-D of one length, got "
                         f"shapes {values.shape}, {rows.shape} and {cols.shape}")
    if shape is None:
        shape = (int(rows.max()) + 1, int(cols.max()) + 1) if rows.size else (0, 0)
    if rows.size and (rows.min() < 0 or cols.min() < 0 or rows.max() >= shape[0]
                      or cols.max() >= shape[1]):
        raise SparseFormatError(f"csr_matrix: (row, col) positions out of range for shape "
                                f"{tuple(shape)}")
    keys = rows * shape[1] + cols
    unique, where = np.unique(keys, return_inverse=True)
    summed = np.zeros(unique.shape, values.dtype)
    np.add.at(summed, where, values)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(unique // shape[1],
                                                        minlength=shape[0]))])
    return _csr_from_parts(summed, unique % shape[1], indptr, shape, ctx, values.dtype)


def _convert_source(source, stype, shape, ctx, dtype, where):
    """A dense source (NDArray, NumPy, list) or a sparse array, converted to `stype`."""
    if isinstance(source, BaseSparseNDArray):
        out = source.as_in_context(ctx).tostype(stype)
    else:
        out = NDArray(_raw(source, ctx, _value_dtype(source, dtype)), ctx).tostype(stype)
    if shape is not None and tuple(shape) != out.shape:
        raise ShapeError(f"{where}: shape {tuple(shape)} does not match the source's "
                         f"shape {out.shape}")
    return out if dtype is None else out.astype(dtype, copy=False)


def zeros(stype, shape, ctx=None, dtype=None, **kwargs):
    """An array of zeros in storage type `stype` (nothing stored when it is sparse)."""
    ctx = current_context() if ctx is None else ctx
    sparse_storage.check_stype(stype, "sparse.zeros")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    dtype = np.dtype(DEFAULT_DTYPE if dtype is None else dtype)
    with ctx.scope():
        if stype == "default":
            return NDArray(ctx.xp.zeros(shape, dtype), ctx)
        return registry.wrap(sparse_storage.zeros(ctx.xp, stype, shape, dtype), ctx)


def empty(stype, shape, ctx=None, dtype=None):
    """An array of `stype` with nothing stored (the same as `zeros`)."""
    return zeros(stype, shape, ctx, dtype)


def array(source_array, ctx=None, dtype=None):
    """A sparse array from a sparse NDArray (a copy) or a scipy.sparse matrix (as csr)."""
    ctx = current_context() if ctx is None else ctx
    if isinstance(source_array, BaseSparseNDArray):
        out = source_array.copyto(ctx) if ctx != source_array.context else source_array.copy()
        return out if dtype is None else out.astype(dtype, copy=False)
    if scipy_sparse_module(source_array) is not None:
        return csr_matrix(source_array, ctx=ctx, dtype=dtype)
    raise MXNetError(f"sparse.array: expected a sparse NDArray or a scipy.sparse matrix, got "
                     f"{type(source_array).__name__}; use row_sparse_array or csr_matrix for "
                     "dense sources")
