"""Crops: fixed, centred, uniformly placed, and Inception-style random-size crops. Each has
a `*_box` function that only picks the box (shared with the dataset transforms) and an
NDArray function that cuts it out and optionally resizes it."""
import math

import numpy as np

from ..ndarray import random as _random
from .conversion import like_source, numpy_image
from .resize import imresize, resize_np

__all__ = ["scale_down", "resize_short", "fixed_crop_np", "fixed_crop", "center_crop_box",
           "center_crop", "random_crop_box", "random_crop", "random_size_crop_box",
           "random_size_crop"]


def scale_down(src_size, size):
    """Shrink crop `size` (w, h) to fit in `src_size` (w, h), keeping its aspect ratio.

    >>> mx.image.scale_down((640, 480), (720, 120))
    (640, 106)
    """
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def resize_short(src, size, interp=2):
    """Resize so that the shorter edge is `size`, keeping the aspect ratio."""
    h, w = src.shape[:2]
    new_h, new_w = (size * h // w, size) if h > w else (size, size * w // h)
    return imresize(src, new_w, new_h, interp)


def fixed_crop_np(img, x0, y0, w, h, size=None, interp=2):
    """Crop a NumPy image at (x0, y0) to (w, h); resize to `size` (w, h) when given."""
    out = img[y0:y0 + h, x0:x0 + w]
    if size is not None and (w, h) != tuple(size):
        return resize_np(out, size[0], size[1], interp)
    return out


def fixed_crop(src, x0, y0, w, h, size=None, interp=2):
    """Crop `src` at (x0, y0) to width `w`, height `h`; resize to `size` (w, h) when given."""
    return like_source(np.ascontiguousarray(
        fixed_crop_np(numpy_image(src, "fixed_crop"), x0, y0, w, h, size, interp)), src)


def center_crop_box(img_hw, size):
    """(x0, y0, w, h) of the centred crop with `size` (w, h), shrunk to fit the image."""
    h, w = img_hw
    new_w, new_h = scale_down((w, h), size)
    return (w - new_w) // 2, (h - new_h) // 2, new_w, new_h


def center_crop(src, size, interp=2):
    """Crop the centre of `src` to `size` (w, h); returns (image, (x0, y0, w, h)).

    A crop larger than the image is shrunk to fit and the result resized up to `size`.
    """
    box = center_crop_box(src.shape[:2], size)
    return fixed_crop(src, *box, size, interp), box


def random_crop_box(img_hw, size):
    """(x0, y0, w, h) of a uniformly placed crop of `size` (w, h), shrunk to fit."""
    h, w = img_hw
    new_w, new_h = scale_down((w, h), size)
    u = _random.generator(np).rng.random(2)
    return int(u[0] * (w - new_w + 1)), int(u[1] * (h - new_h + 1)), new_w, new_h


def random_crop(src, size, interp=2):
    """Crop `src` at a random place to `size` (w, h); returns (image, (x0, y0, w, h)).

    Draws from minigluon's seeded random state, so mx.random.seed() makes it repeatable.
    """
    box = random_crop_box(src.shape[:2], size)
    return fixed_crop(src, *box, size, interp), box


def random_size_crop_box(img_hw, area, ratio, attempts=10):
    """(x0, y0, w, h) of a crop whose area fraction is uniform in `area` and whose aspect
    ratio w/h is log-uniform in `ratio`; None when `attempts` draws all fail to fit."""
    h, w = img_hw
    if isinstance(area, (int, float)):
        area = (area, 1.0)
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    draws = _random.generator(np).rng.random((attempts, 4))
    for u_area, u_ratio, u_x, u_y in draws.tolist():
        target = (area[0] + (area[1] - area[0]) * u_area) * h * w
        aspect = math.exp(log_lo + (log_hi - log_lo) * u_ratio)
        new_w = int(round(math.sqrt(target * aspect)))
        new_h = int(round(math.sqrt(target / aspect)))
        if 0 < new_w <= w and 0 < new_h <= h:
            return int(u_x * (w - new_w + 1)), int(u_y * (h - new_h + 1)), new_w, new_h
    return None


def random_size_crop(src, size, area, ratio, interp=2, **kwargs):
    """Random crop with area fraction in `area` and aspect ratio in `ratio`, resized to
    `size` (w, h) (the Inception-style crop); returns (image, (x0, y0, w, h))."""
    if "min_area" in kwargs:
        area = kwargs.pop("min_area")
    box = random_size_crop_box(src.shape[:2], area, ratio)
    if box is None:
        return center_crop(src, size, interp)
    return fixed_crop(src, *box, size, interp), box
