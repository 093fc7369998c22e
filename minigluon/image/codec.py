"""`imdecode`, `imencode` and `imread`: pick the codec from the bytes' signature or the
file extension, then apply the decode flags (channels, RGB/BGR order)."""
import numpy as np

from ..context import cpu
from ..ndarray.ndarray import NDArray
from . import npy, pillow, png, pnm
from .color import apply_flag
from .errors import ImageFormatError

__all__ = ["imdecode", "imencode", "imread"]


def _raw_decode(buf):
    """Bytes -> (H, W, C) uint8 array with the file's own channels (RGB order)."""
    head = bytes(buf[:8])
    if head.startswith(png.SIGNATURE):
        return png.decode(bytes(buf))
    if head[:1] == b"P" and head[1:2] in b"123456":
        return pnm.decode(bytes(buf))
    if head.startswith(b"\x93NUMPY"):
        return npy.decode(buf)
    if not head:
        raise ImageFormatError("cannot decode an empty buffer")
    return pillow.decode(buf)


def _as_bytes(buf):
    if isinstance(buf, NDArray):
        buf = buf.asnumpy()
    if isinstance(buf, np.ndarray):
        return buf.astype(np.uint8, copy=False).tobytes()
    if isinstance(buf, str):
        raise ImageFormatError("imdecode takes the image's bytes, not a str; help: use "
                               "imread(filename) to read a file")
    return bytes(buf)


def imdecode(buf, flag=1, to_rgb=1, out=None):
    """Decode an image from its file bytes to an NDArray (H, W, C) uint8.

    Parameters
    ----------
    buf : bytes, bytearray, NumPy uint8 array or NDArray
        The encoded image (PNG, PPM/PGM, .npy; JPEG and others with Pillow).
    flag : int
        1: three channels (colour), 0: one channel (gray), -1: the file's own channels.
    to_rgb : bool
        True: RGB order; False: BGR, as OpenCV returns.
    out : NDArray, optional
        Where to write the result.

    >>> img = mx.image.imdecode(open('digit.png', 'rb').read(), flag=0)   # (28, 28, 1)
    """
    img = apply_flag(_raw_decode(_as_bytes(buf)), flag, to_rgb)
    if out is not None:
        out[:] = NDArray(img, out.context)
        return out
    return NDArray(img, cpu())


_ENCODERS = {".png": "png", ".ppm": "pnm", ".pgm": "pnm", ".pnm": "pnm", ".npy": "npy",
             ".jpg": "JPEG", ".jpeg": "JPEG", ".bmp": "BMP", ".gif": "GIF", ".webp": "WEBP",
             ".tif": "TIFF", ".tiff": "TIFF"}


def imencode(img, img_fmt=".png", quality=95, filter_type=None):
    """Encode an (H, W, C) or (H, W) uint8 image (RGB order) to file bytes.

    Parameters
    ----------
    img : NDArray or NumPy array
    img_fmt : str
        '.png', '.ppm'/'.pgm', '.npy'; '.jpg' and others need Pillow.
    quality : int
        JPEG quality; for PNG the zlib level when 0-9 (the default level otherwise).
    filter_type : int or None
        PNG only: force one row filter (0 None, 1 Sub, 2 Up, 3 Average, 4 Paeth); None
        chooses per row among 0-2, which decode fastest here.

    >>> data = mx.image.imencode(img, '.png')
    """
    arr = img.asnumpy() if isinstance(img, NDArray) else np.asarray(img)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in (1, 2, 3, 4):
        raise ImageFormatError(f"imencode expects an HxW or HxWxC image with C in 1..4, got "
                               f"shape {arr.shape}")
    if arr.dtype != np.uint8:
        raise ImageFormatError(f"imencode expects uint8 pixels, got {arr.dtype}; help: "
                               "img.astype('uint8') after clipping to [0, 255]")
    kind = _ENCODERS.get(str(img_fmt).lower())
    if kind is None:
        raise ImageFormatError(f"unknown image format {img_fmt!r}; use one of "
                               f"{', '.join(sorted(_ENCODERS))}")
    if kind == "png":
        level = int(quality) if 0 <= int(quality) <= 9 else 6
        return png.encode(arr, level, filter_type)
    if kind == "pnm":
        return pnm.encode(arr)
    if kind == "npy":
        return npy.encode(arr)
    return pillow.encode(arr, kind, quality)


def imread(filename, flag=1, to_rgb=True, out=None):
    """Read an image file into an NDArray (H, W, C) uint8; see imdecode for the flags.

    >>> img = mx.image.imread('cat.png')
    """
    try:
        with open(filename, "rb") as fin:
            buf = fin.read()
    except OSError as err:
        raise ImageFormatError(f"cannot read image {filename!r}: {err.strerror or err}") \
            from err
    try:
        return imdecode(buf, flag, to_rgb, out)
    except ImageFormatError as err:
        raise ImageFormatError(f"{filename}: {err}") from None
