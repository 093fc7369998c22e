"""mx.nd.image against NumPy: flips, crop, to_tensor and normalize on HWC / NHWC (CHW /
NCHW for normalize), their finite-difference gradients, and bad shapes or windows."""
import numpy as np
import pytest

from minigluon import nd
from minigluon.base import ShapeError

from gradcheck import check_close, check_grad, rand

IMAGE = np.random.default_rng(0).integers(0, 256, (5, 4, 3)).astype(np.uint8)


@pytest.mark.parametrize("shape", [(5, 4, 3), (2, 5, 4, 3)])
def test_flips_mirror_width_and_height(shape):
    x = np.random.default_rng(1).integers(0, 256, shape).astype(np.uint8)
    lr = nd.image.flip_left_right(nd.array(x, dtype="uint8"))
    tb = nd.image.flip_top_bottom(nd.array(x, dtype="uint8"))
    assert lr.dtype == np.uint8
    np.testing.assert_array_equal(lr.asnumpy(), x[..., ::-1, :])
    np.testing.assert_array_equal(tb.asnumpy(), x[..., ::-1, :, :])


def test_crop_window_and_gradient():
    x = nd.array(IMAGE, dtype="uint8")
    np.testing.assert_array_equal(nd.image.crop(x, 1, 2, 2, 3).asnumpy(), IMAGE[2:5, 1:3])
    check_grad(lambda a: nd.image.crop(a, 0, 1, 3, 2), rand(4, 3, 2))
    check_grad(lambda a: nd.image.flip_left_right(a), rand(2, 3, 2))
    with pytest.raises(ShapeError, match="does not fit an image of 5 rows and 4 columns"):
        nd.image.crop(x, 2, 0, 3, 2)


def test_to_tensor_scales_and_moves_channels_first():
    got = nd.image.to_tensor(nd.array(IMAGE, dtype="uint8"))
    assert got.dtype == np.float32
    check_close(got, IMAGE.transpose(2, 0, 1) / 255.0)
    batch = np.stack([IMAGE, IMAGE[::-1]])
    check_close(nd.image.to_tensor(nd.array(batch, dtype="uint8")),
                batch.transpose(0, 3, 1, 2) / 255.0)
    # float32 output: a linear map, so a wide step keeps the differences exact enough
    check_grad(lambda a: nd.image.to_tensor(a), rand(3, 2, 2), eps=0.5, rtol=1e-3, atol=1e-4)


def test_normalize_per_channel():
    x = rand(3, 4, 5)
    mean, std = (0.1, 0.2, 0.3), (0.5, 1.0, 2.0)
    want = (x - np.reshape(mean, (3, 1, 1))) / np.reshape(std, (3, 1, 1))
    check_close(nd.image.normalize(nd.array(x), mean=mean, std=std), want)
    check_close(nd.image.normalize(nd.array(x[None]), mean=0.5, std=2.0), (x[None] - 0.5) / 2)
    check_grad(lambda a: nd.image.normalize(a, mean=mean, std=std), rand(3, 2, 2))
    with pytest.raises(ShapeError, match="std has 2 values for 3 channels"):
        nd.image.normalize(nd.array(x), std=(1.0, 2.0))


def test_images_need_three_or_four_dimensions_and_an_ndarray():
    with pytest.raises(ShapeError, match=r"HWC image or an NHWC batch, got shape \(4, 3\)"):
        nd.image.flip_left_right(nd.zeros((4, 3)))
    with pytest.raises(TypeError, match="expected an NDArray, got ndarray"):
        nd.image.to_tensor(IMAGE)
