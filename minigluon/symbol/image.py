"""`mx.sym.image`: the image operators of `ndarray/ops_image.py` as graph nodes.

>>> mx.sym.image.crop(mx.sym.var('data'), 0, 0, 3, 3)
"""
from ..ndarray import image as nd_image
from ..ndarray.registry import OPS
from .symbol import apply_op


def _public(name):
    op = OPS["_image_" + name]

    def function(*args, **kwargs):
        return apply_op(op, args, kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = op.fn.__doc__
    return function


__all__ = list(nd_image.__all__)

for _name in __all__:
    globals()[_name] = _public(_name)
