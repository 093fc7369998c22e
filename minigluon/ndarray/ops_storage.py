"""Storage-type conversion: `cast_storage` (what `x.tostype(stype)` runs) and the sparse
kernels of `zeros_like`, which create rather than compute.

`cast_storage` takes any storage, so it is its own sparse kernel and never falls back; its
gradient is the output gradient, passed back as a dense buffer like every gradient.
"""
from . import sparse_storage
from .registry import register, register_sparse


@register("cast_storage")
def cast_storage(xp, data, stype):
    """The input in storage type `stype` ('default', 'row_sparse' or 'csr'); a new array."""
    sparse_storage.check_stype(stype, "cast_storage")
    if sparse_storage.stype_of(data) == stype:
        out = data.copy()
    else:
        out = sparse_storage.convert(xp, data, stype)
    return out, lambda dy: (dy,)


register_sparse("cast_storage")(cast_storage)


@register_sparse("zeros_like")
def zeros_like(xp, data):
    """Zeros in the input's own storage type: nothing is stored."""
    return sparse_storage.zeros(xp, data.stype, data.shape, data.dtype), None
