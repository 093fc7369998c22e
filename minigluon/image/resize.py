"""Resizing with OpenCV's `cv2.resize`, under MXNet's interpolation codes (which are
OpenCV's): 0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos, 9 automatic, 10 random."""
import numpy as np

from ..base import MXNetError
from ..ndarray import random as _random
from .conversion import like_source, numpy_image
from .opencv import cv2

__all__ = ["resize_np", "imresize"]

# dtypes cv2.resize takes for every interpolation; others go through float64
_NATIVE = (np.uint8, np.uint16, np.int16, np.float32, np.float64)
_MAX_CHANNELS = 4       # cv2.resize's limit; wider images are resized 4 channels at a time


def _pick_interp(interp, src_hw, dst_hw):
    if interp == 9:      # automatic, as MXNet: area to shrink, bicubic to enlarge
        if dst_hw[0] < src_hw[0] and dst_hw[1] < src_hw[1]:
            return 3
        if dst_hw[0] > src_hw[0] and dst_hw[1] > src_hw[1]:
            return 2
        return 1
    if interp == 10:
        return int(_random.generator(np).integers(0, 5, (), np.int64))
    if interp not in (0, 1, 2, 3, 4):
        raise MXNetError(f"unknown interpolation {interp!r}; use 0 nearest, 1 bilinear, "
                         "2 bicubic, 3 area, 4 Lanczos, 9 auto or 10 random")
    return interp


def _cv_resize(img, w, h, interp):
    """cv2.resize on an (H, W) or (H, W, C<=4) array of a dtype it takes; keeps the shape's
    channel axis, which OpenCV drops for one channel."""
    out = cv2().resize(img, (w, h), interpolation=interp)
    return out.reshape((h, w) + img.shape[2:])


def _resize_any(img, w, h, interp):
    """Split channels beyond OpenCV's limit and convert dtypes it does not take."""
    if img.ndim == 3 and img.shape[2] > _MAX_CHANNELS:
        parts = [_resize_any(img[:, :, c:c + _MAX_CHANNELS], w, h, interp)
                 for c in range(0, img.shape[2], _MAX_CHANNELS)]
        return np.concatenate(parts, axis=2)
    if img.dtype.type in _NATIVE:
        return _cv_resize(img, w, h, interp)
    out = _cv_resize(img.astype(np.float64), w, h, interp)
    if np.issubdtype(img.dtype, np.integer):
        info = np.iinfo(img.dtype)
        out = np.clip(np.rint(out), info.min, info.max)
    return out.astype(img.dtype)


def resize_np(img, w, h, interp=1):
    """Resize a NumPy (H, W) or (H, W, C) array to (h, w[, C]); keeps img's dtype.

    >>> mx.image.resize_np(np.zeros((375, 500, 3), np.uint8), 224, 224).shape
    (224, 224, 3)
    """
    w, h = int(w), int(h)
    if w <= 0 or h <= 0:
        raise MXNetError(f"resize to {w}x{h}: width and height must be positive")
    if img.ndim not in (2, 3) or img.shape[0] == 0 or img.shape[1] == 0:
        raise MXNetError(f"resize expects a non-empty (H, W) or (H, W, C) image, got shape "
                         f"{img.shape}")
    if img.shape[0] == h and img.shape[1] == w:
        return img.copy()
    return _resize_any(img, w, h, _pick_interp(interp, img.shape[:2], (h, w)))


def imresize(src, w, h, interp=1, out=None):
    """Resize image `src` (H, W, C) to width `w` and height `h`.

    `interp`: 0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos, 9 auto (area to shrink,
    bicubic to enlarge, else bilinear), 10 random among 0-4. The result keeps src's dtype.

    >>> mx.image.imresize(img, 224, 224).shape
    (224, 224, 3)
    """
    res = like_source(resize_np(numpy_image(src, "imresize"), w, h, interp), src)
    if out is not None:
        out[:] = res
        return out
    return res
