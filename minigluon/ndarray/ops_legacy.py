"""MXNet's older row-wise and slice-assignment operators, still in the 1.x `nd` namespace:
choose_element_0index, fill_element_0index, _onehot_encode, and _slice_assign /
_slice_assign_scalar (alias _crop_assign / _crop_assign_scalar), which `x[key] = v` was
built on. Each reads rows of a 2-D `lhs` at column indices `rhs`, or writes into a copy."""
from ..base import ShapeError
from .ops_shape import slice_key
from .registry import register


def _row_columns(xp, name, lhs, rhs):
    """(rows, columns) picking lhs[i, rhs[i]] for every row i; rhs must hold one index per
    row, each in [0, columns)."""
    if lhs.ndim != 2 or rhs.shape != (lhs.shape[0],):
        raise ShapeError(f"{name}: needs a 2-D lhs and one index per row, got lhs of shape "
                         f"{lhs.shape} and indices of shape {rhs.shape}")
    cols = rhs.astype("int64")
    if cols.size and (int(cols.min()) < 0 or int(cols.max()) >= lhs.shape[1]):
        raise ShapeError(f"{name}: indices must lie in [0, {lhs.shape[1]}), got values from "
                         f"{int(cols.min())} to {int(cols.max())}")
    return xp.arange(lhs.shape[0]), cols


@register("choose_element_0index", inputs=("lhs", "rhs"))
def choose_element_0index(xp, lhs, rhs):
    """out[i] = lhs[i, rhs[i]]: one element of each row of a 2-D array."""
    rows, cols = _row_columns(xp, "choose_element_0index", lhs, rhs)

    def backward(dy):
        g = xp.zeros_like(lhs)
        g[rows, cols] = dy
        return g, None
    return lhs[rows, cols], backward


@register("fill_element_0index", inputs=("lhs", "mhs", "rhs"))
def fill_element_0index(xp, lhs, mhs, rhs):
    """A copy of the 2-D `lhs` with out[i, rhs[i]] = mhs[i]."""
    rows, cols = _row_columns(xp, "fill_element_0index", lhs, rhs)
    if mhs.shape != (lhs.shape[0],):
        raise ShapeError(f"fill_element_0index: needs one value per row ({lhs.shape[0]}), "
                         f"got values of shape {mhs.shape}")
    out = lhs.copy()
    out[rows, cols] = mhs

    def backward(dy):
        g = dy.copy()
        g[rows, cols] = 0
        return g, dy[rows, cols], None
    return out, backward


@register("_onehot_encode", inputs=("lhs", "rhs"))
def onehot_encode(xp, lhs, rhs):
    """One-hot rows: an array shaped like the 2-D `rhs` with out[i, lhs[i]] = 1, else 0."""
    rows, cols = _row_columns(xp, "onehot_encode", rhs, lhs)
    out = xp.zeros_like(rhs)
    out[rows, cols] = 1
    return out, None


def _assign_key(name, shape, begin, end, step):
    return slice_key(name, shape, tuple(begin), tuple(end), tuple(step or ()))


@register("_slice_assign", inputs=("lhs", "rhs"), aliases=("_crop_assign",))
def slice_assign(xp, lhs, rhs, begin, end, step=()):
    """A copy of `lhs` with lhs[begin:end:step] = rhs."""
    key = _assign_key("_slice_assign", lhs.shape, begin, end, step)
    out = lhs.copy()
    try:
        out[key] = rhs
    except ValueError:
        raise ShapeError(f"_slice_assign: value of shape {rhs.shape} does not fit the slice "
                         f"{begin}:{end} of shape {lhs[key].shape}") from None

    def backward(dy):
        g = dy.copy()
        g[key] = 0
        return g, dy[key].reshape(rhs.shape)
    return out, backward


@register("_slice_assign_scalar", aliases=("_crop_assign_scalar",))
def slice_assign_scalar(xp, data, scalar=0.0, begin=(), end=(), step=()):
    """A copy of `data` with data[begin:end:step] = scalar."""
    key = _assign_key("_slice_assign_scalar", data.shape, begin, end, step)
    out = data.copy()
    out[key] = scalar

    def backward(dy):
        g = dy.copy()
        g[key] = 0
        return (g,)
    return out, backward
