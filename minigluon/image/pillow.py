"""Pillow (PIL) as the codec of last resort: JPEG, BMP, GIF, WebP, TIFF and anything else
minigluon does not decode itself, when Pillow is importable."""
import io

import numpy as np

from .errors import ImageFormatError

__all__ = ["pillow_available", "decode", "encode"]


def pillow_available():
    """True if Pillow (PIL) can be imported; it adds JPEG and other formats."""
    try:
        import PIL.Image  # noqa: F401
    except ImportError:
        return False
    return True


def _pillow(what):
    try:
        import PIL.Image
    except ImportError:
        raise ImageFormatError(f"{what} needs Pillow, which is not installed; help: "
                               "`pip install Pillow`, or use PNG, PPM/PGM or .npy images, "
                               "which minigluon handles itself") from None
    return PIL.Image


def decode(buf):
    pil = _pillow("decoding this image format (JPEG, BMP, GIF, ...)")
    try:
        with pil.open(io.BytesIO(bytes(buf))) as im:
            mode = {"1": "L", "L": "L", "LA": "LA", "RGB": "RGB", "RGBA": "RGBA"}.get(im.mode)
            arr = np.asarray(im.convert(mode or ("RGBA" if "A" in im.mode else "RGB")))
    except (OSError, ValueError) as err:
        raise ImageFormatError(f"Pillow cannot decode the image: {err}") from None
    return arr[:, :, None] if arr.ndim == 2 else arr


def encode(img, fmt, quality):
    pil = _pillow(f"encoding {fmt}")
    arr = img[:, :, 0] if img.shape[2] == 1 else img
    out = io.BytesIO()
    options = {"quality": int(quality)} if fmt == "JPEG" else {}
    pil.fromarray(np.ascontiguousarray(arr)).save(out, fmt, **options)
    return out.getvalue()
