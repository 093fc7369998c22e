"""row_sparse values in a kvstore: the arguments of `row_sparse_pull`, row ids, and the
sums and row gathers that the local stores and the distributed worker share.

`kv.row_sparse_pull(key, out, row_ids)` fills each row_sparse `out` with exactly the rows
`row_ids` names, deduplicated and sorted, whatever the key stores (a row the value does
not store comes back as zeros). One `row_ids` array serves every `out` of a key, or each
`out` gets its own; a list of keys takes a list of outs and a list of row ids, one per key.

>>> kv.row_sparse_pull('w', out=rsp_out, row_ids=mx.nd.array([3, 1, 3]))
>>> rsp_out.indices.asnumpy()
array([1, 3])
"""
import numpy as np

from ..ndarray import NDArray
from ..ndarray.sparse import RowSparseNDArray, add_n, row_sparse_array
from .base import KVStoreError, group_key_values
from .server_rows import unique_ids  # noqa: F401  (shared with the servers)

__all__ = ["group_row_sparse_pull", "row_ids_of", "unique_ids", "sum_values", "gather_rows",
           "is_row_sparse", "check_row_sparse_outs", "as_row_sparse"]


def is_row_sparse(arr):
    return getattr(arr, "stype", "default") == "row_sparse"


def group_row_sparse_pull(key, out, row_ids, where="row_sparse_pull"):
    """[(key, [(out, row_ids NDArray), ...]), ...], keys in first-seen order: `key` is an
    int/str with an out (or a list of outs) and a row-id array (or a list of them), or a
    list of keys with a list of such outs and a list of such row ids."""
    if row_ids is None:
        raise KVStoreError(f"{where} needs row_ids=: an NDArray of the row ids to pull (a "
                           "list of them, one per out, or one entry per key)")
    if out is None:
        raise KVStoreError(f"{where} needs out=: a row_sparse array (or a list of them, one "
                           "per device) to copy the rows into")
    if isinstance(key, (list, tuple)):
        for name, arg in (("outs", out), ("row_ids", row_ids)):
            if not isinstance(arg, (list, tuple)) or len(arg) != len(key):
                got = f"{len(arg)} items" if isinstance(arg, (list, tuple)) else \
                    type(arg).__name__
                raise KVStoreError(f"{where}: {len(key)} keys need a list of {len(key)} "
                                   f"{name} (one entry per key), got {got}")
        triples = zip(key, out, row_ids)
    else:
        triples = [(key, out, row_ids)]
    grouped = {}
    for k, outs, ids in triples:
        ((k, outs),) = group_key_values(k, outs, where)
        grouped.setdefault(k, []).extend(zip(outs, _ids_per_out(k, outs, ids, where)))
    return list(grouped.items())


def _ids_per_out(key, outs, ids, where):
    """One row-id array per out: a single array serves them all."""
    if isinstance(ids, NDArray):
        return [ids] * len(outs)
    if isinstance(ids, (list, tuple)) and all(isinstance(i, NDArray) for i in ids):
        if len(ids) == 1:
            return list(ids) * len(outs)
        if len(ids) == len(outs):
            return list(ids)
    count = f"{len(ids)} items" if isinstance(ids, (list, tuple)) else type(ids).__name__
    raise KVStoreError(f"{where} of key {key!r}: row_ids must be an NDArray or a list of "
                       f"{len(outs)} NDArrays (one per out), got {count}")


def check_row_sparse_outs(key, outs, where="row_sparse_pull"):
    """Raise unless every out is a RowSparseNDArray (MXNet refuses other outputs)."""
    for out in outs:
        if not is_row_sparse(out):
            raise KVStoreError(
                f"{where} of key {key!r}: out must be a row_sparse array, got a "
                f"{getattr(out, 'stype', type(out).__name__)} one; create it with "
                "mx.nd.sparse.zeros('row_sparse', shape), or use pull() for dense outputs")


def row_ids_of(key, row_ids, num_rows, where="row_sparse_pull"):
    """The sorted, unique int64 row ids of an NDArray of ids (any shape, any dtype whose
    values are whole numbers in [0, num_rows))."""
    if not isinstance(row_ids, NDArray) or row_ids.stype != "default":
        raise KVStoreError(f"{where} of key {key!r}: row_ids must be a dense NDArray of row "
                           f"ids, got {type(row_ids).__name__}")
    raw = row_ids.asnumpy().reshape(-1)
    ids = raw.astype(np.int64)
    if raw.dtype.kind == "f" and not np.array_equal(ids, raw):
        bad = raw[ids != raw][:4].tolist()
        raise KVStoreError(f"{where} of key {key!r}: row ids must be whole numbers, got "
                           f"{bad}")
    if ids.size and (ids.min() < 0 or ids.max() >= num_rows):
        bad = ids[(ids < 0) | (ids >= num_rows)][:4].tolist()
        raise KVStoreError(f"{where} of key {key!r}: row ids {bad} are out of range for a "
                           f"value of {num_rows} rows; ids must be in [0, {num_rows})")
    return unique_ids(ids)


def sum_values(values, ctx):
    """The sum of one key's pushed values on `ctx`: row_sparse when every value is (only
    the rows some device touched), else dense."""
    moved = [v.as_in_context(ctx) for v in values]
    if all(is_row_sparse(v) for v in moved):
        return moved[0].copy() if len(moved) == 1 else add_n(*moved)
    dense = [v.tostype("default") if v.stype != "default" else v for v in moved]
    total = dense[0].copy()
    for arr in dense[1:]:
        total += arr
    return total


def gather_rows(value, ids, ctx, dtype=None):
    """A RowSparseNDArray on `ctx` holding rows `ids` (sorted, unique int64) of `value`
    (dense or row_sparse; a row it does not store is zeros). Only those rows are copied,
    on value's device."""
    home, raw = value.context, value._data
    with home.scope():
        wanted = home.xp.asarray(ids)
        if is_row_sparse(value):
            rows = _stored_rows(home.xp, raw, wanted)
        else:
            rows = raw[wanted]
    return row_sparse_array((NDArray(rows, home), ids), shape=value.shape, ctx=ctx,
                            dtype=dtype or value.dtype)


def _stored_rows(xp, rsp, wanted):
    """The rows `wanted` of a row_sparse container, zeros where it stores none."""
    where = xp.searchsorted(rsp.indices, wanted)
    found = where < rsp.indices.shape[0]
    found[found] = rsp.indices[where[found]] == wanted[found]
    rows = xp.zeros((wanted.shape[0],) + rsp.shape[1:], rsp.dtype)
    rows[found] = rsp.data[where[found]]
    return rows


def as_row_sparse(arr):
    """`arr` as a RowSparseNDArray (itself when it is one)."""
    return arr if isinstance(arr, RowSparseNDArray) else arr.tostype("row_sparse")
