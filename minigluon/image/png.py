"""PNG decoded and encoded with zlib and NumPy: 1/2/4/8/16-bit gray, gray+alpha, RGB, RGBA
and palette images, every filter type. Adam7-interlaced files go to Pillow when it is
there (they are rare, and deinterlacing here would double this module)."""
import struct
import zlib

import numpy as np

from . import pillow
from .errors import ImageFormatError

__all__ = ["SIGNATURE", "decode", "encode"]

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}        # colour type -> samples per pixel
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}


def _chunks(buf):
    """Yield (type, data, offset) of each chunk, checking lengths and CRCs."""
    pos = len(SIGNATURE)
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


def _header(data):
    if len(data) != 13:
        raise ImageFormatError(f"PNG IHDR chunk has {len(data)} bytes, expected 13")
    width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", data)
    if ctype not in _CHANNELS or depth not in _DEPTHS[ctype]:
        raise ImageFormatError(f"PNG with colour type {ctype} and bit depth {depth} is not a "
                               "valid combination")
    if width == 0 or height == 0:
        raise ImageFormatError(f"PNG with an empty size {width}x{height}")
    return width, height, depth, ctype, interlace


def decode(buf):
    """Decode PNG bytes to an (H, W, C) uint8 array in RGB(A) / gray(+alpha) order."""
    header, palette, trns, idat = None, None, None, []
    for ctype, data, _ in _chunks(buf):
        if ctype == b"IHDR":
            header = _header(data)
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
        if pillow.pillow_available():
            return pillow.decode(buf)
        raise ImageFormatError("Adam7-interlaced PNG is not supported without Pillow; help: "
                               "`pip install Pillow`, or re-save the image non-interlaced")
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as err:
        raise ImageFormatError(f"PNG image data is corrupt: {err}") from None
    channels = _CHANNELS[ctype]
    stride = (width * channels * depth + 7) // 8
    if len(raw) < height * (stride + 1):
        raise ImageFormatError(f"PNG image data truncated: {len(raw)} bytes, expected "
                               f"{height * (stride + 1)} for {width}x{height}")
    bpp = max(1, channels * depth // 8)
    rows = _unfilter(np.frombuffer(raw, np.uint8, height * (stride + 1)), height,
                         stride, bpp)
    img = _samples(rows, width, channels, depth)
    if ctype == 3:
        return _apply_palette(img[:, :, 0], palette, trns)
    return _scale_low_depth_gray(img, depth)


def _unfilter(raw, height, stride, bpp):
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


def _samples(rows, width, channels, depth):
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


def _apply_palette(indices, palette, trns):
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


def _filter(rows, bpp, filter_type):
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


def encode(img, level=6, filter_type=None):
    """(H, W, C) uint8 with C in 1..4 (gray, gray+alpha, RGB, RGBA) -> PNG bytes."""
    height, width, channels = img.shape
    ctype = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    rows = np.ascontiguousarray(img).reshape(height, width * channels)
    data = zlib.compress(_filter(rows, channels, filter_type).tobytes(), level)

    def chunk(ctype_, body):
        return (struct.pack(">I", len(body)) + ctype_ + body
                + struct.pack(">I", zlib.crc32(ctype_ + body) & 0xffffffff))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, ctype, 0, 0, 0)
    return SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", data) + chunk(b"IEND", b"")
