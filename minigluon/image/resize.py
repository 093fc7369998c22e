"""Resizing with OpenCV's pixel-centre convention and interpolation codes: separable 1-D
passes, each a dense matrix product for small images or a gather of taps for large ones."""
import functools
import math

import numpy as np

from ..base import MXNetError
from ..ndarray import random as _random
from .conversion import like_source, numpy_image

__all__ = ["resize_np", "imresize"]


def _cubic(t, a=-0.75):
    """OpenCV's bicubic kernel."""
    t = np.abs(t)
    return np.where(t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1,
                    np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0))


@functools.lru_cache(maxsize=4096)
def _taps(n_in, n_out, interp):
    """Source indices (n_out, k) and weights (n_out, k) that resize one axis, with OpenCV's
    pixel-centre convention and edge pixels repeated."""
    scale = n_in / n_out
    dst = np.arange(n_out, dtype=np.float64)
    if interp == 0:
        idx = np.minimum(np.floor(dst * scale).astype(np.intp), n_in - 1)[:, None]
        return idx, np.ones((n_out, 1), np.float32)
    if interp == 3 and scale > 1:
        k = int(math.ceil(scale)) + 1
        start = dst * scale
        first = np.floor(start).astype(np.intp)
        cells = first[:, None] + np.arange(k)
        overlap = (np.minimum(cells + 1, (start + scale)[:, None])
                   - np.maximum(cells, start[:, None]))
        weights = np.clip(overlap, 0, None) / scale
        return np.clip(cells, 0, n_in - 1), weights.astype(np.float32)
    src = (dst + 0.5) * scale - 0.5
    base = np.floor(src)
    frac = src - base
    if interp == 2:
        offsets = np.arange(-1, 3)
        weights = _cubic(frac[:, None] - offsets)
    else:
        offsets = np.arange(2)
        weights = np.stack([1 - frac, frac], axis=1)
    idx = np.clip(base.astype(np.intp)[:, None] + offsets, 0, n_in - 1)
    return idx, weights.astype(np.float32)


def _resize_axis(arr, axis, n_out, interp):
    idx, weights = _taps(arr.shape[axis], n_out, interp)
    shape = [1] * arr.ndim
    shape[axis] = n_out
    if idx.shape[1] == 1:
        return arr.take(idx[:, 0], axis)
    out = arr.take(idx[:, 0], axis) * weights[:, 0].reshape(shape)
    for j in range(1, idx.shape[1]):
        out += arr.take(idx[:, j], axis) * weights[:, j].reshape(shape)
    return out


@functools.lru_cache(maxsize=1024)
def _dense(n_in, n_out, interp, channels=0):
    """The taps as a dense (n_out, n_in) matrix; with `channels`, the transposed matrix
    that resizes rows of channel-interleaved pixels, (n_in*C, n_out*C)."""
    idx, weights = _taps(n_in, n_out, interp)
    mat = np.zeros((n_out, n_in), np.float32)
    np.add.at(mat, (np.arange(n_out)[:, None], idx), weights)
    if channels:
        return np.ascontiguousarray(np.kron(mat, np.eye(channels, dtype=np.float32)).T)
    return mat


_DENSE_MAX_MACS = 4_000_000


def _resize_separable(img, w, h, interp):
    """Two 1-D passes; small images as two matrix products (few large NumPy calls beat
    many small ones), large ones by gathering the taps."""
    h_in, w_in = img.shape[:2]
    chans = img.shape[2] if img.ndim == 3 else 1
    macs = h * h_in * w_in * chans + h * w_in * w * chans * chans
    if interp != 0 and macs <= _DENSE_MAX_MACS:
        rows = _dense(h_in, h, interp) @ img.reshape(h_in, w_in * chans)
        return (rows @ _dense(w_in, w, interp, chans)).reshape((h, w) + img.shape[2:])
    # shrink the axis that shrinks most first, so the second pass works on less data
    if h / h_in <= w / w_in:
        return _resize_axis(_resize_axis(img, 0, h, interp), 1, w, interp)
    return _resize_axis(_resize_axis(img, 1, w, interp), 0, h, interp)


def _pick_interp(interp, src_hw, dst_hw):
    if interp == 9:      # automatic, as MXNet: area to shrink, bicubic to enlarge
        if dst_hw[0] < src_hw[0] and dst_hw[1] < src_hw[1]:
            return 3
        if dst_hw[0] > src_hw[0] and dst_hw[1] > src_hw[1]:
            return 2
        return 1
    if interp == 10:
        interp = int(_random.generator(np).integers(0, 5, (), np.int64))
    if interp not in (0, 1, 2, 3, 4):
        raise MXNetError(f"unknown interpolation {interp!r}; use 0 nearest, 1 bilinear, "
                         "2 bicubic, 3 area, 4 Lanczos, 9 auto or 10 random")
    return 2 if interp == 4 else interp


def resize_np(img, w, h, interp=1):
    """Resize a NumPy (H, W, ...) array to (h, w, ...); the result keeps img's dtype."""
    w, h = int(w), int(h)
    if w <= 0 or h <= 0:
        raise MXNetError(f"resize to {w}x{h}: width and height must be positive")
    if img.shape[0] == h and img.shape[1] == w:
        return img.copy()
    interp = _pick_interp(interp, img.shape[:2], (h, w))
    out = _resize_separable(img, w, h, interp)
    if img.dtype == np.uint8:
        if interp == 0:
            return out
        if interp == 2:
            np.clip(out, 0, 255, out=out)
        out += 0.5
        return out.astype(np.uint8)
    return out.astype(img.dtype, copy=False)


def imresize(src, w, h, interp=1, out=None):
    """Resize image `src` (H, W, C) to width `w` and height `h`.

    `interp` uses OpenCV's codes (0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 as 2,
    9 auto, 10 random). The result keeps src's dtype.

    >>> mx.image.imresize(img, 224, 224).shape
    (224, 224, 3)
    """
    res = like_source(resize_np(numpy_image(src, "imresize"), w, h, interp), src)
    if out is not None:
        out[:] = res
        return out
    return res
