"""`mx.image`: decode, encode, resize and crop HxWxC uint8 images held in NDArrays.

Formats: PNG (decoded and encoded here with zlib + NumPy: 1/2/4/8/16-bit gray, gray+alpha,
RGB, RGBA and palette images, every filter type; Adam7-interlaced files need Pillow),
binary and ASCII PPM/PGM, and `.npy` arrays. JPEG and the other formats go through Pillow
when it is importable.

Channel order follows MXNet: `imdecode`/`imread` give RGB unless `to_rgb=False` (then BGR,
as OpenCV does); `imencode` takes RGB. Interpolation codes are OpenCV's: 0 nearest,
1 bilinear, 2 bicubic, 3 area, 4 Lanczos (computed as bicubic here), 9 automatic, 10 random.

Out of scope: MXNet's ImageIter and augmenter classes, and 16-bit output images (16-bit
inputs are reduced to 8 bits, as OpenCV does for colour or gray reads).

Example::

    img = mx.image.imread('cat.png')            # NDArray (H, W, 3) uint8, RGB
    small = mx.image.imresize(img, 32, 32)      # bilinear
"""
import functools
import io
import math
import struct
import zlib

import numpy as np

from .base import MXNetError
from .context import cpu
from .ndarray import random as _random
from .ndarray.ndarray import NDArray

__all__ = ["imdecode", "imencode", "imread", "imresize", "scale_down", "resize_short",
           "fixed_crop", "center_crop", "random_crop", "random_size_crop", "color_normalize",
           "ImageFormatError", "pillow_available"]


class ImageFormatError(MXNetError, ValueError):
    """Image bytes that cannot be decoded, or an image that cannot be encoded."""


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


# ---- PNG ----------------------------------------------------------------------------------
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}        # colour type -> samples per pixel
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}


def _png_chunks(buf):
    """Yield (type, data, offset) of each chunk, checking lengths and CRCs."""
    pos = len(_PNG_SIGNATURE)
    while pos < len(buf):
        if pos + 8 > len(buf):
            raise ImageFormatError(f"PNG truncated at byte {pos}: incomplete chunk header")
        length, ctype = struct.unpack(">I4s", buf[pos:pos + 8])
        end = pos + 12 + length
        if end > len(buf):
            raise ImageFormatError(f"PNG truncated at byte {pos}: chunk {ctype!r} needs "
                                   f"{length + 12} bytes, {len(buf) - pos} left")
        data = buf[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", buf[end - 4:end])
        if zlib.crc32(ctype + data) & 0xffffffff != crc:
            raise ImageFormatError(f"PNG corrupt at byte {pos}: CRC mismatch in chunk {ctype!r}")
        yield ctype, data, pos
        if ctype == b"IEND":
            return
        pos = end
    raise ImageFormatError(f"PNG truncated at byte {pos}: no IEND chunk")


def _png_header(data):
    if len(data) != 13:
        raise ImageFormatError(f"PNG IHDR chunk has {len(data)} bytes, expected 13")
    width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", data)
    if ctype not in _PNG_CHANNELS or depth not in _PNG_DEPTHS[ctype]:
        raise ImageFormatError(f"PNG with colour type {ctype} and bit depth {depth} is not a "
                               "valid combination")
    if width == 0 or height == 0:
        raise ImageFormatError(f"PNG with an empty size {width}x{height}")
    return width, height, depth, ctype, interlace


def _png_decode(buf):
    """Decode PNG bytes to an (H, W, C) uint8 array in RGB(A) / gray(+alpha) order."""
    header, palette, trns, idat = None, None, None, []
    for ctype, data, _ in _png_chunks(buf):
        if ctype == b"IHDR":
            header = _png_header(data)
        elif ctype == b"PLTE":
            palette = np.frombuffer(data, np.uint8).reshape(-1, 3)
        elif ctype == b"tRNS":
            trns = np.frombuffer(data, np.uint8)
        elif ctype == b"IDAT":
            idat.append(data)
    if header is None or not idat:
        raise ImageFormatError("PNG without an IHDR or IDAT chunk")
    width, height, depth, ctype, interlace = header
    if interlace:
        if pillow_available():
            return _pillow_decode(buf)
        raise ImageFormatError("Adam7-interlaced PNG is not supported without Pillow; help: "
                               "`pip install Pillow`, or re-save the image non-interlaced")
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as err:
        raise ImageFormatError(f"PNG image data is corrupt: {err}") from None
    channels = _PNG_CHANNELS[ctype]
    stride = (width * channels * depth + 7) // 8
    if len(raw) < height * (stride + 1):
        raise ImageFormatError(f"PNG image data truncated: {len(raw)} bytes, expected "
                               f"{height * (stride + 1)} for {width}x{height}")
    bpp = max(1, channels * depth // 8)
    rows = _png_unfilter(np.frombuffer(raw, np.uint8, height * (stride + 1)), height,
                         stride, bpp)
    img = _png_samples(rows, width, channels, depth)
    if ctype == 3:
        return _png_apply_palette(img[:, :, 0], palette, trns)
    return _scale_low_depth_gray(img, depth)


def _png_unfilter(raw, height, stride, bpp):
    """Undo the per-row PNG filters (None, Sub, Up, Average, Paeth)."""
    lines = raw.reshape(height, stride + 1)
    out = np.empty((height, stride), np.uint8)
    prior = np.zeros(stride, np.uint8)
    for y in range(height):
        ftype, line = lines[y, 0], lines[y, 1:]
        if ftype == 0:
            out[y] = line
        elif ftype == 1:
            out[y] = np.cumsum(line.reshape(-1, bpp), axis=0, dtype=np.uint8).ravel()
        elif ftype == 2:
            out[y] = line + prior
        elif ftype == 3:
            out[y] = _unfilter_average(line.tolist(), prior.tolist(), bpp)
        elif ftype == 4:
            out[y] = _unfilter_paeth(line.tolist(), prior.tolist(), bpp)
        else:
            raise ImageFormatError(f"PNG row {y} has unknown filter type {ftype}")
        prior = out[y]
    return out


def _unfilter_average(cur, prior, bpp):
    # sequential along the row: each byte depends on the decoded byte bpp to its left
    for i in range(bpp):
        cur[i] = (cur[i] + (prior[i] >> 1)) & 255
    for i in range(bpp, len(cur)):
        cur[i] = (cur[i] + ((cur[i - bpp] + prior[i]) >> 1)) & 255
    return cur


def _unfilter_paeth(cur, prior, bpp):
    for i in range(bpp):
        cur[i] = (cur[i] + prior[i]) & 255
    for i in range(bpp, len(cur)):
        a, b, c = cur[i - bpp], prior[i], prior[i - bpp]
        pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
        pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        cur[i] = (cur[i] + pred) & 255
    return cur


def _png_samples(rows, width, channels, depth):
    """Unfiltered rows -> (H, W, C) uint8 samples (16 bits keep their high byte)."""
    height = rows.shape[0]
    if depth == 8:
        return rows[:, :width * channels].reshape(height, width, channels)
    if depth == 16:
        return rows[:, :width * channels * 2].reshape(height, width, channels, 2)[..., 0].copy()
    bits = np.unpackbits(rows, axis=1)[:, :width * depth].reshape(height, width, depth)
    values = (bits * (1 << np.arange(depth - 1, -1, -1, dtype=np.uint8))).sum(
        axis=2, dtype=np.uint8)
    return values[:, :, None]


def _png_apply_palette(indices, palette, trns):
    if palette is None:
        raise ImageFormatError("palette PNG without a PLTE chunk")
    if int(indices.max()) >= len(palette):
        raise ImageFormatError(f"palette PNG uses colour {int(indices.max())} but its "
                               f"palette has {len(palette)} entries")
    if trns is None:
        return palette[indices]
    alpha = np.full(len(palette), 255, np.uint8)
    alpha[:min(len(trns), len(palette))] = trns[:len(palette)]
    return np.concatenate([palette, alpha[:, None]], axis=1)[indices]


def _scale_low_depth_gray(img, depth):
    return img if depth >= 8 else (img * (255 // ((1 << depth) - 1))).astype(np.uint8)


def _png_filter(rows, bpp, filter_type):
    """Filter (H, stride) uint8 rows; `filter_type` None picks per row, among None, Sub and
    Up, the filter whose output has the smallest sum of absolute signed bytes (the usual
    heuristic, limited to the filters that the decoder here undoes without a Python loop)."""
    x = rows.astype(np.int16)
    up = np.zeros_like(x)
    up[1:] = x[:-1]
    left = np.zeros_like(x)
    left[:, bpp:] = x[:, :-bpp]
    upleft = np.zeros_like(x)
    upleft[:, bpp:] = up[:, :-bpp]
    pa, pb, pc = np.abs(up - upleft), np.abs(left - upleft), np.abs(left + up - 2 * upleft)
    paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upleft))
    candidates = np.stack([x, x - left, x - up, x - (left + up) // 2, x - paeth])
    filtered = (candidates & 255).astype(np.uint8)
    if filter_type is None:
        cost = np.abs(filtered.view(np.int8).astype(np.int32)).sum(axis=2)
        choice = cost[:3].argmin(axis=0)
    else:
        if filter_type not in range(5):
            raise ImageFormatError(f"PNG filter type must be 0..4 or None, got {filter_type!r}")
        choice = np.full(len(rows), filter_type)
    body = filtered[choice, np.arange(len(rows))]
    return np.concatenate([choice.astype(np.uint8)[:, None], body], axis=1)


def _png_encode(img, level=6, filter_type=None):
    """(H, W, C) uint8 with C in 1..4 (gray, gray+alpha, RGB, RGBA) -> PNG bytes."""
    height, width, channels = img.shape
    ctype = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    rows = np.ascontiguousarray(img).reshape(height, width * channels)
    data = zlib.compress(_png_filter(rows, channels, filter_type).tobytes(), level)

    def chunk(ctype_, body):
        return (struct.pack(">I", len(body)) + ctype_ + body
                + struct.pack(">I", zlib.crc32(ctype_ + body) & 0xffffffff))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, ctype, 0, 0, 0)
    return _PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


# ---- PPM / PGM ----------------------------------------------------------------------------
def _pnm_tokens(buf, count):
    """The first `count` header tokens of a PNM file and the offset just after them."""
    tokens, pos = [], 2
    while len(tokens) < count:
        while pos < len(buf) and buf[pos:pos + 1].isspace():
            pos += 1
        if buf[pos:pos + 1] == b"#":
            pos = buf.find(b"\n", pos)
            pos = len(buf) if pos < 0 else pos
            continue
        start = pos
        while pos < len(buf) and not buf[pos:pos + 1].isspace():
            pos += 1
        if start == pos:
            raise ImageFormatError(f"PPM/PGM header truncated at byte {pos}")
        tokens.append(buf[start:pos])
    return tokens, pos + 1


def _pnm_decode(buf):
    magic = buf[:2]
    if magic not in (b"P2", b"P3", b"P5", b"P6"):
        raise ImageFormatError(f"unsupported PNM kind {magic!r}; use P2/P3/P5/P6 (PGM or PPM)")
    tokens, pos = _pnm_tokens(buf, 3)
    try:
        width, height, maxval = (int(t) for t in tokens)
    except ValueError:
        raise ImageFormatError(f"PPM/PGM header has a non-numeric size or maxval: "
                               f"{b' '.join(tokens)!r}") from None
    if not (0 < maxval < 65536):
        raise ImageFormatError(f"PPM/PGM maxval must be 1..65535, got {maxval}")
    channels = 3 if magic in (b"P3", b"P6") else 1
    count = width * height * channels
    if magic in (b"P2", b"P3"):
        values = np.array([int(t) for t in buf[pos - 1:].split()[:count]], dtype=np.int64)
    else:
        dtype = np.uint8 if maxval < 256 else np.dtype(">u2")
        values = np.frombuffer(buf, dtype, count, pos) if len(buf) - pos >= \
            count * np.dtype(dtype).itemsize else np.zeros(0)
    if values.size < count:
        raise ImageFormatError(f"PPM/PGM data truncated: {width}x{height}x{channels} samples "
                               "expected")
    if maxval != 255:
        values = values.astype(np.int64) * 255 // maxval
    return values.astype(np.uint8).reshape(height, width, channels)


def _pnm_encode(img):
    channels = img.shape[2]
    if channels not in (1, 3):
        raise ImageFormatError(f"PPM/PGM holds 1 or 3 channels, got {channels}")
    magic = b"P6" if channels == 3 else b"P5"
    height, width = img.shape[:2]
    return magic + f"\n{width} {height}\n255\n".encode() + np.ascontiguousarray(img).tobytes()


# ---- .npy and Pillow ----------------------------------------------------------------------
def _npy_decode(buf):
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


def _npy_encode(img):
    out = io.BytesIO()
    np.save(out, np.ascontiguousarray(img), allow_pickle=False)
    return out.getvalue()


def _pillow_decode(buf):
    pil = _pillow("decoding this image format (JPEG, BMP, GIF, ...)")
    try:
        with pil.open(io.BytesIO(bytes(buf))) as im:
            mode = {"1": "L", "L": "L", "LA": "LA", "RGB": "RGB", "RGBA": "RGBA"}.get(im.mode)
            arr = np.asarray(im.convert(mode or ("RGBA" if "A" in im.mode else "RGB")))
    except (OSError, ValueError) as err:
        raise ImageFormatError(f"Pillow cannot decode the image: {err}") from None
    return arr[:, :, None] if arr.ndim == 2 else arr


def _pillow_encode(img, fmt, quality):
    pil = _pillow(f"encoding {fmt}")
    arr = img[:, :, 0] if img.shape[2] == 1 else img
    out = io.BytesIO()
    options = {"quality": int(quality)} if fmt == "JPEG" else {}
    pil.fromarray(np.ascontiguousarray(arr)).save(out, fmt, **options)
    return out.getvalue()


# ---- decode / encode / read ---------------------------------------------------------------
def _raw_decode(buf):
    """Bytes -> (H, W, C) uint8 array with the file's own channels (RGB order)."""
    head = bytes(buf[:8])
    if head.startswith(_PNG_SIGNATURE):
        return _png_decode(bytes(buf))
    if head[:1] == b"P" and head[1:2] in b"123456":
        return _pnm_decode(bytes(buf))
    if head.startswith(b"\x93NUMPY"):
        return _npy_decode(buf)
    if not head:
        raise ImageFormatError("cannot decode an empty buffer")
    return _pillow_decode(buf)


def _to_gray(img):
    """Luma as OpenCV computes it: 0.299 R + 0.587 G + 0.114 B, rounded."""
    rgb = img[:, :, :3].astype(np.float32)
    gray = rgb @ np.array([0.299, 0.587, 0.114], np.float32)
    return np.clip(gray + 0.5, 0, 255).astype(np.uint8)[:, :, None]


def _apply_flag(img, flag, to_rgb):
    channels = img.shape[2]
    if flag == 0:
        img = img[:, :, :1] if channels <= 2 else _to_gray(img)
    elif flag > 0:
        img = np.repeat(img[:, :, :1], 3, axis=2) if channels <= 2 else img[:, :, :3]
    if not to_rgb and img.shape[2] >= 3:
        img = img[:, :, [2, 1, 0] + list(range(3, img.shape[2]))]
    return np.ascontiguousarray(img)


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
    img = _apply_flag(_raw_decode(_as_bytes(buf)), flag, to_rgb)
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
        return _png_encode(arr, level, filter_type)
    if kind == "pnm":
        return _pnm_encode(arr)
    if kind == "npy":
        return _npy_encode(arr)
    return _pillow_encode(arr, kind, quality)


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


# ---- resizing -----------------------------------------------------------------------------
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


def _np_image(src, what):
    if isinstance(src, NDArray):
        return src.asnumpy() if src.context.device_type != "cpu" else src._data
    if isinstance(src, np.ndarray):
        return src
    raise MXNetError(f"{what} expects an NDArray image (H, W, C), got {type(src).__name__}")


def _wrap(arr, like):
    ctx = like.context if isinstance(like, NDArray) else cpu()
    if ctx.device_type == "cpu":
        return NDArray(arr, ctx)
    from .ndarray import array
    return array(arr, ctx=ctx, dtype=arr.dtype)


def imresize(src, w, h, interp=1, out=None):
    """Resize image `src` (H, W, C) to width `w` and height `h`.

    `interp` uses OpenCV's codes (0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 as 2,
    9 auto, 10 random). The result keeps src's dtype.

    >>> mx.image.imresize(img, 224, 224).shape
    (224, 224, 3)
    """
    res = _wrap(resize_np(_np_image(src, "imresize"), w, h, interp), src)
    if out is not None:
        out[:] = res
        return out
    return res


# ---- crops --------------------------------------------------------------------------------
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
    return _wrap(np.ascontiguousarray(
        fixed_crop_np(_np_image(src, "fixed_crop"), x0, y0, w, h, size, interp)), src)


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


def color_normalize(src, mean, std=None):
    """(src - mean) / std, with mean and std broadcast over the channel axis."""
    src = src - mean
    return src / std if std is not None else src
