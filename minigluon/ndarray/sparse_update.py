"""Optimizer steps on sparse operands: the lazy update (the rows a row_sparse gradient
stores, nothing else) and the standard update (every row, as if the gradient were dense).

Both run one in-place rule `step(weight, grad, state)` written for dense arrays (a fused
operator's formula, an optimizer's `_step`), so a sparse update is the dense formula by
construction:

- lazy: the stored rows of the weight and of each weight-shaped state are gathered, the rule
  runs on them with the gradient's stored rows, and they are scattered back. Rows the
  gradient does not store keep their weight and their state (no weight decay, no momentum
  decay there), as MXNet's lazy_update does.
- standard: the rule runs on dense arrays that share memory with the weight and the states
  (a row_sparse array first stores every row, see `fill_rows`), with the gradient densified.
  A csr operand is updated through a dense copy that is written back into it.

The weight and the states keep their storage types; a row_sparse weight or state holds every
row after an update (MXNet requires that of row_sparse weights and fills row_sparse states
the same way). Nothing here knows NDArray: the operators (ops_optimizer_sparse.py) and the
optimizers (minigluon.optimizer) hand in raw arrays and sparse containers.
"""
from ..base import MXNetError
from .sparse_storage import INDEX_DTYPE, from_dense, is_sparse

__all__ = ["fill_rows", "assign", "update_rows"]


def fill_rows(xp, rsp):
    """Make the row_sparse container `rsp` store every row (the missing ones as zeros), in
    place; returns its `data`, which is then the dense array itself."""
    rows = rsp.shape[0]
    if rsp.data.shape[0] != rows:       # ids are unique and in range: fewer means missing
        full = xp.zeros(rsp.shape, rsp.dtype)
        full[rsp.indices] = rsp.data
        rsp.data, rsp.indices = full, xp.arange(rows, dtype=INDEX_DTYPE)
    return rsp.data


def assign(xp, dst, dense):
    """Write the dense array `dense` into `dst` (a dense buffer or a container) in place,
    keeping dst's storage type; a row_sparse `dst` then stores every row."""
    if not is_sparse(dst):
        dst[...] = dense
    elif dst.stype == "row_sparse":
        fill_rows(xp, dst)[...] = dense
    else:
        new = from_dense(xp, dense.astype(dst.dtype, copy=False), dst.stype)
        dst.data, dst.indices, dst.indptr = new.data, new.indices, new.indptr


def update_rows(xp, step, weight, grad, state, lazy, rows_step=None):
    """Run the in-place rule `step(w, g, state)` on `weight` and `state` (raw arrays or
    containers; `state` may be None, an array or a nested tuple of them), which change in
    place. `lazy` (a row_sparse `grad`): only the gradient's stored rows are updated;
    otherwise every row, with the gradient densified.

    `rows_step(w, rows, g, state)`, if given, may do a lazy update itself on the whole
    weight and states (dense arrays) and the gradient's rows, in place, and say so by
    returning True (a kernel that updates the rows where they lie); otherwise the rows
    are gathered, stepped and scattered back, which must give the same result."""
    if lazy:
        _lazy(xp, step, weight, grad, state, rows_step)
    else:
        _standard(xp, step, weight, grad, state)


def _lazy(xp, step, weight, grad, state, rows_step=None):
    rows = grad.indices
    if rows.shape[0] == 0:
        return                          # no stored rows: nothing is touched
    shape, scatter = weight.shape, []
    if rows_step is not None:
        def whole(a):
            return _full_rows(xp, a) if _weight_shaped(a, shape) else a
        if rows_step(whole(weight), rows, grad.data, _nested(whole, state)):
            return

    def take(a):
        if not _weight_shaped(a, shape):
            return a                    # a scalar state (Nadam's schedule...) stays whole
        full = _full_rows(xp, a)
        part = xp.take(full, rows, axis=0)     # a copy, as full[rows], several times faster
        scatter.append((full, part))
        return part
    w = take(weight)
    step(w, grad.data, _nested(take, state))
    for full, part in scatter:
        full[rows] = part


def _standard(xp, step, weight, grad, state):
    shape, write_back = weight.shape, []

    def view(a):
        if not (_weight_shaped(a, shape) and is_sparse(a)):
            return a
        if a.stype == "row_sparse":
            return fill_rows(xp, a)
        dense = a.to_dense(xp)
        write_back.append((a, dense))
        return dense
    w = view(weight)
    step(w, grad.to_dense(xp) if is_sparse(grad) else grad, _nested(view, state))
    for a, dense in write_back:
        assign(xp, a, dense)


def _full_rows(xp, a):
    """A dense array sharing memory with the weight-shaped `a`, for a lazy update."""
    if not is_sparse(a):
        return a
    if a.stype == "row_sparse":
        return fill_rows(xp, a)
    raise MXNetError(f"a lazy update needs dense or row_sparse weights and states, got a "
                     f"{a.stype} array of shape {a.shape}; help: pass lazy_update=False, or "
                     "convert it with .tostype('row_sparse')")


def _weight_shaped(a, shape):
    return getattr(a, "shape", None) == shape


def _nested(fn, state):
    if isinstance(state, (tuple, list)):
        return tuple(_nested(fn, s) for s in state)
    return None if state is None else fn(state)
