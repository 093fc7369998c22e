"""`imdecode`, `imencode` and `imread` on OpenCV's codecs (JPEG, PNG, BMP, GIF, WebP, TIFF,
PPM/PGM, ...), with MXNet's flags: channels from `flag`, RGB unless `to_rgb` is false."""
import numpy as np

from ..context import cpu
from ..ndarray.ndarray import NDArray
from .errors import ImageFormatError
from .opencv import cv2

__all__ = ["imdecode", "imencode", "imread"]

# leading bytes -> format name, only to say what a buffer that fails to decode looked like
_SIGNATURES = ((b"\xff\xd8\xff", "JPEG"), (b"\x89PNG\r\n\x1a\n", "PNG"), (b"GIF8", "GIF"),
               (b"BM", "BMP"), (b"II*\0", "TIFF"), (b"MM\0*", "TIFF"), (b"RIFF", "WebP"),
               (b"P1", "PBM"), (b"P2", "PGM"), (b"P3", "PPM"), (b"P4", "PBM"),
               (b"P5", "PGM"), (b"P6", "PPM"), (b"\x93NUMPY", "NumPy .npy"))


def _format_of(data):
    return next((name for sig, name in _SIGNATURES if data[:len(sig)] == sig), None)


def _decode_error(data):
    kind = _format_of(data[:8].tobytes())
    if kind == "NumPy .npy":
        return ImageFormatError(f"cannot decode {len(data)} bytes of a NumPy .npy file: it is "
                                "not an image format; help: np.load() it and wrap it in "
                                "mx.nd.array")
    if kind is not None:
        return ImageFormatError(f"cannot decode {len(data)} bytes of {kind}: the data is "
                                "corrupt or truncated")
    return ImageFormatError(f"cannot decode {len(data)} bytes starting {data[:8].tobytes()!r}: "
                            "not an image format OpenCV reads (JPEG, PNG, BMP, GIF, WebP, "
                            "TIFF, PPM/PGM, ...)")


def _as_buffer(buf):
    """The encoded bytes as a 1-D uint8 array, without a copy where possible."""
    if isinstance(buf, NDArray):
        buf = buf.asnumpy()
    if isinstance(buf, np.ndarray):
        return np.ascontiguousarray(buf, np.uint8).reshape(-1)
    if isinstance(buf, str):
        raise ImageFormatError("imdecode takes the image's bytes, not a str; help: use "
                               "imread(filename) to read a file")
    try:
        return np.frombuffer(buf, np.uint8)
    except TypeError:
        raise ImageFormatError(f"imdecode takes bytes, bytearray, a uint8 array or an "
                               f"NDArray, got {type(buf).__name__}") from None


def _read_mode(cv, flag, to_rgb):
    """OpenCV's read mode for MXNet's flag: >0 colour, 0 gray, <0 the file's own channels."""
    if flag == 0:
        return cv.IMREAD_GRAYSCALE
    if flag < 0:
        return cv.IMREAD_UNCHANGED
    return cv.IMREAD_COLOR_RGB if to_rgb else cv.IMREAD_COLOR


def _to_uint8(img):
    """16-bit pixels (PNG, TIFF, PGM read with flag -1) keep their high byte, as OpenCV's
    colour and gray reads do; minigluon's images are uint8."""
    if img.dtype == np.uint16:
        return (img >> 8).astype(np.uint8)
    if img.dtype != np.uint8:
        raise ImageFormatError(f"the image has {img.dtype} pixels; mx.image handles 8- and "
                               "16-bit images; help: read it with flag=1 or flag=0")
    return img


def decode_np(buf, flag=1, to_rgb=True):
    """Encoded bytes -> NumPy (H, W, C) uint8 with the channels `flag` asks for."""
    data = _as_buffer(buf)
    if data.size == 0:
        raise ImageFormatError("cannot decode an empty buffer")
    cv = cv2()
    img = cv.imdecode(data, _read_mode(cv, flag, to_rgb))
    if img is None:
        raise _decode_error(data)
    img = _to_uint8(img)
    if img.ndim == 2:
        return img[:, :, None]
    if flag < 0 and to_rgb and img.shape[2] >= 3:
        cv.cvtColor(img, cv.COLOR_BGR2RGB if img.shape[2] == 3 else cv.COLOR_BGRA2RGBA, img)
    return img


def imdecode(buf, flag=1, to_rgb=1, out=None):
    """Decode an image from its file bytes to an NDArray (H, W, C) uint8.

    Parameters
    ----------
    buf : bytes, bytearray, NumPy uint8 array or NDArray
        The encoded image: JPEG, PNG, BMP, GIF, WebP, TIFF, PPM/PGM, ... (OpenCV's codecs).
    flag : int
        1: three channels (colour), 0: one channel (gray), -1: the file's own channels
        (an alpha channel is kept).
    to_rgb : bool
        True: RGB order; False: BGR, as OpenCV returns.
    out : NDArray, optional
        Where to write the result.

    >>> img = mx.image.imdecode(open('digit.png', 'rb').read(), flag=0)   # (28, 28, 1)
    """
    img = decode_np(buf, flag, to_rgb)
    if out is not None:
        out[:] = NDArray(img, out.context)
        return out
    return NDArray(img, cpu())


def _check_encodable(arr):
    if arr.ndim != 3 or arr.shape[2] not in (1, 3, 4):
        raise ImageFormatError(f"imencode expects an HxW or HxWxC image with C 1, 3 or 4, "
                               f"got shape {arr.shape}; help: a gray+alpha image must be "
                               "expanded to RGBA")
    if arr.dtype != np.uint8:
        raise ImageFormatError(f"imencode expects uint8 pixels, got {arr.dtype}; help: "
                               "img.astype('uint8') after clipping to [0, 255]")


def _write_params(cv, ext, quality):
    """OpenCV's encoder options: quality for JPEG and WebP, the zlib level (0-9) for PNG."""
    quality = int(quality)
    if ext in (".jpg", ".jpeg"):
        return [cv.IMWRITE_JPEG_QUALITY, quality]
    if ext == ".webp":
        return [cv.IMWRITE_WEBP_QUALITY, max(1, quality)]
    if ext == ".png" and 0 <= quality <= 9:
        return [cv.IMWRITE_PNG_COMPRESSION, quality]
    return []


def imencode(img, img_fmt=".png", quality=95):
    """Encode an (H, W, C) or (H, W) uint8 image (RGB order) to file bytes.

    Parameters
    ----------
    img : NDArray or NumPy array
        1 (gray), 3 (RGB) or 4 (RGBA) channels.
    img_fmt : str
        The file extension: '.png', '.jpg', '.bmp', '.webp', '.tif', '.ppm', '.pgm', ...
    quality : int
        JPEG and WebP quality; for PNG the zlib level when 0-9 (OpenCV's default otherwise).

    >>> data = mx.image.imencode(img, '.jpg', quality=90)
    """
    arr = img.asnumpy() if isinstance(img, NDArray) else np.asarray(img)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    _check_encodable(arr)
    cv = cv2()
    ext = str(img_fmt).lower()
    if not ext.startswith(".") or not cv.haveImageWriter("image" + ext):
        raise ImageFormatError(f"cannot encode images as {img_fmt!r}; help: pass a file "
                               "extension OpenCV writes, such as '.png', '.jpg', '.bmp', "
                               "'.webp', '.tif', '.ppm' or '.pgm'")
    if arr.shape[2] >= 3:      # OpenCV's encoders take BGR(A)
        arr = cv.cvtColor(arr, cv.COLOR_RGB2BGR if arr.shape[2] == 3 else cv.COLOR_RGBA2BGRA)
    try:
        ok, data = cv.imencode(ext, arr, _write_params(cv, ext, quality))
    except cv.error as err:
        raise ImageFormatError(f"OpenCV cannot encode a {arr.shape} image as {ext}: "
                               f"{str(err).strip().splitlines()[-1]}") from None
    if not ok:
        raise ImageFormatError(f"OpenCV could not encode a {arr.shape} image as {ext}")
    return data.tobytes()


def imread(filename, flag=1, to_rgb=True, out=None):
    """Read an image file into an NDArray (H, W, C) uint8; see imdecode for the flags.

    >>> img = mx.image.imread('cat.jpg')
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
