"""Binary and ASCII PPM/PGM (P2, P3, P5, P6): decoded to 8 bits whatever the maxval, and
encoded as binary P5 (gray) or P6 (RGB)."""
import numpy as np

from .errors import ImageFormatError

__all__ = ["decode", "encode"]


def _tokens(buf, count):
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


def decode(buf):
    magic = buf[:2]
    if magic not in (b"P2", b"P3", b"P5", b"P6"):
        raise ImageFormatError(f"unsupported PNM kind {magic!r}; use P2/P3/P5/P6 (PGM or PPM)")
    tokens, pos = _tokens(buf, 3)
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


def encode(img):
    channels = img.shape[2]
    if channels not in (1, 3):
        raise ImageFormatError(f"PPM/PGM holds 1 or 3 channels, got {channels}")
    magic = b"P6" if channels == 3 else b"P5"
    height, width = img.shape[:2]
    return magic + f"\n{width} {height}\n255\n".encode() + np.ascontiguousarray(img).tobytes()
