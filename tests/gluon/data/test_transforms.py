"""gluon.data.vision.transforms against NumPy formulas, and seeded reproducibility."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import image, nd
from minigluon.base import MXNetError, ShapeError
from minigluon.gluon.data import ArrayDataset
from minigluon.gluon.data.vision import transforms as T
from minigluon.gluon.data.vision.transforms import (_adjust_brightness, _adjust_contrast,
                                                    _adjust_hue, _adjust_saturation)

RNG = np.random.default_rng(3)
IMG = RNG.integers(0, 256, (10, 12, 3), dtype=np.uint8)


def as_nd(a):
    return nd.array(a, dtype=a.dtype)


def test_to_tensor_and_normalize_follow_the_formulas():
    out = T.ToTensor()(as_nd(IMG))
    assert out.dtype == np.float32 and out.shape == (3, 10, 12)
    np.testing.assert_array_equal(out.asnumpy(), IMG.transpose(2, 0, 1).astype(np.float32) / 255)
    batch = np.stack([IMG, IMG[::-1]])
    np.testing.assert_array_equal(T.ToTensor()(as_nd(batch)).asnumpy(),
                                  batch.transpose(0, 3, 1, 2).astype(np.float32) / 255)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    chw = out.asnumpy()
    expected = (chw - np.array(mean, np.float32)[:, None, None]) / \
        np.array(std, np.float32)[:, None, None]
    np.testing.assert_allclose(T.Normalize(mean, std)(out).asnumpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(T.Normalize(0.5, 0.5)(out).asnumpy(), (chw - 0.5) / 0.5,
                               rtol=1e-6)
    nchw = T.Normalize(mean, std)(nd.array(np.stack([chw, chw]))).asnumpy()
    np.testing.assert_allclose(nchw[1], expected, rtol=1e-6)
    with pytest.raises(ShapeError, match="2 values.*3 channels"):
        T.Normalize((0.1, 0.2), (1, 1))(out)
    with pytest.raises(ShapeError, match="ToTensor"):
        T.ToTensor()(nd.zeros((4, 4)))


def test_cast_and_compose_with_plain_functions():
    cast = T.Cast("float16")(as_nd(IMG))
    assert cast.dtype == np.float16
    pipe = T.Compose([T.Cast(), lambda x: x * 2])
    np.testing.assert_array_equal(pipe(as_nd(IMG)).asnumpy(), IMG.astype(np.float32) * 2)
    assert T.HybridCompose is T.Compose and "Cast" in repr(pipe)


def test_resize_sizes_and_values():
    img = as_nd(IMG)
    assert T.Resize(7)(img).shape == (7, 7, 3)
    assert T.Resize((8, 5))(img).shape == (5, 8, 3)
    assert T.Resize(5, keep_ratio=True)(img).shape == (5, 6, 3)       # short edge (H=10)
    np.testing.assert_array_equal(T.Resize((8, 5))(img).asnumpy(),
                                  image.imresize(img, 8, 5).asnumpy())
    batch = T.Resize(4)(as_nd(np.stack([IMG, IMG])))
    assert batch.shape == (2, 4, 4, 3) and batch.dtype == np.uint8


def test_center_crop_is_the_middle():
    out = T.CenterCrop((6, 4))(as_nd(IMG)).asnumpy()
    np.testing.assert_array_equal(out, IMG[3:7, 3:9])
    assert T.CenterCrop(20)(as_nd(IMG)).shape == (20, 20, 3)      # too big: crop then enlarge


def test_random_resized_crop_is_seeded_and_keeps_full_crops_exact():
    crop = T.RandomResizedCrop(8)
    mx.random.seed(11)
    first = [crop(as_nd(IMG)).asnumpy() for _ in range(3)]
    mx.random.seed(11)
    again = [crop(as_nd(IMG)).asnumpy() for _ in range(3)]
    assert all((a == b).all() for a, b in zip(first, again))
    assert first[0].shape == (8, 8, 3) and first[0].dtype == np.uint8
    assert not all((first[0] == f).all() for f in first[1:])
    square = RNG.integers(0, 256, (9, 9, 3), dtype=np.uint8)
    whole = T.RandomResizedCrop(5, scale=(1.0, 1.0), ratio=(1.0, 1.0))(as_nd(square))
    np.testing.assert_array_equal(whole.asnumpy(), image.resize_np(square, 5, 5))
    tall = T.RandomResizedCrop((4, 4), scale=(0.99, 1.0), ratio=(5.0, 6.0))(as_nd(square))
    assert tall.shape == (4, 4, 3)                   # no draw fits: centre-crop fallback


def windows(padded, size):
    h, w = size
    return [padded[y:y + h, x:x + w] for y in range(padded.shape[0] - h + 1)
            for x in range(padded.shape[1] - w + 1)]


def test_random_crop_with_padding_is_a_window_of_the_padded_image():
    mx.random.seed(5)
    padded = np.pad(IMG, ((2, 2), (2, 2), (0, 0)))
    for _ in range(5):
        out = T.RandomCrop(6, pad=2)(as_nd(IMG)).asnumpy()
        assert out.shape == (6, 6, 3)
        assert any((out == win).all() for win in windows(padded, (6, 6)))
    out = T.RandomCrop((5, 4), pad=(1, 2, 3, 4), pad_value=9)(as_nd(IMG)).asnumpy()
    padded = np.pad(IMG, ((1, 2), (3, 4), (0, 0)), constant_values=9)
    assert any((out == win).all() for win in windows(padded, (4, 5)))
    assert T.RandomCrop(30)(as_nd(IMG)).shape == (30, 30, 3)


def test_flips_give_both_outcomes_reproducibly():
    for cls, flipped in ((T.RandomFlipLeftRight, IMG[:, ::-1]),
                         (T.RandomFlipTopBottom, IMG[::-1])):
        mx.random.seed(2)
        outs = [cls()(as_nd(IMG)).asnumpy() for _ in range(30)]
        kinds = [0 if (o == IMG).all() else 1 if (o == flipped).all() else -1 for o in outs]
        assert set(kinds) == {0, 1}
        mx.random.seed(2)
        assert kinds == [0 if (cls()(as_nd(IMG)).asnumpy() == IMG).all() else 1
                         for _ in range(30)]


def test_colour_adjustments_follow_mxnet_formulas():
    img = IMG.astype(np.float32)
    gray = img @ np.array([0.299, 0.587, 0.114], np.float32)
    np.testing.assert_array_equal(_adjust_brightness(IMG, 1.3),
                                  np.clip(img * np.float32(1.3), 0, 255).astype(np.uint8))
    contrast = img * 0.6 + gray.mean() * 0.4
    assert np.abs(_adjust_contrast(IMG, 0.6).astype(float) -
                  np.clip(contrast, 0, 255)).max() <= 1
    saturation = img * 1.4 - gray[:, :, None] * 0.4
    assert np.abs(_adjust_saturation(IMG, 1.4).astype(float) -
                  np.clip(saturation, 0, 255)).max() <= 1
    assert np.abs(_adjust_hue(IMG, 0.0).astype(int) - IMG).max() <= 1
    grayscale = np.repeat(IMG[:, :, :1], 3, axis=2)
    assert np.abs(_adjust_hue(grayscale, 0.3).astype(int) - grayscale).max() <= 1
    floats = _adjust_brightness(img, 2.0)
    assert floats.dtype == np.float32 and floats.max() > 255      # only uint8 saturates


def test_random_colour_transforms_are_seeded_and_zero_is_identity():
    for t in (T.RandomBrightness(0.5), T.RandomContrast(0.5), T.RandomSaturation(0.5),
              T.RandomHue(0.2), T.RandomColorJitter(0.3, 0.3, 0.3, 0.1), T.RandomLighting(0.1)):
        mx.random.seed(9)
        a = t(as_nd(IMG)).asnumpy()
        mx.random.seed(9)
        b = t(as_nd(IMG)).asnumpy()
        assert a.dtype == np.uint8 and a.shape == IMG.shape and (a == b).all(), t
    np.testing.assert_array_equal(T.RandomBrightness(0)(as_nd(IMG)).asnumpy(), IMG)
    np.testing.assert_array_equal(T.RandomColorJitter()(as_nd(IMG)).asnumpy(), IMG)
    with pytest.raises(MXNetError, match=">= 0"):
        T.RandomBrightness(-1)


def test_transforms_refuse_symbols_and_non_images():
    with pytest.raises(MXNetError, match="ToTensor expects an NDArray"):
        T.ToTensor()(mx.sym.var("data"))
    with pytest.raises(ShapeError, match="CenterCrop"):
        T.CenterCrop(2)(nd.zeros((3, 3)))


def test_a_training_pipeline_on_a_dataset():
    data = ArrayDataset(nd.array(np.stack([IMG] * 4), dtype="uint8"), np.arange(4))
    pipe = T.Compose([T.RandomResizedCrop(8), T.RandomFlipLeftRight(), T.ToTensor(),
                      T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])
    x, y = data.transform_first(pipe)[2]
    assert x.shape == (3, 8, 8) and x.dtype == np.float32 and y == 2
    assert -2.0 - 1e-6 <= x.asnumpy().min() and x.asnumpy().max() <= 2.0 + 1e-6


def test_crop_resize_is_a_slice_then_a_resize():
    np.testing.assert_array_equal(T.CropResize(1, 2, 3, 4)(as_nd(IMG)).asnumpy(), IMG[2:6, 1:4])
    batch = np.stack([IMG, IMG[::-1]])
    np.testing.assert_array_equal(T.CropResize(0, 1, 2, 2)(as_nd(batch)).asnumpy(),
                                  batch[:, 1:3, 0:2])
    out = T.CropResize(2, 1, 8, 6, size=(4, 3))(as_nd(IMG))
    want = T.Resize((4, 3))(as_nd(np.ascontiguousarray(IMG[1:7, 2:10])))
    np.testing.assert_array_equal(out.asnumpy(), want.asnumpy())


@pytest.mark.parametrize("args", [(0, 0, -1, 2), (0, 0, 13, 2), (5, 5, 8, 8),
                                  (0, 0, 2, 2, (-3, 3))])
def test_crop_resize_bad_boxes_and_sizes(args):
    with pytest.raises(MXNetError, match="CropResize"):
        T.CropResize(*args)(as_nd(IMG))


def _rotation_oracle(img, degrees):
    """Nearest-pixel rotation for multiples of 90 degrees: counter-clockwise on screen."""
    return np.rot90(img, k=int(degrees // 90) % 4, axes=(-2, -1))


@pytest.mark.parametrize("degrees", [0.0, 90.0, 180.0, 270.0, 360.0, -90.0])
def test_rotate_by_right_angles_is_rot90(degrees):
    square = RNG.standard_normal((2, 5, 5)).astype(np.float32)
    out = T.Rotate(degrees)(nd.array(square)).asnumpy()
    np.testing.assert_allclose(out, _rotation_oracle(square, degrees), atol=1e-5)
    batch = np.stack([square, square * 2])
    assert T.Rotate(degrees)(nd.array(batch)).shape == batch.shape


def test_rotate_bilinear_keeps_a_constant_inside_and_zooms():
    ones = nd.ones((1, 21, 21))
    plain = T.Rotate(45.0)(ones).asnumpy()[0]
    assert plain[10, 10] == pytest.approx(1.0) and plain[0, 0] == 0.0
    assert T.Rotate(45.0, zoom_in=True)(ones).asnumpy().min() > 0.99
    zoomed_out = T.Rotate(45.0, zoom_out=True)(ones).asnumpy()[0]
    assert zoomed_out[0, 10] > 0 and zoomed_out[0, 0] == 0.0


def test_rotate_errors():
    with pytest.raises(TypeError, match="float32"):
        T.Rotate(10)(nd.ones((3, 4, 4), dtype="uint8"))
    with pytest.raises(ValueError, match="zoom_in and zoom_out"):
        T.Rotate(10, zoom_in=True, zoom_out=True)
    with pytest.raises(ShapeError, match=r"\(C, H, W\)"):
        T.Rotate(10)(nd.ones((4, 4)))


def test_random_rotation_draws_within_limits_and_respects_the_probability():
    img = nd.array(RNG.standard_normal((1, 7, 7)).astype(np.float32))
    np.testing.assert_array_equal(T.RandomRotation((-90, 90), rotate_with_proba=0)(img).asnumpy(),
                                  img.asnumpy())
    mx.random.seed(2)
    out = T.RandomRotation((89.999, 90.001))(img).asnumpy()
    np.testing.assert_allclose(out, _rotation_oracle(img.asnumpy(), 90), atol=1e-3)
    for bad in (dict(rotate_with_proba=1.1), dict(rotate_with_proba=-0.3)):
        with pytest.raises(ValueError, match="rotate_with_proba"):
            T.RandomRotation((-10, 10), **bad)
    with pytest.raises(ValueError, match="lower < upper"):
        T.RandomRotation((10, -10))
    with pytest.raises(TypeError, match="float32"):
        T.RandomRotation((-10, 10))(nd.ones((3, 4, 4), dtype="uint8"))


def test_random_apply_applies_with_probability_p():
    mx.random.seed(0)
    apply = T.RandomApply(T.Compose([T.Resize(4)]), p=0.3)
    shapes = [apply(as_nd(IMG)).shape for _ in range(400)]
    assert abs(shapes.count((4, 4, 3)) / 400 - 0.3) < 0.08
    assert set(shapes) == {(4, 4, 3), IMG.shape}
    assert T.RandomApply(lambda x: x * 0, p=1.0)(nd.ones((2,))).asnumpy().tolist() == [0, 0]
    with pytest.raises(ValueError, match="p must be a probability"):
        T.RandomApply(T.Resize(4), p=2)


def test_random_rotation_draws_one_angle_per_image_of_a_batch():
    mx.random.seed(5)
    img = RNG.standard_normal((1, 9, 9)).astype(np.float32)
    batch = nd.array(np.stack([img] * 4))
    out = T.RandomRotation((-60, 60))(batch).asnumpy()
    assert out.shape == (4, 1, 9, 9)
    assert len({out[i].tobytes() for i in range(4)}) == 4
