"""A server's row_sparse keys: the rows a push carries, merging a round's rows, updating
only the touched rows, and the rows a pull asks for.

A row_sparse key's slice on a server holds whole rows (partition.py), kept dense like any
slice. A push brings the ids (re-based to the slice's first row) and values of the rows
one worker touched; a dist_sync round sums them over the rows any worker touched, in rank
order. With an optimizer, it gets the sum as a row_sparse gradient and the slice as a
row_sparse weight storing every row (as MXNet's servers keep row_sparse weights), so a
lazy update changes only the touched rows. Without one, the sum replaces the value: rows
no worker touched become zero, as a dense push of that sum would make them.
"""
import numpy as np

import minigluon_ext as ext

from .wire import row_length

__all__ = ["Rows", "read_rows", "init_rows", "merge_rows", "rows_as_dense", "update_rows",
           "take_rows", "RowsRefused", "unique_ids"]


class RowsRefused(Exception):
    """Rows that do not fit the key's slice (the server answers with the text)."""


class Rows:
    """The rows of one push (or of a merged round): `ids` (k,) int64 relative to the
    slice, `values` (k, row length)."""

    __slots__ = ("ids", "values")

    def __init__(self, ids, values):
        self.ids, self.values = ids, values


def unique_ids(ids):
    """The sorted unique values of an int64 array. Row ids mostly come sorted already, and
    NumPy's hash-based np.unique takes milliseconds for 10,000 of them; a sort (skipped when
    they are sorted) and one comparison take tens of microseconds."""
    if ids.size > 1 and not bool((ids[1:] > ids[:-1]).all()):
        ids = np.sort(ids)
        keep = np.empty(ids.size, bool)
        keep[0] = True
        np.not_equal(ids[1:], ids[:-1], out=keep[1:])
        ids = ids[keep]
    return ids


def slice_shape(shape, length):
    """The shape of a slice of `length` elements of a key of `shape`: whole rows."""
    row = row_length(shape)
    return ((length // row) if row else shape[0],) + tuple(shape[1:])


def read_rows(msg, where):
    """The Rows of a ROW_SPARSE PUSH (or the ids of a PULL), checked against its slice;
    values are aligned copies when the frame is not (the C kernels need alignment)."""
    ids, values = msg.rows()
    num_rows = slice_shape(msg.shape, msg.length)[0]
    if ids.size and ids[-1] >= num_rows:
        bad = ids[ids >= num_rows][:4].tolist()
        raise RowsRefused(f"{where} key {msg.key!r}: row ids {bad} (relative to row "
                          f"{msg.offset // max(row_length(msg.shape), 1)}) are outside this "
                          f"server's {num_rows} rows of the key; row ids must be in "
                          f"[0, {msg.shape[0]})")
    if values is not None and not values.flags.aligned:
        values = values.copy()
    return Rows(ids, values)


def init_rows(msg):
    """The flat slice value of a ROW_SPARSE INIT: its rows, zeros elsewhere. np.zeros gets
    zeroed pages from the OS as they are first written, so a server's memory grows with the
    rows that are ever written, not with the slice."""
    rows = read_rows(msg, "init of")
    value = np.zeros(msg.length, msg.dtype)
    rows_view = value.reshape(-1, rows.values.shape[1]) if rows.values.shape[1] else value
    if rows.ids.size:
        rows_view[rows.ids] = rows.values
    return value


def merge_rows(parts, dtype, room=None):
    """The sum of several pushes' Rows (in the order given) over the union of their ids,
    in one pass (minigluon_ext.rows_sum); `room(rows, width)` may give reusable
    (ids, values) scratch with room for `rows` rows, which the result then views."""
    if len(parts) == 1:
        return parts[0]
    width = parts[0].values.shape[1]
    if width == 0:                                 # rows of nothing: only the ids count
        ids = unique_ids(np.concatenate([p.ids for p in parts]))
        return Rows(ids, np.zeros((ids.size, 0), dtype))
    scratch = room(sum(p.ids.size for p in parts), width) if room else (None, None)
    ids, values = ext.rows_sum([p.ids for p in parts], [p.values for p in parts], *scratch)
    return Rows(ids, values)


def rows_as_dense(rows, out):
    """Write the dense slice that `rows` stands for into the flat buffer `out`."""
    out[...] = 0
    view = out.reshape(-1, rows.values.shape[1]) if rows.values.shape[1] else out
    if rows.ids.size:
        view[rows.ids] = rows.values
    return out


def update_rows(updater, key, rows, value, shape, length):
    """Run `updater(key, grad, weight)` with the round's rows as a row_sparse gradient and
    the flat slice `value` (written in place) as a row_sparse weight storing every row."""
    from ..context import cpu       # here: only a server with an optimizer makes NDArrays
    from ..ndarray.sparse import RowSparseNDArray, RowSparseStorage
    full = slice_shape(shape, length)
    view = value.reshape(full)
    weight = RowSparseNDArray(RowSparseStorage(view, _every_row(full[0]), full), cpu())
    grad_values = rows.values.reshape((rows.ids.size,) + full[1:])
    grad = RowSparseNDArray(RowSparseStorage(grad_values, rows.ids, full), cpu())
    stored = weight._data
    updater(key, grad, weight)
    # an updater may give the weight new storage (weight += ... does): copy it back
    now = weight._data
    if now is not stored or now.data is not view or now.indices.shape[0] != full[0]:
        np.copyto(view, now.to_dense(np).astype(view.dtype, copy=False))


_EVERY_ROW = {}        # number of rows -> the read-only ids 0..n-1


def _every_row(count):
    """The ids 0..count-1 of a weight storing every row, made once per slice size (an
    arange of a slice's millions of rows at every update would cost milliseconds); read-only,
    so that no updater can change the shared array."""
    ids = _EVERY_ROW.get(count)
    if ids is None:
        ids = _EVERY_ROW[count] = np.arange(count, dtype=np.int64)
        ids.flags.writeable = False
    return ids


def take_rows(value, shape, length, ids):
    """The rows `ids` of the flat slice `value`, as one contiguous flat array (a new one:
    the reply may be resent later, so it must not be reused)."""
    full = slice_shape(shape, length)
    return ext.rows_take(value.reshape(full), ids).reshape(-1)
