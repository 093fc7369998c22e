"""`mx.sym.image`: the image operators registered as `_image_<name>` (see `mx.nd.image`),
as graph nodes under their short names.

>>> mx.sym.image.crop(mx.sym.var('data'), 0, 0, 3, 3)
"""
from ..ndarray.registry import OPS
from .symbol import apply_op

_PREFIX = "_image_"


def _public(op, name):
    def function(*args, **kwargs):
        return apply_op(op, args, kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = op.fn.__doc__
    return function


__all__ = sorted(key[len(_PREFIX):] for key in OPS if key.startswith(_PREFIX))
for _name in __all__:
    globals()[_name] = _public(OPS[_PREFIX + _name], _name)
