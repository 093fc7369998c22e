"""`mx.nd.image`: the image operators of `ops_image.py` under MXNet's public names.

>>> mx.nd.image.flip_left_right(mx.nd.array(img, dtype='uint8'))
"""
from .registry import OPS, invoke

__all__ = ["flip_left_right", "flip_top_bottom", "random_flip_left_right",
           "random_flip_top_bottom", "crop", "to_tensor", "normalize"]


def _public(name):
    op = OPS["_image_" + name]

    def function(*args, out=None, **kwargs):
        return invoke(op, args, kwargs, out)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = op.fn.__doc__
    return function


for _name in __all__:
    globals()[_name] = _public(_name)
