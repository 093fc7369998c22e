"""Sparse kernels: the operators that keep row_sparse / csr storage (docs/sparse.md).

Each kernel is registered on an existing operator with `register_sparse` and is called
when an input is sparse. It returns `(output, backward)` like the op, or NotImplemented for
storage types it does not keep sparse (the registry then runs the op on dense copies).
Backward functions take and return dense raw gradients. Kernels are written for the array
module `xp`, as every operator is.
"""
import numpy as np

from ..base import MXNetError, ShapeError
from . import sparse_storage
from .ops_shape import slice_key
from .registry import OPS, check_same_dtype, register, register_sparse
from .sparse_storage import CSRStorage, RowSparseStorage, is_sparse

_SCALARS = (int, float, bool, np.generic)


def _scatter_add(xp, out, ids, values):
    """out[ids] += values, repeated ids summed (NumPy's add.at, CuPy's scatter_add)."""
    add_at = getattr(xp.add, "at", None)
    if add_at is not None:
        add_at(out, ids, values)
    else:
        import cupyx
        cupyx.scatter_add(out, ids, values)


def _dense_backward(op, xp, raw, extra=(), attrs=None):
    """The op's own backward, run on dense copies of its inputs when a gradient is asked
    for: a sparse kernel's gradient is the dense formula's, as after a storage fallback."""
    def backward(*out_grads):
        dense = [sparse_storage.densify(xp, r) for r in raw]
        _, dense_backward = op.fn(xp, *dense, *extra, **(attrs or {}))
        return dense_backward(*out_grads)
    return backward


# ---- element-wise maps that send zero to zero -------------------------------------------
def _maps_zero_to_zero(op, xp, sparse, args, attrs):
    """Whether the op gives 0 where the sparse input is 0 (so the result keeps its pattern):
    the op is run on one zero with the same other operands and attributes."""
    zero = xp.zeros((1,) * sparse.ndim, sparse.dtype)
    probe = [zero if a is sparse else a for a in args]
    with np.errstate(all="ignore"):
        out, _ = op.fn(xp, *probe, **attrs)
    return bool((out == 0).all())


def _value_map(name):
    """A kernel for op `name` with one sparse operand, the others scalars: the op runs on
    the stored values only, when it sends zero to zero; otherwise NotImplemented."""
    op = OPS[name]

    def kernel(xp, *args, **attrs):
        stored = [a for a in args if is_sparse(a)]
        if len(stored) != 1 or any(not isinstance(a, _SCALARS) for a in args
                                   if a is not stored[0]):
            return NotImplemented
        sparse = stored[0]
        if not _maps_zero_to_zero(op, xp, sparse, args, attrs):
            return NotImplemented
        values, _ = op.fn(xp, *[sparse.data if a is sparse else a for a in args], **attrs)
        return sparse.with_data(values), _dense_backward(op, xp, args, attrs=attrs)
    kernel.__name__ = f"{name}_sparse"
    return kernel


_VALUE_MAPS = """negative abs sign sqrt square relu sin tan arcsin arctan sinh tanh arcsinh
arctanh floor ceil rint trunc fix round expm1 log1p degrees radians clip divide
power equal not_equal greater greater_equal lesser lesser_equal""".split()
for _name in _VALUE_MAPS:
    if _name in OPS:
        register_sparse(_name)(_value_map(_name))


# ---- row_sparse pairs: add, subtract, multiply -------------------------------------------
def _rsp_union(xp, parts, signs):
    """sum(sign * part) of row_sparse containers of one shape: the union of their rows."""
    rows = xp.unique(xp.concatenate([p.indices for p in parts]))
    out = xp.zeros((rows.shape[0],) + parts[0].shape[1:], parts[0].dtype)
    for part, sign in zip(parts, signs):
        where = xp.searchsorted(rows, part.indices)
        out[where] = out[where] + part.data if sign > 0 else out[where] - part.data
    return RowSparseStorage(out, rows.astype(sparse_storage.INDEX_DTYPE), parts[0].shape)


def _rsp_product(xp, lhs, rhs):
    """lhs * rhs of two row_sparse containers: the rows both store."""
    where = xp.searchsorted(rhs.indices, lhs.indices)
    found = where < rhs.indices.shape[0]
    found[found] = rhs.indices[where[found]] == lhs.indices[found]
    values = lhs.data[found] * rhs.data[where[found]]
    return RowSparseStorage(values, lhs.indices[found], lhs.shape)


def _pair(name, combine):
    """A kernel for a binary op: two row_sparse (or two csr) operands of one shape give
    that storage type, a sparse operand and a scalar are a value map, others fall back."""
    op, value_map = OPS[name], _value_map(name)

    def kernel(xp, lhs, rhs):
        if type(lhs) is not type(rhs):
            return value_map(xp, lhs, rhs)
        if lhs.shape != rhs.shape:
            return NotImplemented     # broadcasting: the dense op does it
        check_same_dtype(name, lhs, rhs)
        if isinstance(lhs, CSRStorage):
            flat = combine(xp, lhs.as_flat_rows(xp), rhs.as_flat_rows(xp))
            out = CSRStorage.from_flat_rows(xp, flat, lhs.shape)
        else:
            out = combine(xp, lhs, rhs)
        return out, _dense_backward(op, xp, (lhs, rhs))
    kernel.__name__ = f"{name}_sparse"
    return kernel


_PAIRS = {
    "add": lambda xp, a, b: _rsp_union(xp, (a, b), (1, 1)),
    "subtract": lambda xp, a, b: _rsp_union(xp, (a, b), (1, -1)),
    "multiply": _rsp_product,
}
for _name, _combine in _PAIRS.items():
    register_sparse(_name)(_pair(_name, _combine))


@register_sparse("add_n")
def add_n(xp, *args):
    """The sum of row_sparse arrays of one shape, as row_sparse (other mixes fall back)."""
    if not all(isinstance(a, RowSparseStorage) for a in args):
        return NotImplemented
    if len({a.shape for a in args}) != 1:
        raise ShapeError(f"add_n: all inputs must have the same shape, got "
                         f"{sorted({a.shape for a in args})}")
    check_same_dtype("add_n", *args)
    return _rsp_union(xp, args, (1,) * len(args)), lambda dy: (dy,) * len(args)


# ---- reductions and slicing -------------------------------------------------------------
def _reduces_all(ndim, axis, exclude):
    return not exclude and (axis is None or axis == () or
                            sorted(np.atleast_1d(axis) % ndim) == list(range(ndim)))


@register_sparse("sum")
def sum_sparse(xp, data, axis=None, keepdims=False, exclude=False):
    """The sum of the stored values (all axes), or a csr matrix's row or column sums
    (dense); other reductions fall back."""
    op = OPS["sum"]
    if _reduces_all(data.ndim, axis, exclude):
        out, _ = op.fn(xp, data.data.reshape(-1))
        out = out.reshape((1,) * data.ndim) if keepdims else out
    elif isinstance(data, CSRStorage) and not exclude and axis in (0, 1, -1, -2):
        axis = axis % 2
        ids = data.indices if axis == 0 else data.row_ids(xp)
        out = xp.zeros((data.shape[1 - axis],), data.dtype)
        _scatter_add(xp, out, ids, data.data)
        out = xp.expand_dims(out, axis) if keepdims else out
    else:
        return NotImplemented
    return out, _dense_backward(op, xp, (data,), attrs={"axis": axis, "keepdims": keepdims,
                                                        "exclude": exclude})


@register_sparse("norm")
def norm_sparse(xp, data, ord=2, axis=None, keepdims=False, out_dtype=None):
    """The L1 or L2 norm of all elements, from the stored values; per-axis norms fall back."""
    if not _reduces_all(data.ndim, axis, False) or out_dtype is not None:
        return NotImplemented
    op = OPS["norm"]
    out, _ = op.fn(xp, data.data.reshape(-1), ord=ord)
    out = out.reshape((1,) * data.ndim) if keepdims else out
    return out, _dense_backward(op, xp, (data,), attrs={"ord": ord, "axis": axis,
                                                        "keepdims": keepdims})


@register_sparse("slice")
def slice_sparse(xp, data, begin, end, step=()):
    """Rows begin..end of a csr matrix, as csr; other slices fall back."""
    if not isinstance(data, CSRStorage):
        return NotImplemented
    key = slice_key("slice", data.shape, tuple(begin), tuple(end), tuple(step))
    first, last, stride = key[0].indices(data.shape[0])
    whole_rows = all(k.indices(data.shape[1]) == (0, data.shape[1], 1) for k in key[1:])
    if stride != 1 or not whole_rows:
        return NotImplemented
    last = max(first, last)
    ptr = data.indptr[first:last + 1]
    lo, hi = int(ptr[0]), int(ptr[-1])
    out = CSRStorage(data.data[lo:hi].copy(), data.indices[lo:hi].copy(), ptr - lo,
                     (last - first, data.shape[1]))
    return out, _dense_backward(OPS["slice"], xp, (data,), attrs={
        "begin": begin, "end": end, "step": step})


# ---- retain ---------------------------------------------------------------------------
@register("_sparse_retain", inputs=("data", "indices"), aliases=("retain",))
def retain(xp, data, indices):
    """The rows of a row_sparse array whose ids are in `indices`; the rest become zero."""
    raise MXNetError(f"retain: data must be a row_sparse array, got a dense array of shape "
                     f"{data.shape}; help: convert it with .tostype('row_sparse')")


@register_sparse("_sparse_retain")
def retain_sparse(xp, data, indices):
    if not isinstance(data, RowSparseStorage) or is_sparse(indices):
        raise MXNetError("retain: data must be a row_sparse array and indices a dense array "
                         f"of row ids, got {sparse_storage.stype_of(data)} and "
                         f"{sparse_storage.stype_of(indices)}")
    keep = xp.isin(data.indices, xp.asarray(indices).astype(sparse_storage.INDEX_DTYPE))
    out = RowSparseStorage(data.data[keep], data.indices[keep], data.shape)

    def backward(dy):
        grad = xp.zeros_like(dy)
        grad[out.indices] = dy[out.indices]
        return grad, None
    return out, backward


# ---- dot ------------------------------------------------------------------------------
def _csr_matmul(xp, csr, dense):
    """csr (n, k) @ dense (k, m), dense (n, m)."""
    out = xp.zeros((csr.shape[0],) + dense.shape[1:], dense.dtype)
    _scatter_add(xp, out, csr.row_ids(xp), _scaled(csr.data, dense[csr.indices]))
    return out


def _csr_t_matmul(xp, csr, dense):
    """csr.T (k, n) @ dense (n, m), row_sparse: rows are the columns csr stores."""
    rows = xp.unique(csr.indices)
    out = xp.zeros((rows.shape[0],) + dense.shape[1:], dense.dtype)
    contrib = _scaled(csr.data, dense[csr.row_ids(xp)])
    _scatter_add(xp, out, xp.searchsorted(rows, csr.indices), contrib)
    return RowSparseStorage(out, rows, (csr.shape[1],) + dense.shape[1:])


def _matmul_csr(xp, dense, csr, transpose_b=False):
    """dense (p, n) @ csr (n, k) (or @ csr.T with transpose_b), dense."""
    rows, cols = csr.row_ids(xp), csr.indices
    take, put = (cols, rows) if transpose_b else (rows, cols)
    width = csr.shape[0] if transpose_b else csr.shape[1]
    out_t = xp.zeros((width, dense.shape[0]), dense.dtype)
    _scatter_add(xp, out_t, put, (dense[:, take] * csr.data).T)
    return out_t.T.copy()


def _scaled(values, rows):
    """Each row of `rows` times its value."""
    return rows * values.reshape((-1,) + (1,) * (rows.ndim - 1))


@register_sparse("dot")
def dot(xp, lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None):
    """csr @ dense (dense), csr.T @ dense (row_sparse), dense @ csr and dense @ csr.T
    (dense). A row_sparse operand is densified first; other mixes fall back. No gradient
    flows into a csr operand; the dense operand's gradient is dense."""
    if isinstance(lhs, CSRStorage) and not isinstance(rhs, CSRStorage) and not transpose_b:
        rhs = sparse_storage.densify(xp, rhs)
        _check_dot(lhs, rhs, lhs.shape[0 if transpose_a else 1], rhs.shape[0], transpose_a,
                   transpose_b)
        if transpose_a:
            return _csr_t_matmul(xp, lhs, rhs), lambda dy: (None, _csr_matmul(xp, lhs, dy))
        return _csr_matmul(xp, lhs, rhs), \
            lambda dy: (None, _csr_t_matmul(xp, lhs, dy).to_dense(xp))
    if isinstance(rhs, CSRStorage) and not isinstance(lhs, CSRStorage) and not transpose_a:
        lhs = sparse_storage.densify(xp, lhs)
        _check_dot(rhs, lhs, rhs.shape[1 if transpose_b else 0], lhs.shape[-1], transpose_a,
                   transpose_b, vector_ok=False)
        out = _matmul_csr(xp, lhs, rhs, transpose_b)
        return out, lambda dy: (_matmul_csr(xp, dy, rhs, not transpose_b), None)
    return NotImplemented


def _check_dot(csr, dense, inner, other, transpose_a, transpose_b, vector_ok=True):
    """The dense operand is 2-D (or 1-D on the right of csr) and the contracted sizes agree."""
    if dense.ndim not in ((1, 2) if vector_ok else (2,)):
        raise ShapeError(f"dot: the dense operand of a csr dot must be 1-D or 2-D, got shape "
                         f"{dense.shape}")
    check_same_dtype("dot", csr, dense)
    if inner != other:
        raise ShapeError(f"dot: shapes {csr.shape} (csr) and {dense.shape} are not aligned "
                         f"(transpose_a={transpose_a}, transpose_b={transpose_b}): "
                         f"contracted sizes {inner} != {other}")


# ---- take of csr rows, getnnz --------------------------------------------------------------
@register_sparse("take")
def take_sparse(xp, a, indices, axis=0, mode="clip"):
    """Rows of a csr matrix at `indices` (clipped or wrapped into range), as csr."""
    if not isinstance(a, CSRStorage) or is_sparse(indices) or axis != 0 or \
            mode not in ("clip", "wrap"):
        return NotImplemented
    ids = xp.asarray(indices).astype(sparse_storage.INDEX_DTYPE).reshape(-1)
    n = a.shape[0]
    rows = xp.clip(ids, 0, n - 1) if mode == "clip" else ids % n
    counts = (a.indptr[1:] - a.indptr[:-1])[rows]
    indptr = xp.concatenate([xp.zeros((1,), sparse_storage.INDEX_DTYPE),
                             xp.cumsum(counts).astype(sparse_storage.INDEX_DTYPE)])
    out_row = xp.searchsorted(indptr[1:], xp.arange(int(indptr[-1])), side="right")
    source = a.indptr[rows][out_row] + xp.arange(int(indptr[-1])) - indptr[out_row]
    out = CSRStorage(a.data[source], a.indices[source], indptr, (rows.shape[0], a.shape[1]))
    return out, _dense_backward(OPS["take"], xp, (a, indices),
                                attrs={"axis": axis, "mode": mode})


@register("_contrib_getnnz")
def getnnz(xp, data, axis=None):
    """The number of stored values of a csr matrix: in all (axis None), per column (0) or
    per row (1), as int64."""
    raise MXNetError(f"getnnz: data must be a csr matrix, got a dense array of shape "
                     f"{data.shape}; help: convert it with .tostype('csr')")


@register_sparse("_contrib_getnnz")
def getnnz_sparse(xp, data, axis=None):
    if not isinstance(data, CSRStorage):
        raise MXNetError(f"getnnz: data must be a csr matrix, got {data.stype}")
    if axis is None:
        return xp.asarray([data.nnz], dtype=np.int64), None
    if axis in (1, -1):
        return (data.indptr[1:] - data.indptr[:-1]).astype(np.int64), None
    if axis in (0, -2):
        return xp.bincount(data.indices, minlength=data.shape[1]).astype(np.int64), None
    raise ShapeError(f"getnnz: axis must be None, 0 or 1, got {axis}")


# ---- embedding lookups in a row_sparse table -------------------------------------------
@register_sparse("Embedding")
def embedding_rsp_weight(xp, data, weight, input_dim=None, output_dim=None, dtype="float32",
                         sparse_grad=False):
    """Rows of a row_sparse table (what `Parameter.row_sparse_data` gives) looked up by dense
    ids, without making the table dense: only the stored rows are read, and a row the table
    does not store reads as zeros. The gradient is the dense op's (row_sparse with
    `sparse_grad`)."""
    if is_sparse(data) or not isinstance(weight, RowSparseStorage) or len(weight.shape) != 2:
        return NotImplemented
    # the dense op on a zero-stride stand-in of the table's shape checks the shapes and
    # gives the backward (which reads only the table's shape and dtype): nothing table-sized
    # is allocated unless the gradient is dense
    stand_in = xp.broadcast_to(xp.zeros((1, 1), weight.dtype), weight.shape)
    _, backward = OPS["Embedding"].fn(xp, data, stand_in, input_dim=input_dim,
                                      output_dim=output_dim, dtype=dtype,
                                      sparse_grad=sparse_grad)
    idx = xp.clip(data.astype(np.int64), 0, weight.shape[0] - 1).reshape(-1)
    where = xp.searchsorted(weight.indices, idx)
    found = where < weight.indices.shape[0]
    found[found] = weight.indices[where[found]] == idx[found]
    out = xp.zeros((idx.shape[0], weight.shape[1]), weight.dtype)
    out[found] = weight.data.reshape(-1, weight.shape[1])[where[found]]
    return out.reshape(tuple(data.shape) + (weight.shape[1],)), backward
