"""mx.image's codec (OpenCV underneath) against independent references: PNGs written by a
pure-Python writer decode exactly, PNGs written here unfilter (pure Python) to the encoded
array, JPEG decodes close to what was encoded; the flags, the errors, the fork policy."""
import os
import select
import struct
import zlib

import numpy as np
import pytest

from minigluon import image, nd
from minigluon.image import ImageFormatError

RNG = np.random.default_rng(42)


# ---- an independent, slow PNG writer and reader (pure Python filters) --------------------
def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def _predict(ftype, a, b, c):
    return [0, a, b, (a + b) // 2, _paeth(a, b, c)][ftype]


def reference_filter(row, prior, bpp, ftype):
    out = []
    for i, x in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        c = prior[i - bpp] if i >= bpp else 0
        out.append((x - _predict(ftype, a, prior[i], c)) % 256)
    return bytes([ftype] + out)


def reference_unfilter(raw, height, stride, bpp):
    """Scanlines (lists of ints) from the decompressed IDAT stream, pure Python."""
    rows, prior = [], [0] * stride
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        ftype, row = line[0], []
        for i, x in enumerate(line[1:]):
            a = row[i - bpp] if i >= bpp else 0
            c = prior[i - bpp] if i >= bpp else 0
            row.append((x + _predict(ftype, a, prior[i], c)) % 256)
        rows.append(row)
        prior = row
    return rows


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + \
        struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)


def reference_png(rows, width, height, depth, ctype, ftypes, extra_chunks=(), bpp=1):
    """PNG bytes from raw scanlines (lists of ints), filtered row by row in pure Python."""
    rows = [[int(v) for v in r] for r in rows]
    prior, body = [0] * len(rows[0]), b""
    for y in range(height):
        body += reference_filter(rows[y], prior, bpp, ftypes[y % len(ftypes)])
        prior = rows[y]
    ihdr = struct.pack(">IIBBBBB", width, height, depth, ctype, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + b"".join(
        _chunk(k, d) for k, d in extra_chunks) + _chunk(b"IDAT", zlib.compress(body)) +
        _chunk(b"IEND", b""))


def read_reference_png(data):
    """(H, W, C) uint8 of an 8-bit non-interlaced PNG, parsed and unfiltered in Python."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert depth == 8 and interlace == 0
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    rows = reference_unfilter(zlib.decompress(idat), height, width * channels, channels)
    return np.array(rows, np.uint8).reshape(height, width, channels)


# ---- PNG --------------------------------------------------------------------------------
@pytest.mark.parametrize("ftype", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("channels,ctype", [(1, 0), (3, 2), (4, 6)])
def test_decoder_reads_reference_png_for_every_filter(ftype, channels, ctype):
    img = RNG.integers(0, 256, (5, 7, channels), dtype=np.uint8)
    data = reference_png([list(r) for r in img.reshape(5, -1)], 7, 5, 8, ctype, [ftype],
                         bpp=channels)
    np.testing.assert_array_equal(image.imdecode(data, flag=-1).asnumpy(), img)


def test_gray_alpha_png_comes_as_rgba_as_opencv_gives_it():
    img = RNG.integers(0, 256, (5, 7, 2), dtype=np.uint8)
    data = reference_png([list(r) for r in img.reshape(5, -1)], 7, 5, 8, 4, [4], bpp=2)
    rgba = image.imdecode(data, flag=-1).asnumpy()
    np.testing.assert_array_equal(rgba, img[:, :, [0, 0, 0, 1]])
    np.testing.assert_array_equal(image.imdecode(data, flag=0).asnumpy(), img[:, :, :1])


def test_decoder_handles_mixed_filters_16_bit_palette_and_low_depth():
    img = RNG.integers(0, 65536, (4, 3, 3)).astype(">u2")
    rows = [list(r.tobytes()) for r in img.reshape(4, -1)]
    data = reference_png(rows, 3, 4, 16, 2, [4, 3, 1, 2], bpp=6)
    high = (img >> 8).astype(np.uint8)
    np.testing.assert_array_equal(image.imdecode(data).asnumpy(), high)
    np.testing.assert_array_equal(image.imdecode(data, flag=-1).asnumpy(), high)
    palette = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255]], np.uint8)
    idx = RNG.integers(0, 3, (3, 4), dtype=np.uint8)
    data = reference_png([list(r) for r in idx], 4, 3, 8, 3, [0, 1, 4],
                         extra_chunks=[(b"PLTE", palette.tobytes())])
    np.testing.assert_array_equal(image.imdecode(data).asnumpy(), palette[idx])
    bits = RNG.integers(0, 2, (3, 10), dtype=np.uint8)        # 1-bit gray, 10 px per row
    data = reference_png([list(np.packbits(r)) for r in bits], 10, 3, 1, 0, [0, 2])
    np.testing.assert_array_equal(image.imdecode(data, flag=0).asnumpy()[:, :, 0], bits * 255)


@pytest.mark.parametrize("shape", [(9, 13), (9, 13, 1), (7, 11, 3), (3, 4, 4), (40, 33, 3)])
def test_png_written_here_unfilters_to_the_encoded_array(shape):
    img = RNG.integers(0, 256, shape, dtype=np.uint8)
    img[: shape[0] // 2] //= 16       # some smooth rows, so the encoder picks varied filters
    data = image.imencode(img, ".png")
    stored = read_reference_png(data)                    # RGB(A) as PNG stores it
    np.testing.assert_array_equal(stored, img.reshape(stored.shape))
    back = image.imdecode(data, flag=-1).asnumpy()
    np.testing.assert_array_equal(back, img.reshape(back.shape))


def test_png_compression_level_changes_the_size_not_the_pixels():
    img = np.tile(np.arange(64, dtype=np.uint8), (64, 1))[:, :, None].repeat(3, axis=2)
    fast, small = image.imencode(img, ".png", quality=0), image.imencode(img, ".png", 9)
    assert len(small) < len(fast)
    for data in (fast, small):
        np.testing.assert_array_equal(image.imdecode(data).asnumpy(), img)


# ---- flags and other formats ---------------------------------------------------------------
def test_flags_choose_channels_and_order():
    rgb = RNG.integers(0, 256, (3, 4, 3), dtype=np.uint8)
    data = image.imencode(rgb)
    np.testing.assert_array_equal(image.imdecode(data).asnumpy(), rgb)
    np.testing.assert_array_equal(image.imdecode(data, to_rgb=False).asnumpy(), rgb[:, :, ::-1])
    gray = image.imdecode(data, flag=0).asnumpy()
    expected = np.floor(rgb.astype(np.float64) @ [0.299, 0.587, 0.114] + 0.5)
    assert gray.shape == (3, 4, 1) and np.abs(gray[:, :, 0] - expected).max() <= 1
    rgba = RNG.integers(0, 256, (3, 4, 4), dtype=np.uint8)
    data = image.imencode(rgba)
    np.testing.assert_array_equal(image.imdecode(data, flag=-1).asnumpy(), rgba)
    np.testing.assert_array_equal(image.imdecode(data, flag=-1, to_rgb=False).asnumpy(),
                                  rgba[:, :, [2, 1, 0, 3]])
    np.testing.assert_array_equal(image.imdecode(data).asnumpy(), rgba[:, :, :3])
    one = RNG.integers(0, 256, (3, 4), dtype=np.uint8)
    three = image.imdecode(image.imencode(one)).asnumpy()
    assert three.shape == (3, 4, 3) and (three == one[:, :, None]).all()
    as_nd = nd.array(np.frombuffer(data, np.uint8), dtype="uint8")
    assert image.imdecode(as_nd).shape == (3, 4, 3)
    assert image.imdecode(bytearray(data)).shape == (3, 4, 3)


def test_out_receives_the_image():
    rgb = RNG.integers(0, 256, (3, 4, 3), dtype=np.uint8)
    out = nd.zeros((3, 4, 3), dtype="uint8")
    assert image.imdecode(image.imencode(rgb), out=out) is out
    np.testing.assert_array_equal(out.asnumpy(), rgb)


def test_jpeg_decodes_close_to_the_encoded_image():
    yy, xx = np.mgrid[0:48, 0:64]
    img = np.stack([4 * xx, 5 * yy, 255 - 2 * xx - yy], axis=2).clip(0, 255).astype(np.uint8)
    data = image.imencode(img, ".jpg", quality=95)
    assert data.startswith(b"\xff\xd8\xff")
    back = image.imdecode(data).asnumpy().astype(int)
    assert back.shape == (48, 64, 3)
    assert np.abs(back - img).mean() < 1.5 and np.abs(back - img).max() <= 16
    bgr = image.imdecode(data, to_rgb=False).asnumpy().astype(int)
    np.testing.assert_array_equal(bgr, back[:, :, ::-1])
    low = image.imdecode(image.imencode(img, ".jpg", quality=10)).asnumpy().astype(int)
    assert np.abs(low - img).mean() > np.abs(back - img).mean()
    gray = image.imdecode(image.imencode(img[:, :, 1], ".jpg", 95), flag=0).asnumpy()
    assert gray.shape == (48, 64, 1)
    assert np.abs(gray[:, :, 0].astype(int) - img[:, :, 1]).max() <= 8


@pytest.mark.parametrize("fmt", [".bmp", ".ppm", ".tif", ".webp"])
def test_other_lossless_formats_round_trip(fmt):
    rgb = RNG.integers(0, 256, (5, 6, 3), dtype=np.uint8)
    quality = 101 if fmt == ".webp" else 95        # WebP above 100 is lossless
    np.testing.assert_array_equal(image.imdecode(image.imencode(rgb, fmt, quality)).asnumpy(),
                                  rgb)


def test_pnm_headers_written_by_hand():
    ascii_ppm = b"P3\n# a comment\n2 1\n255\n255 0 0  0 0 255\n"
    np.testing.assert_array_equal(image.imdecode(ascii_ppm).asnumpy(),
                                  [[[255, 0, 0], [0, 0, 255]]])
    gray = RNG.integers(0, 256, (5, 4), dtype=np.uint8)
    pgm = b"P5 4 5 255\n" + gray.tobytes()
    np.testing.assert_array_equal(image.imdecode(pgm, flag=0).asnumpy()[:, :, 0], gray)
    pgm16 = b"P5 3 1 65535\n" + np.array([[0, 65535, 32768]], ">u2").tobytes()
    assert image.imdecode(pgm16, flag=0).asnumpy()[0, :, 0].tolist() == [0, 255, 128]


# ---- errors ----------------------------------------------------------------------------------
def test_corrupt_truncated_and_foreign_bytes_are_refused_by_name():
    data = image.imencode(RNG.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    with pytest.raises(ImageFormatError, match=rf"{len(data) - 20} bytes of PNG.*truncated"):
        image.imdecode(data[:len(data) - 20])
    jpeg = image.imencode(RNG.integers(0, 256, (16, 16, 3), dtype=np.uint8), ".jpg")
    with pytest.raises(ImageFormatError, match="bytes of JPEG"):
        image.imdecode(jpeg[:40])
    with pytest.raises(ImageFormatError, match=r"starting b'hello wo'.*JPEG, PNG"):
        image.imdecode(b"hello world, not an image")
    with pytest.raises(ImageFormatError, match="empty"):
        image.imdecode(b"")
    with pytest.raises(ImageFormatError, match="np.load"):
        image.imdecode(b"\x93NUMPY\x01\x00" + b"\0" * 40)
    with pytest.raises(ImageFormatError, match="imread"):
        image.imdecode("cat.png")
    with pytest.raises(ImageFormatError, match="got int"):
        image.imdecode(12)


def test_imencode_refuses_what_it_cannot_write():
    with pytest.raises(ImageFormatError, match="'.xyz'.*'.png'"):
        image.imencode(np.zeros((2, 2, 3), np.uint8), ".xyz")
    with pytest.raises(ImageFormatError, match=r"shape \(2, 2, 2\).*RGBA"):
        image.imencode(np.zeros((2, 2, 2), np.uint8))
    with pytest.raises(ImageFormatError, match="float32.*astype"):
        image.imencode(np.zeros((2, 2, 3), np.float32))


def test_imread_names_the_file(tmp_path):
    img = RNG.integers(0, 256, (3, 3, 3), dtype=np.uint8)
    good = tmp_path / "ok.png"
    good.write_bytes(image.imencode(img))
    np.testing.assert_array_equal(image.imread(str(good)).asnumpy(), img)
    np.testing.assert_array_equal(image.imread(str(good), to_rgb=False).asnumpy(),
                                  img[:, :, ::-1])
    bad = tmp_path / "broken.png"
    bad.write_bytes(image.imencode(img)[:30])
    with pytest.raises(ImageFormatError, match="broken.png"):
        image.imread(str(bad))
    with pytest.raises(ImageFormatError, match="missing.png"):
        image.imread(str(tmp_path / "missing.png"))


# ---- OpenCV's threads in a forked child ----------------------------------------------------
def _child_opencv_threads(env_value, monkeypatch):
    """cv2.getNumThreads() as a forked child of this process sees it (a DataLoader worker)."""
    cv2 = image.opencv.cv2()
    monkeypatch.setenv("MXNET_MP_OPENCV_NUM_THREADS", env_value)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:       # the child: report and leave at once, running no pytest code
        os.write(write_end, str(cv2.getNumThreads()).encode())
        os._exit(0)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], 60)
        assert ready, "the forked child did not answer within 60 s"
        return int(os.read(read_end, 32))
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)


def test_forked_children_get_mxnets_opencv_thread_count(monkeypatch):
    cv2 = image.opencv.cv2()
    parent = cv2.getNumThreads()
    assert _child_opencv_threads("2", monkeypatch) == 2
    single = _child_opencv_threads("", monkeypatch)    # default 0: OpenCV runs serially
    assert single == 1
    assert cv2.getNumThreads() == parent
