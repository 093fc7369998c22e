"""Image operators (`mx.nd.image.*`, `mx.sym.image.*`) on HWC images or NHWC batches.

They are registered as `_image_<name>`, MXNet's internal names; `ndarray/image.py` and
`symbol/image.py` give them their public spellings. Out of scope: the colour-jitter and
resize operators of MXNet's `nd.image` (the transforms in `gluon.data.vision` cover them).
"""
import numpy as np

from ..base import MXNetError, ShapeError
from .random import generator
from .registry import register


def _check_hwc(name, data, ndims=(3, 4)):
    if data.ndim not in ndims:
        layout = " or ".join({3: "(H, W, C)", 4: "(N, H, W, C)"}[n] for n in ndims)
        raise ShapeError(f"image.{name} expects {layout}, got shape {data.shape}")


def _flip(name, data, axis):
    _check_hwc(name, data)
    axis = data.ndim + axis
    return data[(slice(None),) * axis + (slice(None, None, -1),)]


@register("_image_flip_left_right")
def flip_left_right(xp, data):
    """Mirror an HWC image (or NHWC batch) horizontally: out[:, j] = data[:, W-1-j]."""
    out = xp.ascontiguousarray(_flip("flip_left_right", data, -2))
    return out, lambda dy: (xp.ascontiguousarray(_flip("flip_left_right", dy, -2)),)


@register("_image_flip_top_bottom")
def flip_top_bottom(xp, data):
    """Flip an HWC image (or NHWC batch) vertically: out[i] = data[H-1-i]."""
    out = xp.ascontiguousarray(_flip("flip_top_bottom", data, -3))
    return out, lambda dy: (xp.ascontiguousarray(_flip("flip_top_bottom", dy, -3)),)


def _random_flip(xp, data, fn):
    if generator(xp).uniform(0, 1, (), np.float64) < 0.5:
        return fn(xp, data)
    return data.copy(), lambda dy: (dy,)


@register("_image_random_flip_left_right")
def random_flip_left_right(xp, data):
    """flip_left_right with probability 0.5, else a copy."""
    _check_hwc("random_flip_left_right", data)
    return _random_flip(xp, data, flip_left_right)


@register("_image_random_flip_top_bottom")
def random_flip_top_bottom(xp, data):
    """flip_top_bottom with probability 0.5, else a copy."""
    _check_hwc("random_flip_top_bottom", data)
    return _random_flip(xp, data, flip_top_bottom)


@register("_image_crop")
def crop(xp, data, x=0, y=0, width=0, height=0):
    """The box of `width` x `height` pixels at column `x`, row `y` of an HWC image (or of
    each image of an NHWC batch); the gradient is zero outside the box."""
    _check_hwc("crop", data)
    rows, cols = data.shape[-3:-1]
    if width <= 0 or height <= 0 or x < 0 or y < 0 or x + width > cols or y + height > rows:
        raise MXNetError(f"image.crop: the box x={x}, y={y}, width={width}, height={height} "
                         f"must have a positive size and lie inside the {cols}x{rows} image")
    box = (Ellipsis, slice(y, y + height), slice(x, x + width), slice(None))

    def backward(dy):
        grad = xp.zeros(data.shape, dy.dtype)
        grad[box] = dy
        return (grad,)
    return data[box].copy(), backward


@register("_image_to_tensor")
def to_tensor(xp, data):
    """HWC (NHWC) values in [0, 255] to float32 CHW (NCHW) in [0, 1]."""
    _check_hwc("to_tensor", data)
    order = (2, 0, 1) if data.ndim == 3 else (0, 3, 1, 2)
    inverse = tuple(np.argsort(order))
    out = xp.ascontiguousarray(xp.transpose(data.astype(np.float32) / 255.0, order))
    return out, lambda dy: (xp.transpose(dy, inverse) / 255.0,)


@register("_image_normalize")
def normalize(xp, data, mean=0.0, std=1.0):
    """(data - mean) / std per channel of a CHW image (or NCHW batch)."""
    if data.ndim not in (3, 4):
        raise ShapeError(f"image.normalize expects (C, H, W) or (N, C, H, W), got shape "
                         f"{data.shape}")
    channels = data.shape[-3]
    mean, std = (xp.broadcast_to(xp.asarray(v, data.dtype).reshape(-1), (channels,))
                 .reshape(channels, 1, 1) for v in (mean, std))
    return (data - mean) / std, lambda dy: (dy / std,)
