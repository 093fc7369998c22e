"""Images stored as NumPy `.npy` arrays: uint8, (H, W) or (H, W, C) with C <= 4; never
unpickled."""
import io

import numpy as np

from .errors import ImageFormatError

__all__ = ["decode", "encode"]


def decode(buf):
    try:
        arr = np.load(io.BytesIO(bytes(buf)), allow_pickle=False)
    except ValueError as err:
        raise ImageFormatError(f".npy image is unreadable: {err}") from None
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in (1, 2, 3, 4) or arr.dtype != np.uint8:
        raise ImageFormatError(f".npy image must be a uint8 HxW or HxWxC array (C <= 4), got "
                               f"{arr.dtype} of shape {arr.shape}")
    return arr


def encode(img):
    out = io.BytesIO()
    np.save(out, np.ascontiguousarray(img), allow_pickle=False)
    return out.getvalue()
