"""mx.image: PNG / PPM / .npy codecs against independent references, imresize against a
slow per-pixel reference, and the crop helpers."""
import struct
import zlib

import numpy as np
import pytest

from minigluon import image, nd
from minigluon.image import ImageFormatError

RNG = np.random.default_rng(42)


# ---- an independent, slow PNG writer (pure Python filters) --------------------------------
def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def reference_filter(row, prior, bpp, ftype):
    out = []
    for i, x in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        b = prior[i]
        c = prior[i - bpp] if i >= bpp else 0
        pred = [0, a, b, (a + b) // 2, _paeth(a, b, c)][ftype]
        out.append((x - pred) % 256)
    return bytes([ftype] + out)


def reference_png(rows, width, height, depth, ctype, ftypes, extra_chunks=(), bpp=None):
    """PNG bytes from raw scanlines (lists of ints), filtered row by row in pure Python."""
    rows = [[int(v) for v in r] for r in rows]
    stride = len(rows[0])
    bpp = bpp or 1
    prior, body = [0] * stride, b""
    for y in range(height):
        body += reference_filter(rows[y], prior, bpp, ftypes[y % len(ftypes)])
        prior = rows[y]

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    ihdr = struct.pack(">IIBBBBB", width, height, depth, ctype, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + b"".join(chunk(k, d) for k, d in
            extra_chunks) + chunk(b"IDAT", zlib.compress(body)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("ftype", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("channels,ctype", [(1, 0), (2, 4), (3, 2), (4, 6)])
def test_decoder_reads_reference_png_for_every_filter(ftype, channels, ctype):
    img = RNG.integers(0, 256, (5, 7, channels), dtype=np.uint8)
    rows = [list(r) for r in img.reshape(5, -1)]
    data = reference_png(rows, 7, 5, 8, ctype, [ftype], bpp=channels)
    got = image.imdecode(data, flag=-1).asnumpy()
    np.testing.assert_array_equal(got, img)


def test_decoder_handles_mixed_filters_16_bit_palette_and_low_depth():
    img = RNG.integers(0, 65536, (4, 3, 3)).astype(">u2")
    rows = [list(r.tobytes()) for r in img.reshape(4, -1)]
    data = reference_png(rows, 3, 4, 16, 2, [4, 3, 1, 2], bpp=6)
    np.testing.assert_array_equal(image.imdecode(data).asnumpy(), (img >> 8).astype(np.uint8))
    palette = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255]], np.uint8)
    idx = RNG.integers(0, 3, (3, 4), dtype=np.uint8)
    data = reference_png([list(r) for r in idx], 4, 3, 8, 3, [0, 1, 4],
                         extra_chunks=[(b"PLTE", palette.tobytes())])
    np.testing.assert_array_equal(image.imdecode(data).asnumpy(), palette[idx])
    bits = RNG.integers(0, 2, (3, 10), dtype=np.uint8)        # 1-bit gray, 10 px per row
    rows = [list(np.packbits(r)) for r in bits]
    data = reference_png(rows, 10, 3, 1, 0, [0, 2])
    np.testing.assert_array_equal(image.imdecode(data, flag=0).asnumpy()[:, :, 0], bits * 255)


@pytest.mark.parametrize("ftype", [None, 0, 1, 2, 3, 4])
@pytest.mark.parametrize("shape", [(9, 13), (9, 13, 1), (6, 5, 2), (7, 11, 3), (3, 4, 4)])
def test_png_round_trip(shape, ftype):
    img = RNG.integers(0, 256, shape, dtype=np.uint8)
    data = image.imencode(img, ".png", filter_type=ftype)
    back = image.imdecode(data, flag=-1).asnumpy()
    np.testing.assert_array_equal(back, img.reshape(back.shape))


def test_png_written_here_is_a_standard_png():
    img = RNG.integers(0, 256, (4, 6, 3), dtype=np.uint8)
    data = image.imencode(img, ".png", filter_type=0)
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR"
    width, height, depth, ctype = struct.unpack(">IIBB", data[16:26])
    assert (width, height, depth, ctype) == (6, 4, 8, 2)
    idat = data[data.index(b"IDAT") + 4:data.index(b"IEND") - 8]
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(4, 1 + 18)
    assert (raw[:, 0] == 0).all()
    np.testing.assert_array_equal(raw[:, 1:], img.reshape(4, 18))


def test_corrupt_truncated_and_interlaced_png_are_refused():
    data = image.imencode(RNG.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    bad = bytearray(data)
    bad[40] ^= 0xFF
    with pytest.raises(ImageFormatError, match="CRC|corrupt"):
        image.imdecode(bytes(bad))
    with pytest.raises(ImageFormatError, match="truncated"):
        image.imdecode(data[:len(data) - 20])
    interlaced = reference_png([[0, 0, 0]], 1, 1, 8, 2, [0], bpp=3)
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 1)
    interlaced = interlaced[:8] + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(
        ">I", zlib.crc32(b"IHDR" + ihdr) & 0xffffffff) + interlaced[33:]
    if not image.pillow_available():
        with pytest.raises(ImageFormatError, match="Adam7"):
            image.imdecode(interlaced)


def test_flags_choose_channels_and_order():
    rgb = RNG.integers(0, 256, (3, 4, 3), dtype=np.uint8)
    data = image.imencode(rgb)
    np.testing.assert_array_equal(image.imdecode(data).asnumpy(), rgb)
    np.testing.assert_array_equal(image.imdecode(data, to_rgb=False).asnumpy(), rgb[:, :, ::-1])
    gray = image.imdecode(data, flag=0).asnumpy()
    expected = np.floor(rgb.astype(np.float64) @ [0.299, 0.587, 0.114] + 0.5)
    assert gray.shape == (3, 4, 1) and np.abs(gray[:, :, 0] - expected).max() <= 1
    one = RNG.integers(0, 256, (3, 4), dtype=np.uint8)
    three = image.imdecode(image.imencode(one)).asnumpy()
    assert three.shape == (3, 4, 3) and (three == one[:, :, None]).all()
    assert image.imdecode(nd.array(np.frombuffer(data, np.uint8), dtype="uint8")).shape == \
        (3, 4, 3)


def test_ppm_pgm_and_npy():
    rgb = RNG.integers(0, 256, (5, 4, 3), dtype=np.uint8)
    np.testing.assert_array_equal(image.imdecode(image.imencode(rgb, ".ppm")).asnumpy(), rgb)
    gray = RNG.integers(0, 256, (5, 4, 1), dtype=np.uint8)
    pgm = image.imencode(gray, ".pgm")
    assert pgm.startswith(b"P5")
    np.testing.assert_array_equal(image.imdecode(pgm, flag=0).asnumpy(), gray)
    ascii_ppm = b"P3\n# a comment\n2 1\n255\n255 0 0  0 0 255\n"
    np.testing.assert_array_equal(image.imdecode(ascii_ppm).asnumpy(),
                                  [[[255, 0, 0], [0, 0, 255]]])
    wide = np.array([[0, 65535, 32768]], ">u2")
    pgm16 = b"P5 3 1 65535\n" + wide.tobytes()
    assert image.imdecode(pgm16, flag=0).asnumpy()[0, :, 0].tolist() == [0, 255, 127]
    np.testing.assert_array_equal(image.imdecode(image.imencode(rgb, ".npy")).asnumpy(), rgb)
    with pytest.raises(ImageFormatError, match="truncated"):
        image.imdecode(image.imencode(rgb, ".ppm")[:-5])


@pytest.mark.skipif(image.pillow_available(), reason="Pillow is installed")
def test_jpeg_without_pillow_says_what_to_do():
    with pytest.raises(ImageFormatError, match="Pillow.*PNG"):
        image.imdecode(b"\xff\xd8\xff\xe0" + b"\0" * 20)
    with pytest.raises(ImageFormatError, match="Pillow"):
        image.imencode(np.zeros((2, 2, 3), np.uint8), ".jpg")


@pytest.mark.skipif(not image.pillow_available(), reason="Pillow is not installed")
def test_jpeg_through_pillow():
    img = np.full((16, 16, 3), 120, np.uint8)
    back = image.imdecode(image.imencode(img, ".jpg", quality=95)).asnumpy()
    assert back.shape == (16, 16, 3) and np.abs(back.astype(int) - 120).max() <= 3


def test_imread_names_the_file(tmp_path):
    img = RNG.integers(0, 256, (3, 3, 3), dtype=np.uint8)
    good = tmp_path / "ok.png"
    good.write_bytes(image.imencode(img))
    np.testing.assert_array_equal(image.imread(str(good)).asnumpy(), img)
    bad = tmp_path / "broken.png"
    bad.write_bytes(image.imencode(img)[:30])
    with pytest.raises(ImageFormatError, match="broken.png"):
        image.imread(str(bad))
    with pytest.raises(ImageFormatError, match="missing.png"):
        image.imread(str(tmp_path / "missing.png"))


# ---- resizing ----------------------------------------------------------------------------
def reference_bilinear(img, w, h):
    """OpenCV's INTER_LINEAR, one output pixel at a time."""
    in_h, in_w = img.shape[:2]
    out = np.zeros((h, w) + img.shape[2:])
    for y in range(h):
        fy = (y + 0.5) * in_h / h - 0.5
        y0 = int(np.floor(fy))
        wy = fy - y0
        for x in range(w):
            fx = (x + 0.5) * in_w / w - 0.5
            x0 = int(np.floor(fx))
            wx = fx - x0

            def px(yy, xx):
                return img[min(max(yy, 0), in_h - 1), min(max(xx, 0), in_w - 1)].astype(float)
            out[y, x] = ((1 - wy) * ((1 - wx) * px(y0, x0) + wx * px(y0, x0 + 1))
                         + wy * ((1 - wx) * px(y0 + 1, x0) + wx * px(y0 + 1, x0 + 1)))
    return out


@pytest.mark.parametrize("src,dst", [((4, 5), (7, 3)), ((6, 6), (3, 3)), ((3, 7), (9, 2)),
                                     ((5, 4), (5, 8)), ((2, 2), (1, 1))])
def test_bilinear_resize_matches_slow_reference(src, dst):
    img = RNG.integers(0, 256, src + (3,), dtype=np.uint8)
    got = image.imresize(nd.array(img, dtype="uint8"), *dst).asnumpy()
    expected = reference_bilinear(img, *dst)
    assert got.dtype == np.uint8 and got.shape == (dst[1], dst[0], 3)
    assert np.abs(got - expected).max() <= 0.5 + 1e-3       # rounding only
    as_float = image.imresize(nd.array(img, dtype="float32"), *dst).asnumpy()
    np.testing.assert_allclose(as_float, expected, rtol=1e-5, atol=1e-3)


def test_large_images_use_the_gather_path_with_the_same_result():
    from minigluon.image import resize as image     # _DENSE_MAX_MACS lives there
    img = RNG.integers(0, 256, (300, 280, 3), dtype=np.uint8)
    fast = image.resize_np(img, 120, 150)
    small = image.resize_np(img[:40, :30], 17, 23)
    old = image._DENSE_MAX_MACS
    try:
        image._DENSE_MAX_MACS = 10**12
        dense = image.resize_np(img, 120, 150)
        image._DENSE_MAX_MACS = 0
        gathered = image.resize_np(img[:40, :30], 17, 23)
    finally:
        image._DENSE_MAX_MACS = old
    assert np.abs(fast.astype(int) - dense).max() <= 1
    assert np.abs(small.astype(int) - gathered).max() <= 1


def test_nearest_area_and_cubic_against_formulas():
    img = RNG.integers(0, 256, (6, 8, 1), dtype=np.uint8)
    near = image.resize_np(img, 3, 4, interp=0)
    np.testing.assert_array_equal(near, img[np.floor(np.arange(4) * 1.5).astype(int)][
        :, np.floor(np.arange(3) * 8 / 3).astype(int)])
    area = image.resize_np(img, 4, 3, interp=3)
    blocks = img[:, :, 0].reshape(3, 2, 4, 2).astype(float).mean(axis=(1, 3))
    assert np.abs(area[:, :, 0] - blocks).max() <= 0.5 + 1e-3
    flat = np.full((5, 5, 3), 77, np.uint8)
    assert (image.resize_np(flat, 9, 7, interp=2) == 77).all()
    assert image.imresize(nd.array(img, dtype="uint8"), 8, 6).asnumpy().tolist() == img.tolist()


def test_crop_helpers():
    assert image.scale_down((640, 480), (720, 120)) == (640, 106)
    img = nd.array(np.arange(6 * 8 * 3).reshape(6, 8, 3), dtype="uint8")
    crop, box = image.center_crop(img, (4, 2))
    assert box == (2, 2, 4, 2)
    np.testing.assert_array_equal(crop.asnumpy(), img.asnumpy()[2:4, 2:6])
    fixed = image.fixed_crop(img, 1, 2, 3, 4)
    np.testing.assert_array_equal(fixed.asnumpy(), img.asnumpy()[2:6, 1:4])
    assert image.fixed_crop(img, 0, 0, 4, 4, size=(2, 2)).shape == (2, 2, 3)
    assert image.resize_short(img, 3).shape == (3, 4, 3)
    out, (x0, y0, w, h) = image.random_crop(img, (5, 5))
    np.testing.assert_array_equal(out.asnumpy(), img.asnumpy()[y0:y0 + 5, x0:x0 + 5])
    out, _ = image.random_size_crop(img, (4, 4), (0.3, 1.0), (0.75, 1.33))
    assert out.shape == (4, 4, 3)
