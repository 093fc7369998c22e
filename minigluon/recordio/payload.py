"""What a record holds when it is a labelled sample: an `IRHeader` (flag, label, ids) and the
payload, with the labels of multi-label records stored between them; `pack_img` /
`unpack_img` encode and decode the payload as an image with `mx.image`."""
import numbers
import struct
from collections import namedtuple

import numpy as np

from .errors import RecordIOError

__all__ = ["IRHeader", "pack", "unpack", "pack_img", "unpack_img"]

IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """Header of an image record.

flag : int
    0 when `label` is one number; otherwise the number of float32 labels stored before the
    payload (pack() sets it).
label : float or array of float
    The label(s).
id, id2 : int
    Record ids (id2 is usually 0).
"""
_IR_FORMAT = "<IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)


def pack(header, s):
    """Pack a header and a payload into one record string.

    >>> rec = pack(IRHeader(0, 1.0, 7, 0), b'data')            # one label
    >>> rec = pack(IRHeader(0, [1.0, 2.0], 7, 0), b'data')     # several labels
    """
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype="<f4").ravel()
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + bytes(s)
    return struct.pack(_IR_FORMAT, *header) + bytes(s)


def unpack(s):
    """Split a record into (IRHeader, payload bytes); the inverse of pack()."""
    if len(s) < _IR_SIZE:
        raise RecordIOError(f"a packed record starts with a {_IR_SIZE}-byte header, got only "
                            f"{len(s)} bytes")
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        if len(s) < 4 * header.flag:
            raise RecordIOError(f"record header announces {header.flag} labels but the record "
                                f"holds only {len(s)} more bytes")
        header = header._replace(label=np.frombuffer(s, "<f4", header.flag).astype(np.float32))
        s = s[4 * header.flag:]
    return header, s


def pack_img(header, img, quality=95, img_fmt=".jpg"):
    """Encode image `img` (HxW or HxWxC uint8, BGR channel order as with OpenCV) and pack it
    with `header`.

    `img_fmt` is a file extension OpenCV writes ('.jpg', as in MXNet, '.png', ...). For
    JPEG `quality` is the JPEG quality; for PNG the zlib level 0-9 (larger values mean
    OpenCV's default level).

    >>> rec = pack_img(IRHeader(0, 3.0, 0, 0), bgr_array, img_fmt='.png')
    """
    from .. import image
    arr = np.asarray(img.asnumpy() if hasattr(img, "asnumpy") else img)
    if arr.ndim == 3 and arr.shape[2] in (3, 4):
        arr = arr[:, :, [2, 1, 0] + ([3] if arr.shape[2] == 4 else [])]   # BGR(A) -> RGB(A)
    return pack(header, image.imencode(arr, img_fmt, quality))


def unpack_img(s, iscolor=-1):
    """Unpack a record made by pack_img into (IRHeader, image as a NumPy array in BGR order).

    `iscolor`: -1 keeps the stored channels, 0 gives gray (HxW), 1 gives BGR (HxWx3).
    """
    from .. import image
    header, payload = unpack(s)
    img = image.imdecode(payload, flag=iscolor, to_rgb=False).asnumpy()
    if img.ndim == 3 and img.shape[2] == 1 and iscolor != 1:
        img = img[:, :, 0]      # OpenCV returns a 2-D array for gray images
    return header, img
