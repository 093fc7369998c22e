"""mx.image resizing against float references built pixel by pixel (nearest exact, the
bilinear, bicubic and Lanczos formulas with OpenCV's pixel-centre convention, the area
average for integer-factor shrinks), the interpolation codes, and the crop helpers."""
import math

import numpy as np
import pytest

import minigluon as mx
from minigluon import image, nd
from minigluon.base import MXNetError

RNG = np.random.default_rng(11)


def _cubic(t, a=-0.75):
    t = abs(t)
    if t <= 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a if t < 2 else 0.0


def _lanczos4(t):
    if abs(t) < 1e-9:
        return 1.0
    return 4 * math.sin(math.pi * t) * math.sin(math.pi * t / 4) / (math.pi * t) ** 2


KERNELS = {1: (lambda t: max(0.0, 1 - abs(t)), range(0, 2)), 2: (_cubic, range(-1, 3)),
           4: (_lanczos4, range(-3, 5))}


def axis_weights(n_in, n_out, interp):
    """(n_out, n_in) matrix: output pixel centre (i + 0.5) * n_in / n_out - 0.5 in source
    coordinates, kernel taps around it, edge pixels repeated, weights summing to one."""
    kernel, offsets = KERNELS[interp]
    mat = np.zeros((n_out, n_in))
    for i in range(n_out):
        src = (i + 0.5) * n_in / n_out - 0.5
        base = math.floor(src)
        taps = [(min(max(base + k, 0), n_in - 1), kernel(src - (base + k))) for k in offsets]
        total = sum(w for _, w in taps)
        for j, w in taps:
            mat[i, j] += w / total
    return mat


def reference_resize(img, w, h, interp):
    rows, cols = axis_weights(img.shape[0], h, interp), axis_weights(img.shape[1], w, interp)
    return np.einsum("yi,xj,ijc->yxc", rows, cols, img.astype(np.float64))


CASES = [((4, 5), (7, 3)), ((6, 6), (3, 3)), ((3, 7), (9, 2)), ((5, 4), (5, 8)),
         ((2, 2), (1, 1)), ((40, 30), (13, 17))]


@pytest.mark.parametrize("interp", [1, 2, 4])
@pytest.mark.parametrize("src,dst", CASES)
def test_resize_matches_the_formula(src, dst, interp):
    img = RNG.integers(0, 256, src + (3,), dtype=np.uint8)
    expected = reference_resize(img, *dst, interp)
    as_float = image.imresize(nd.array(img, dtype="float32"), *dst, interp=interp).asnumpy()
    np.testing.assert_allclose(as_float, expected, rtol=1e-4, atol=1e-2)
    got = image.imresize(nd.array(img, dtype="uint8"), *dst, interp=interp).asnumpy()
    assert got.dtype == np.uint8 and got.shape == (dst[1], dst[0], 3)
    # uint8 is computed in fixed point, then rounded and saturated
    assert np.abs(got - np.clip(expected, 0, 255)).max() <= 1.0 + 1e-6


def test_nearest_is_exact():
    img = RNG.integers(0, 256, (6, 8, 1), dtype=np.uint8)
    near = image.resize_np(img, 3, 4, interp=0)
    rows, cols = np.floor(np.arange(4) * 1.5).astype(int), np.floor(np.arange(3) * 8 / 3)
    np.testing.assert_array_equal(near, img[rows][:, cols.astype(int)])
    up = image.resize_np(img, 17, 14, interp=0)
    rows, cols = np.floor(np.arange(14) * 6 / 14), np.floor(np.arange(17) * 8 / 17)
    np.testing.assert_array_equal(up, img[rows.astype(int)][:, cols.astype(int)])


@pytest.mark.parametrize("factor", [2, 3, 4])
def test_area_shrink_by_an_integer_factor_is_the_block_mean(factor):
    img = RNG.integers(0, 256, (6 * factor, 5 * factor, 3), dtype=np.uint8)
    area = image.resize_np(img, 5, 6, interp=3)
    blocks = img.reshape(6, factor, 5, factor, 3).astype(float).mean(axis=(1, 3))
    assert np.abs(area - blocks).max() <= 0.5 + 1e-6
    as_float = image.resize_np(img.astype(np.float32), 5, 6, interp=3)
    np.testing.assert_allclose(as_float, blocks, rtol=1e-5, atol=1e-3)


def test_automatic_and_random_codes():
    img = RNG.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    for size, meant in (((10, 8), 3), ((40, 33), 2), ((40, 10), 1)):
        np.testing.assert_array_equal(image.resize_np(img, *size, interp=9),
                                      image.resize_np(img, *size, interp=meant))
    mx.random.seed(1)
    outcomes = {image.resize_np(img, 7, 9, interp=10).tobytes() for _ in range(30)}
    choices = {image.resize_np(img, 7, 9, interp=i).tobytes() for i in range(5)}
    assert outcomes <= choices and len(outcomes) >= 3
    with pytest.raises(MXNetError, match="unknown interpolation 5"):
        image.resize_np(img, 7, 9, interp=5)
    with pytest.raises(MXNetError, match="0x9"):
        image.resize_np(img, 0, 9)


def test_flat_images_stay_flat_and_same_size_is_a_copy():
    flat = np.full((5, 5, 3), 77, np.uint8)
    for interp in range(5):
        assert (image.resize_np(flat, 9, 7, interp=interp) == 77).all()
    img = RNG.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    same = image.imresize(nd.array(img, dtype="uint8"), 8, 6).asnumpy()
    np.testing.assert_array_equal(same, img)


def test_any_channel_count_dtype_and_strided_input():
    wide = RNG.random((9, 7, 6)).astype(np.float32)
    got = image.resize_np(wide, 4, 5, interp=1)
    assert got.shape == (5, 4, 6)
    np.testing.assert_allclose(got[:, :, 4:], image.resize_np(wide[:, :, 4:], 4, 5), rtol=1e-6)
    as_int = RNG.integers(-1000, 1000, (9, 7, 2)).astype(np.int64)
    got = image.resize_np(as_int, 4, 5, interp=1)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.rint(reference_resize(as_int, 4, 5, 1)))
    two_d = RNG.integers(0, 256, (9, 7), dtype=np.uint8)
    assert image.resize_np(two_d, 3, 4).shape == (4, 3)
    big = RNG.integers(0, 256, (30, 40, 3), dtype=np.uint8)
    view = big[5:25:2, 3:33]               # strided rows, as a crop of a larger image
    np.testing.assert_array_equal(image.resize_np(view, 12, 7),
                                  image.resize_np(np.ascontiguousarray(view), 12, 7))
    with pytest.raises(MXNetError, match=r"shape \(0, 3, 3\)"):
        image.resize_np(np.zeros((0, 3, 3), np.uint8), 2, 2)


def test_crop_helpers():
    assert image.scale_down((640, 480), (720, 120)) == (640, 106)
    img = nd.array(np.arange(6 * 8 * 3).reshape(6, 8, 3), dtype="uint8")
    crop, box = image.center_crop(img, (4, 2))
    assert box == (2, 2, 4, 2)
    np.testing.assert_array_equal(crop.asnumpy(), img.asnumpy()[2:4, 2:6])
    fixed = image.fixed_crop(img, 1, 2, 3, 4)
    np.testing.assert_array_equal(fixed.asnumpy(), img.asnumpy()[2:6, 1:4])
    resized = image.fixed_crop(img, 0, 0, 4, 4, size=(2, 2))
    np.testing.assert_array_equal(resized.asnumpy(),
                                  image.resize_np(img.asnumpy()[:4, :4], 2, 2, interp=2))
    assert image.resize_short(img, 3).shape == (3, 4, 3)
    out, (x0, y0, w, h) = image.random_crop(img, (5, 5))
    np.testing.assert_array_equal(out.asnumpy(), img.asnumpy()[y0:y0 + 5, x0:x0 + 5])
    out, _ = image.random_size_crop(img, (4, 4), (0.3, 1.0), (0.75, 1.33))
    assert out.shape == (4, 4, 3)
