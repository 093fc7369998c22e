"""`mx.nd.image`: MXNet's image operators on HWC arrays (or NHWC batches): flips, crop,
to_tensor (HWC uint8 -> CHW float32 in [0, 1]) and normalize (on CHW / NCHW). Each is
registered as `_image_<name>` (so traced graphs see it) and exposed here by its short name."""
import numpy as np

from ..base import ShapeError
from .ndarray import NDArray
from .registry import OPS, invoke, register


def _check_image(name, data, layout="HWC"):
    if data.ndim not in (3, 4):
        raise ShapeError(f"image.{name}: expects a {layout} image or an N{layout} batch, got "
                         f"shape {data.shape}")


@register("_image_flip_left_right")
def flip_left_right_op(xp, data):
    """Mirror an HWC image (or NHWC batch) left to right."""
    _check_image("flip_left_right", data)
    return xp.flip(data, axis=-2).copy(), lambda dy: (xp.flip(dy, axis=-2),)


@register("_image_flip_top_bottom")
def flip_top_bottom_op(xp, data):
    """Mirror an HWC image (or NHWC batch) top to bottom."""
    _check_image("flip_top_bottom", data)
    return xp.flip(data, axis=-3).copy(), lambda dy: (xp.flip(dy, axis=-3),)


@register("_image_crop")
def crop_op(xp, data, x, y, width, height):
    """The `height` x `width` window of an HWC image (or NHWC batch) whose top-left corner
    is column `x`, row `y`."""
    _check_image("crop", data)
    rows, cols = data.shape[-3], data.shape[-2]
    if width <= 0 or height <= 0 or x < 0 or y < 0 or x + width > cols or y + height > rows:
        raise ShapeError(f"image.crop: the window x={x}, y={y}, width={width}, "
                         f"height={height} does not fit an image of {rows} rows and {cols} "
                         "columns")
    key = (Ellipsis, slice(y, y + height), slice(x, x + width), slice(None))

    def backward(dy):
        g = xp.zeros_like(data)
        g[key] = dy
        return (g,)
    return data[key].copy(), backward


@register("_image_to_tensor")
def to_tensor_op(xp, data):
    """HWC (or NHWC) values in [0, 255] -> CHW (or NCHW) float32 in [0, 1]."""
    _check_image("to_tensor", data)
    axes = (2, 0, 1) if data.ndim == 3 else (0, 3, 1, 2)
    back = tuple(np.argsort(axes))
    out = xp.transpose(data, axes).astype(np.float32) / np.float32(255)
    return out, lambda dy: ((xp.transpose(dy, back) / 255).astype(data.dtype, copy=False),)


def _per_channel(xp, name, value, channels, ndim):
    """`value` (a number or one per channel) shaped to broadcast over CHW / NCHW."""
    value = xp.asarray(value, dtype=np.float32).reshape(-1)
    if value.size not in (1, channels):
        raise ShapeError(f"image.normalize: {name} has {value.size} values for {channels} "
                         f"channels; give one value or one per channel")
    return value.reshape((-1, 1, 1) if ndim == 3 else (1, -1, 1, 1))


@register("_image_normalize")
def normalize_op(xp, data, mean=0.0, std=1.0):
    """(data - mean) / std per channel of a CHW tensor (or NCHW batch)."""
    _check_image("normalize", data, "CHW")
    channels = data.shape[-3]
    m = _per_channel(xp, "mean", mean, channels, data.ndim)
    s = _per_channel(xp, "std", std, channels, data.ndim)
    if bool((s == 0).any()):
        raise ShapeError(f"image.normalize: std must not be 0, got {std!r}")
    out = ((data - m) / s).astype(data.dtype, copy=False)
    return out, lambda dy: ((dy / s).astype(dy.dtype, copy=False),)


def _function(name):
    op = OPS["_image_" + name]

    def function(data, *args, out=None, **kwargs):
        if not isinstance(data, NDArray):
            raise TypeError(f"image.{name}: expected an NDArray, got {type(data).__name__}; "
                            "wrap the image with mx.nd.array(...)")
        return invoke(op, (data,) + args, kwargs, out)
    function.__name__ = name
    function.__doc__ = op.fn.__doc__
    return function


flip_left_right = _function("flip_left_right")
flip_top_bottom = _function("flip_top_bottom")
crop = _function("crop")
to_tensor = _function("to_tensor")
normalize = _function("normalize")
