"""Functions that rearrange arrays: reshape, transpose, swapaxes, expand_dims, squeeze,
ravel, concatenate, stack, split, tile, repeat and flip."""
from ..ndarray.ndarray import NDArray
from .dispatch import as_input, call


def reshape(a, newshape, order="C"):
    """`a` with shape `newshape`; one entry may be -1 (inferred)."""
    return as_input(a).reshape(newshape, order=order)


def ravel(a, order="C"):
    """`a` as a 1-D array."""
    return reshape(a, (-1,), order)


def transpose(a, axes=None):
    """`a` with its axes permuted (reversed when `axes` is None)."""
    return as_input(a).transpose(axes)


def swapaxes(a, axis1, axis2):
    """`a` with two axes exchanged."""
    return as_input(a).swapaxes(axis1, axis2)


def expand_dims(a, axis):
    """`a` with a new size-1 axis at position `axis`."""
    return call("expand_dims", a, axis=axis)


def squeeze(a, axis=None):
    """`a` without its size-1 axes (only those in `axis`, when given)."""
    return as_input(a).squeeze(axis)


def concatenate(seq, axis=0):
    """Join arrays along an existing axis (flattened first when `axis` is None)."""
    arrays = [as_input(a) for a in seq]
    if axis is None:
        arrays, axis = [a.flatten() for a in arrays], 0
    return call("concat", *arrays, dim=axis)


def stack(arrays, axis=0):
    """Join arrays of one shape along a new axis."""
    return call("stack", *arrays, axis=axis)


def split(ary, indices_or_sections, axis=0):
    """A list of sub-arrays: `n` equal parts, or the parts between the given indices.

    >>> [p.shape for p in mx.np.split(mx.np.zeros((6, 2)), [1, 4])]
    [(1, 2), (3, 2), (2, 2)]
    """
    ary = as_input(ary)
    if isinstance(indices_or_sections, int):
        parts = call("split", ary, num_outputs=indices_or_sections, axis=axis)
        return [parts] if isinstance(parts, NDArray) else list(parts)   # one part: not a list
    bounds = [None] + [int(i) for i in indices_or_sections] + [None]
    return [call("slice_axis", ary, axis=axis, begin=b, end=e)
            for b, e in zip(bounds[:-1], bounds[1:])]


def tile(A, reps):   # noqa: N803 (NumPy's name)
    """`A` repeated `reps` times along each axis."""
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    return call("tile", A, reps=reps)


def repeat(a, repeats, axis=None):
    """Each element repeated `repeats` times along `axis` (of the flattened array when None)."""
    if not isinstance(repeats, int):
        raise TypeError(f"repeat: repeats must be an int, got {type(repeats).__name__}; "
                        "per-element repeat counts are not supported")
    return as_input(a).repeat(repeats, axis)


def flip(m, axis=None):
    """`m` with the order of elements reversed along `axis` (all axes when None)."""
    return call("flip", m, axis=axis)
