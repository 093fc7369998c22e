"""MXNet's Python-level array functions that are not operators of their own: moveaxis,
concatenate and onehot_encode, each a thin layer over registered operators (so autograd
records them through those)."""
from ..base import ShapeError
from .registry import OPS, invoke


def _axes(name, axes, ndim):
    """`axes` (an int or a sequence) as distinct axes in [0, ndim)."""
    axes = [axes] if isinstance(axes, int) else list(axes)
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"moveaxis: {name} axis {a} is out of range for an array of "
                             f"{ndim} dimensions; use an axis in [{-ndim}, {ndim})")
    axes = [a % ndim for a in axes]
    if len(set(axes)) != len(axes):
        raise ShapeError(f"moveaxis: repeated axes in {name} {axes}; give each axis once")
    return axes


def moveaxis(tensor, source, destination):
    """Move the axes `source` to the positions `destination`; the others keep their order.

    >>> mx.nd.moveaxis(mx.nd.zeros((3, 4, 5)), 0, -1).shape
    (4, 5, 3)
    """
    src = _axes("source", source, tensor.ndim)
    dst = _axes("destination", destination, tensor.ndim)
    if len(src) != len(dst):
        raise ShapeError(f"moveaxis: source {source} and destination {destination} must "
                         "name the same number of axes")
    order = [a for a in range(tensor.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return invoke(OPS["transpose"], (tensor,), {"axes": tuple(order)})


def concatenate(arrays, axis=0, always_copy=True):
    """Join a list of arrays along `axis` (NumPy's name; `nd.concat` with `dim=axis`).

    With `always_copy=False` a list of one array gives that array itself.
    """
    arrays = list(arrays)
    if not arrays:
        raise ShapeError("concatenate: needs at least one array")
    if len(arrays) == 1 and not always_copy:
        return arrays[0]
    return invoke(OPS["concat"], tuple(arrays), {"dim": axis})


def onehot_encode(indices, out):
    """Write the one-hot rows of `indices` (one class index per row) into the 2-D `out`."""
    return invoke(OPS["_onehot_encode"], (indices, out), {}, out)
