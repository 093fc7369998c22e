"""Shape and indexing operators: reshape (with MXNet's special values), transpose,
expand/squeeze, split/concat/stack, slicing, padding, take/pick/one_hot, tile/repeat/broadcast,
and the `x[key]` read that NDArray.__getitem__ uses."""
import numpy as np

from ..base import ShapeError
from . import sample_parts
from .ops_reduce import norm_axis
from .registry import check_same_dtype, register


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def infer_reshape(src, target, reverse=False):
    """Resolve MXNet's reshape codes: 0 copy, -1 infer, -2 rest, -3 merge two, -4 split one."""
    src, target = tuple(src), tuple(target)
    if reverse:
        out = infer_reshape(src[::-1], _reverse_codes(target), False)
        return out[::-1]
    out, i, j, infer_at = [], 0, 0, None
    while j < len(target):
        t = target[j]
        if t == 0:
            _need(src, i, target), out.append(src[i]); i += 1
        elif t == -1:
            if infer_at is not None:
                raise ShapeError(f"reshape: shape {target} for an array of shape {src} has "
                                 "more than one -1; at most one dimension can be inferred")
            infer_at = len(out); out.append(-1); i += 1
        elif t == -2:
            out.extend(src[i:]); i = len(src)
        elif t == -3:
            _need(src, i + 1, target), out.append(src[i] * src[i + 1]); i += 2
        elif t == -4:
            _need(src, i, target)
            a, b = target[j + 1], target[j + 2]
            if a == b == -1:
                raise ShapeError(f"reshape: -4 in shape {target} splits dimension {src[i]} of "
                                 f"{src} into -1x-1; give at least one of the two sizes")
            a = src[i] // b if a == -1 else a
            b = src[i] // a if b == -1 else b
            if a * b != src[i]:
                raise ShapeError(f"reshape: -4 cannot split dimension {src[i]} of shape {src} "
                                 f"into {a}x{b}")
            out.extend([a, b]); i += 1; j += 2
        elif t > 0:
            out.append(t); i += 1
        else:
            raise ShapeError(f"reshape: invalid value {t} in shape {target} for an array of "
                             f"shape {src}; special values are 0, -1, -2, -3 and -4")
        j += 1
    if infer_at is not None:
        known = _prod(n for k, n in enumerate(out) if k != infer_at)
        if known == 0 or _prod(src) % known:
            raise ShapeError(f"reshape: cannot reshape array of shape {src} into {target}")
        out[infer_at] = _prod(src) // known
    if _prod(out) != _prod(src):
        raise ShapeError(f"reshape: cannot reshape array of shape {src} (size {_prod(src)}) "
                         f"into {target} (size {_prod(out)})")
    return tuple(out)


def _reverse_codes(target):
    # -4 takes its two following numbers: keep each group together when reversing
    groups, j = [], 0
    while j < len(target):
        take = 3 if target[j] == -4 else 1
        groups.append(target[j:j + take]); j += take
    return tuple(x for g in reversed(groups) for x in ((g[0], g[2], g[1]) if len(g) == 3 else g))


def _need(src, i, target):
    if i >= len(src):
        raise ShapeError(f"reshape: shape {target} refers to more dimensions than {src} has")


@register("reshape", aliases=("Reshape",))
def reshape(xp, data, shape=None, reverse=False, target_shape=None):
    """Reshape to `shape`, which may use MXNet's codes 0, -1, -2, -3 and -4."""
    shape = target_shape if shape is None else shape
    if shape is None:
        raise ShapeError("reshape: give the new shape")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
    new = infer_reshape(data.shape, shape, reverse)
    return data.reshape(new), lambda dy: (dy.reshape(data.shape),)


@register("transpose")
def transpose(xp, data, axes=None):
    """Permute the axes (reverse them when `axes` is None or empty)."""
    axes = tuple(range(data.ndim))[::-1] if not axes else tuple(axes)
    if sorted(a % max(data.ndim, 1) for a in axes) != list(range(data.ndim)):
        raise ShapeError(f"transpose: axes {axes} are not a permutation of the "
                         f"{data.ndim} axes of shape {data.shape}")
    inverse = tuple(np.argsort([a % data.ndim for a in axes]))
    return xp.transpose(data, axes), lambda dy: (xp.transpose(dy, inverse),)


@register("swapaxes", aliases=("SwapAxis",))
def swapaxes(xp, data, dim1=0, dim2=0):
    """Exchange two axes."""
    norm_axis("swapaxes", (dim1,), data.ndim), norm_axis("swapaxes", (dim2,), data.ndim)
    return xp.swapaxes(data, dim1, dim2), lambda dy: (xp.swapaxes(dy, dim1, dim2),)


@register("expand_dims")
def expand_dims(xp, data, axis):
    """Insert a dimension of size 1 at `axis`."""
    if not -data.ndim - 1 <= axis <= data.ndim:
        raise ShapeError(f"expand_dims: axis {axis} out of range for shape {data.shape}")
    return xp.expand_dims(data, axis), lambda dy: (dy.reshape(data.shape),)


@register("squeeze")
def squeeze(xp, data, axis=None):
    """Remove dimensions of size 1 (only those in `axis` when given)."""
    if axis is not None:
        axes = norm_axis("squeeze", axis, data.ndim)
        bad = [a for a in axes if data.shape[a] != 1]
        if bad:
            raise ShapeError(f"squeeze: axis {bad} of shape {data.shape} is not of size 1")
        out = xp.squeeze(data, axis=axes)
    else:
        out = xp.squeeze(data)
    if out.ndim == 0 and data.ndim:   # MXNet keeps at least one dimension
        out = out.reshape(1)
    return out, lambda dy: (dy.reshape(data.shape),)


@register("flatten", aliases=("Flatten",))
def flatten(xp, data):
    """Collapse all axes but the first: (N, d1, d2, ...) -> (N, d1*d2*...)."""
    n = data.shape[0] if data.ndim else 1
    return data.reshape(n, -1), lambda dy: (dy.reshape(data.shape),)


@register("split", aliases=("SliceChannel",))
def split(xp, data, num_outputs, axis=1, squeeze_axis=False):
    """Split into `num_outputs` equal parts along `axis`; returns a list of arrays."""
    ax = norm_axis("split", axis, data.ndim)[0]
    if num_outputs <= 0 or data.shape[ax] % num_outputs:
        raise ShapeError(f"split: axis {axis} of shape {data.shape} cannot be split into "
                         f"{num_outputs} equal parts")
    parts = xp.split(data, num_outputs, axis=ax)
    if squeeze_axis:
        if data.shape[ax] != num_outputs:
            raise ShapeError("split: squeeze_axis needs parts of size 1 along the axis")
        parts = [p.squeeze(axis=ax) for p in parts]

    def backward(*dys):
        join = xp.stack if squeeze_axis else xp.concatenate
        return (join(dys, axis=ax),)
    # MXNet returns a lone output as an NDArray, not a list of one
    return (tuple(parts) if len(parts) > 1 else parts[0]), backward


@register("split_v2")
def split_v2(xp, data, indices_or_sections, axis=0, squeeze_axis=False):
    """NumPy's split: `indices_or_sections` equal parts, or cuts before the given indices."""
    ax = norm_axis("split_v2", axis, data.ndim)[0]
    sections = indices_or_sections
    if isinstance(sections, (int, np.integer)):
        if sections <= 0 or data.shape[ax] % sections:
            raise ShapeError(f"split_v2: axis {axis} of shape {data.shape} cannot be split into "
                             f"{sections} equal parts; pass the cut indices instead")
    else:
        sections = [int(i) for i in sections]
    parts = xp.split(data, sections, axis=ax)
    if squeeze_axis:
        if any(p.shape[ax] != 1 for p in parts):
            raise ShapeError("split_v2: squeeze_axis needs parts of size 1 along the axis, got "
                             f"sizes {[p.shape[ax] for p in parts]}")
        parts = [p.squeeze(axis=ax) for p in parts]

    def backward(*dys):
        dys = [d.reshape(p.shape[:ax] + (1,) + p.shape[ax:]) if squeeze_axis else d
               for d, p in zip(dys, parts)]
        return (xp.concatenate(dys, axis=ax),)
    return (tuple(parts) if len(parts) > 1 else parts[0]), backward


@register("slice_like", inputs=("data", "shape_like"))
def slice_like(xp, data, shape_like, axes=()):
    """The leading part of `data` with `shape_like`'s size along `axes` (all axes when empty;
    `shape_like` may have fewer dimensions than `data`)."""
    axes = tuple(range(shape_like.ndim)) if not axes else norm_axis("slice_like", axes, data.ndim)
    key = [slice(None)] * data.ndim
    for a in axes:
        if a >= shape_like.ndim or shape_like.shape[a] > data.shape[a]:
            raise ShapeError(f"slice_like: cannot slice axis {a} of shape {data.shape} like "
                             f"shape {shape_like.shape}")
        key[a] = slice(0, shape_like.shape[a])
    key = tuple(key)
    return data[key].copy(), lambda dy: (_scatter_into(xp, data, key, dy), None)


@register("shape_array")
def shape_array(xp, data):
    """The shape of `data` as a 1-D int64 array."""
    return xp.asarray(data.shape, dtype=np.int64).reshape(data.ndim), None


@register("size_array")
def size_array(xp, data):
    """The number of elements of `data` as an int64 array of shape (1,)."""
    return xp.asarray([data.size], dtype=np.int64), None


def slice_key(name, shape, begin, end, step):
    if len(begin) != len(end) or len(begin) > len(shape):
        raise ShapeError(f"{name}: begin {begin} and end {end} must have the same length, at "
                         f"most the number of dimensions of shape {shape}")
    step = tuple(step) if step else (None,) * len(begin)
    return tuple(slice(b, e, s) for b, e, s in zip(begin, end, step))


@register("slice", aliases=("crop",))
def slice_op(xp, data, begin, end, step=()):
    """data[begin:end:step] per dimension; None keeps a dimension's default."""
    key = slice_key("slice", data.shape, tuple(begin), tuple(end), tuple(step))
    return data[key].copy(), lambda dy: (_scatter_into(xp, data, key, dy),)


@register("slice_axis")
def slice_axis(xp, data, axis, begin, end):
    """data[begin:end] along one axis."""
    ax = norm_axis("slice_axis", axis, data.ndim)[0]
    key = (slice(None),) * ax + (slice(begin, end),)
    return data[key].copy(), lambda dy: (_scatter_into(xp, data, key, dy),)


def _scatter_into(xp, data, key, dy):
    g = xp.zeros_like(data)
    g[key] = dy
    return g


def _scatter_add(xp, shape, dtype, key, dy):
    """Zeros of `shape` with dy added at `key`; repeated indices add up."""
    g = xp.zeros(shape, dtype=dtype)
    if hasattr(xp, "add") and hasattr(xp.add, "at"):
        xp.add.at(g, key, dy)
    else:  # older CuPy
        import cupyx
        cupyx.scatter_add(g, key, dy)
    return g


def is_basic_index(key):
    """True if `key` indexes by ints, slices, None and Ellipsis only (NumPy's basic
    indexing, which gives a view), False for integer or bool array indices."""
    parts = key if isinstance(key, tuple) else (key,)
    return all(isinstance(k, (int, np.integer, slice)) or k is None or k is Ellipsis
               for k in parts)


@register("_getitem")
def getitem(xp, data, key):
    """data[key] with NumPy semantics (basic keys give views, advanced keys copies)."""
    try:
        out = data[key]
        if is_basic_index(key) and xp.ndim(out) == 0:
            # MXNet 1.x has no 0-d arrays: x[i] of a 1-D x is a (1,) view
            out = data[(key if isinstance(key, tuple) else (key,)) + (None,)]
    except IndexError as err:
        raise ShapeError(f"index {key!r} is out of bounds for shape {data.shape}: {err}") from None
    if is_basic_index(key):
        return out, lambda dy: (_scatter_into(xp, data, key, dy.reshape(data[key].shape)),)
    return out, lambda dy: (_scatter_add(xp, data.shape, data.dtype, key, dy),)


def _index(xp, indices, size, mode, name):
    idx = indices.astype(np.int64) if indices.dtype.kind == "f" else indices
    if mode == "clip":
        return xp.clip(idx, 0, size - 1)
    if mode == "wrap":
        return idx % size
    if mode == "raise":
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= size):
            raise ShapeError(f"{name}: index out of range [0, {size})")
        return idx
    raise ShapeError(f"{name}: mode must be clip, wrap or raise, got {mode!r}")


@register("take", inputs=("a", "indices"))
def take(xp, a, indices, axis=0, mode="clip"):
    """Gather slices of `a` along `axis` at `indices` (clipped, wrapped, or checked)."""
    ax = norm_axis("take", axis, a.ndim)[0]
    idx = _index(xp, indices, a.shape[ax], mode, "take")
    out = xp.take(a, idx, axis=ax)

    def backward(dy):
        key = (slice(None),) * ax + (idx,)
        return _scatter_add(xp, a.shape, a.dtype, key, dy), None
    return out, backward


@register("pick", inputs=("data", "index"))
def pick(xp, data, index, axis=-1, keepdims=False, mode="clip"):
    """Pick one element per row along `axis`: out[i] = data[i, index[i]]."""
    ax = norm_axis("pick", axis, data.ndim)[0]
    expected = data.shape[:ax] + data.shape[ax + 1:]
    if tuple(index.shape) not in (expected, data.shape[:ax] + (1,) + data.shape[ax + 1:]):
        raise ShapeError(f"pick: index shape {index.shape} must be {expected} for data of "
                         f"shape {data.shape} and axis {axis}")
    idx = _index(xp, index, data.shape[ax], mode, "pick").reshape(
        data.shape[:ax] + (1,) + data.shape[ax + 1:])
    out = xp.take_along_axis(data, idx, axis=ax)
    result = out if keepdims else out.squeeze(axis=ax)

    def backward(dy):
        g = xp.zeros_like(data)
        xp.put_along_axis(g, idx, dy.reshape(idx.shape), axis=ax)
        return g, None
    return result, backward


@register("one_hot", inputs=("indices",))
def one_hot(xp, indices, depth, on_value=1.0, off_value=0.0, dtype="float32"):
    """A new last axis of size `depth` with on_value at each index, off_value elsewhere."""
    idx = indices.astype(np.int64)
    hot = idx[..., None] == xp.arange(depth)
    return xp.where(hot, on_value, off_value).astype(np.dtype(dtype)), None


@register("tile")
def tile(xp, data, reps):
    """Repeat the whole array `reps` times along each axis."""
    reps = tuple(reps)
    out = xp.tile(data, reps)
    full = (1,) * (out.ndim - len(reps)) + reps
    src = (1,) * (out.ndim - data.ndim) + data.shape

    def backward(dy):
        split = []
        for r, n in zip(full, src):
            split += [r, n]
        g = dy.reshape(split).sum(axis=tuple(range(0, 2 * out.ndim, 2)))
        return (g.reshape(data.shape),)
    return out, backward


@register("repeat")
def repeat(xp, data, repeats, axis=None):
    """Repeat each element `repeats` times along `axis` (flattened when None)."""
    if axis is None:
        out = xp.repeat(data.reshape(-1), repeats)
        return out, lambda dy: (dy.reshape(-1, repeats).sum(axis=1).reshape(data.shape),)
    ax = norm_axis("repeat", axis, data.ndim)[0]
    out = xp.repeat(data, repeats, axis=ax)

    def backward(dy):
        shape = data.shape[:ax] + (data.shape[ax], repeats) + data.shape[ax + 1:]
        return (dy.reshape(shape).sum(axis=ax + 1),)
    return out, backward


@register("broadcast_to")
def broadcast_to(xp, data, shape):
    """Broadcast to `shape`; a 0 in `shape` keeps the input's size there."""
    if len(shape) != data.ndim:
        raise ShapeError(f"broadcast_to: cannot broadcast shape {data.shape} to {tuple(shape)}; "
                         "the target needs the same number of dimensions (reshape first)")
    shape = tuple(d if s == 0 else s for s, d in zip(shape, data.shape))
    try:
        out = xp.broadcast_to(data, shape).copy()
    except ValueError:
        raise ShapeError(f"broadcast_to: cannot broadcast shape {data.shape} to {shape}") from None
    return out, lambda dy: (dy,)


@register("broadcast_axis", aliases=("broadcast_axes",))
def broadcast_axis(xp, data, axis=(), size=()):
    """Broadcast size-1 axes to the given sizes."""
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    size = (size,) if isinstance(size, int) else tuple(size)
    shape = list(data.shape)
    for a, s in zip(axis, size):
        if shape[a] != 1:
            raise ShapeError(f"broadcast_axis: axis {a} of shape {data.shape} is not of size 1")
        shape[a] = s
    return xp.broadcast_to(data, tuple(shape)).copy(), lambda dy: (dy,)


@register("broadcast_like", inputs=("lhs", "rhs"))
def broadcast_like(xp, lhs, rhs, lhs_axes=None, rhs_axes=None):
    """Broadcast `lhs` to the shape of `rhs`."""
    shape = rhs.shape
    if lhs_axes is not None or rhs_axes is not None:
        lhs_axes, rhs_axes = tuple(lhs_axes or ()), tuple(rhs_axes or ())
        if not lhs_axes or len(lhs_axes) != len(rhs_axes):
            raise ShapeError(f"broadcast_like: lhs_axes {lhs_axes} and rhs_axes {rhs_axes} "
                             "must be non-empty and of the same length; leave both out to "
                             "broadcast to the whole shape of rhs")
        shape = list(lhs.shape)
        for la, ra in zip(lhs_axes, rhs_axes):
            shape[la] = rhs.shape[ra]
    try:
        out = xp.broadcast_to(lhs, tuple(shape)).copy()
    except ValueError:
        raise ShapeError(f"broadcast_like: cannot broadcast {lhs.shape} like {rhs.shape}") from None
    return out, lambda dy: (dy, None)


@register("concat", inputs=(), aliases=("Concat",), variadic=True)
def concat(xp, *data, dim=1, num_args=None):
    """Join arrays along `dim`."""
    if not data:
        raise ShapeError("concat: needs at least one array")
    check_same_dtype("concat", *data)
    ax = norm_axis("concat", dim, data[0].ndim)[0]
    rest = {d.shape[:ax] + d.shape[ax + 1:] for d in data}
    if len(rest) != 1:
        raise ShapeError(f"concat: shapes {[d.shape for d in data]} differ outside dim {dim}")
    out = sample_parts.concatenate(data, ax) if xp is np else xp.concatenate(data, axis=ax)
    bounds = np.cumsum([d.shape[ax] for d in data])[:-1]
    return out, lambda dy: tuple(xp.split(dy, bounds, axis=ax))


@register("stack", inputs=(), variadic=True)
def stack(xp, *data, axis=0, num_args=None):
    """Join arrays of one shape along a new axis."""
    if not data:
        raise ShapeError("stack: needs at least one array")
    if len({d.shape for d in data}) != 1:
        raise ShapeError(f"stack: all arrays need the same shape, got {[d.shape for d in data]}")
    check_same_dtype("stack", *data)
    out = xp.stack(data, axis=axis)
    ax = axis % out.ndim
    return out, lambda dy: tuple(xp.take(dy, i, axis=ax) for i in range(len(data)))


@register("flip", aliases=("reverse",))
def flip(xp, data, axis):
    """Reverse the order of elements along `axis`."""
    axes = norm_axis("flip", axis, data.ndim)
    return xp.flip(data, axes).copy(), lambda dy: (xp.flip(dy, axes),)


_PAD_MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect"}


@register("pad", aliases=("Pad",))
def pad(xp, data, mode="constant", pad_width=(), constant_value=0):
    """Pad every axis by pad_width = (before_0, after_0, before_1, after_1, ...): with
    `constant_value`, by repeating the edge ('edge'), or by mirroring without repeating
    the edge ('reflect')."""
    if mode not in _PAD_MODES:
        raise ShapeError(f"pad: mode must be one of {sorted(_PAD_MODES)}, got {mode!r}")
    widths = tuple(int(w) for w in pad_width)
    if len(widths) != 2 * data.ndim or min(widths, default=0) < 0:
        raise ShapeError(f"pad: pad_width needs two non-negative sizes per axis of data "
                         f"{data.shape} ({2 * data.ndim} in all, e.g. (0, 0, 0, 0, 1, 1, 1, 1) "
                         f"for the spatial axes of NCHW), got {tuple(pad_width)!r}")
    pairs = tuple(zip(widths[::2], widths[1::2]))
    if mode == "reflect":
        for axis, ((before, after), size) in enumerate(zip(pairs, data.shape)):
            if max(before, after) >= size:
                raise ShapeError(f"pad: reflect padding of {max(before, after)} on axis "
                                 f"{axis} needs at least {max(before, after) + 1} elements "
                                 f"there, data has shape {data.shape}")
    if mode == "constant":
        out = xp.pad(data, pairs, mode="constant", constant_values=constant_value)
        inner = tuple(slice(b, b + n) for (b, _), n in zip(pairs, data.shape))
        return out, lambda dy: (dy[inner],)
    out = xp.pad(data, pairs, mode=mode)

    def backward(dy):
        # every output element came from one input element: sum the gradients into it
        source = xp.pad(xp.arange(data.size).reshape(data.shape), pairs, mode=mode)
        summed = xp.bincount(source.ravel(), weights=dy.ravel(), minlength=data.size)
        return (summed.astype(dy.dtype).reshape(data.shape),)
    return out, backward


@register("diag")
def diag(xp, data, k=0):
    """The k-th diagonal of a matrix, or a matrix with a vector on its diagonal."""
    if data.ndim not in (1, 2):
        raise ShapeError(f"diag: expects a 1-D or 2-D array, got shape {data.shape}")
    if data.ndim == 1:
        return xp.diag(data, k), lambda dy: (xp.diag(dy, k),)
    rows = xp.arange(max(0, -k), min(data.shape[0], data.shape[1] - k))
    key = (rows, rows + k)

    def backward(dy):
        g = xp.zeros_like(data)
        g[key] = dy
        return (g,)
    return data[key], backward


# ---- products -----------------------------------------------------------------------------
@register("dot", inputs=("lhs", "rhs"))
def dot(xp, lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None):
    """Matrix product; N-D inputs contract lhs's last axis with rhs's first (MXNet's rule).

    transpose_a contracts lhs's first axis instead, transpose_b rhs's last one; the other
    axes keep their order. Two vectors give shape (1,).
    """
    check_same_dtype("dot", lhs, rhs)
    if lhs.ndim == 0 or rhs.ndim == 0:
        raise ShapeError(f"dot: expects arrays with at least one dimension, got shapes "
                         f"{lhs.shape} and {rhs.shape}")
    a2 = lhs.reshape(lhs.shape[0], -1).T if transpose_a else lhs.reshape(-1, lhs.shape[-1])
    b2 = rhs.reshape(-1, rhs.shape[-1]).T if transpose_b else rhs.reshape(rhs.shape[0], -1)
    if a2.shape[1] != b2.shape[0]:
        raise ShapeError(f"dot: shapes {lhs.shape} and {rhs.shape} are not aligned "
                         f"(transpose_a={transpose_a}, transpose_b={transpose_b}): "
                         f"contracted sizes {a2.shape[1]} != {b2.shape[0]}")
    lead = lhs.shape[1:] if transpose_a else lhs.shape[:-1]
    tail = rhs.shape[:-1] if transpose_b else rhs.shape[1:]
    out = (a2 @ b2).reshape((lead + tail) or (1,))

    def backward(dy):
        d2 = dy.reshape(a2.shape[0], b2.shape[1])
        ga, gb = d2 @ b2.T, a2.T @ d2
        return ((ga.T if transpose_a else ga).reshape(lhs.shape),
                (gb.T if transpose_b else gb).reshape(rhs.shape))
    return out, backward


@register("batch_dot", inputs=("lhs", "rhs"))
def batch_dot(xp, lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None):
    """Matrix product per batch item: (B, n, m) x (B, m, k) -> (B, n, k)."""
    if lhs.ndim != 3 or rhs.ndim != 3:
        raise ShapeError(f"batch_dot: expects 3-D inputs, got {lhs.shape} and {rhs.shape}")
    check_same_dtype("batch_dot", lhs, rhs)
    a = xp.swapaxes(lhs, 1, 2) if transpose_a else lhs
    b = xp.swapaxes(rhs, 1, 2) if transpose_b else rhs
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ShapeError(f"batch_dot: shapes {lhs.shape} and {rhs.shape} are not aligned "
                         f"(transpose_a={transpose_a}, transpose_b={transpose_b})")
    out = xp.matmul(a, b)

    def backward(dy):
        ga = xp.matmul(dy, xp.swapaxes(b, 1, 2))
        gb = xp.matmul(xp.swapaxes(a, 1, 2), dy)
        return (xp.swapaxes(ga, 1, 2) if transpose_a else ga), \
               (xp.swapaxes(gb, 1, 2) if transpose_b else gb)
    return out, backward


@register("reshape_like", inputs=("lhs", "rhs"))
def reshape_like(xp, lhs, rhs):
    """`lhs` reshaped to the shape of `rhs` (same number of elements)."""
    if lhs.size != rhs.size:
        raise ShapeError(f"reshape_like: cannot reshape {lhs.shape} ({lhs.size} elements) like "
                         f"{rhs.shape} ({rhs.size} elements)")
    return lhs.reshape(rhs.shape), lambda dy: (dy.reshape(lhs.shape), None)
