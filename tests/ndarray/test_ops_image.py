"""mx.nd.image / mx.sym.image operators against NumPy slicing, with finite-difference
gradients and the shape and box errors."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import MXNetError, ShapeError

from gradcheck import check_grad, rand

IMG = np.random.default_rng(5).integers(0, 256, (6, 5, 3)).astype(np.uint8)


@pytest.mark.parametrize("name, index", [("flip_left_right", np.s_[..., ::-1, :]),
                                         ("flip_top_bottom", np.s_[..., ::-1, :, :])])
def test_flips_match_numpy_slicing_for_images_and_batches(name, index):
    fn = getattr(nd.image, name)
    out = fn(nd.array(IMG, dtype="uint8"))
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out.asnumpy(), IMG[index])
    batch = np.stack([IMG, IMG[::-1]])
    np.testing.assert_array_equal(fn(nd.array(batch, dtype="uint8")).asnumpy(), batch[index])
    check_grad(fn, rand(3, 4, 2))


def test_random_flips_are_a_flip_or_a_copy_and_repeat_under_a_seed():
    mx.random.seed(4)
    first = [nd.image.random_flip_left_right(nd.array(IMG)).asnumpy() for _ in range(20)]
    assert {bool((f == IMG[:, ::-1]).all()) for f in first} == {True, False}
    assert all((f == IMG).all() or (f == IMG[:, ::-1]).all() for f in first)
    mx.random.seed(4)
    again = [nd.image.random_flip_left_right(nd.array(IMG)).asnumpy() for _ in range(20)]
    assert all((a == b).all() for a, b in zip(first, again))
    out = nd.image.random_flip_top_bottom(nd.array(IMG)).asnumpy()
    assert (out == IMG).all() or (out == IMG[::-1]).all()


def test_crop_is_a_slice_with_a_zero_gradient_outside_the_box():
    out = nd.image.crop(nd.array(IMG), 1, 2, 3, 4)
    np.testing.assert_array_equal(out.asnumpy(), IMG[2:6, 1:4])
    batch = np.stack([IMG, IMG + 1])
    np.testing.assert_array_equal(nd.image.crop(nd.array(batch), 0, 1, 2, 2).asnumpy(),
                                  batch[:, 1:3, 0:2])
    check_grad(lambda a: nd.image.crop(a, 1, 0, 2, 2), rand(3, 4, 2))


def test_symbolic_crop_runs_forward():
    sym = mx.sym.image.crop(mx.sym.var("data"), x=1, y=1, width=2, height=3)
    out = sym.eval(data=nd.array(IMG))[0]
    np.testing.assert_array_equal(out.asnumpy(), IMG[1:4, 1:3])


@pytest.mark.parametrize("box", [(0, 0, 0, 2), (0, 0, -1, 2), (4, 0, 2, 2), (0, 5, 2, 2)])
def test_crop_outside_the_image_names_the_box(box):
    with pytest.raises(MXNetError, match=r"x=.*must have a positive size and lie inside"):
        nd.image.crop(nd.array(IMG), *box)


def test_to_tensor_and_normalize_follow_the_formulas():
    out = nd.image.to_tensor(nd.array(IMG, dtype="uint8"))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.asnumpy(), IMG.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    norm = nd.image.normalize(out, mean=mean, std=std).asnumpy()
    want = (IMG.transpose(2, 0, 1) / 255.0 - np.reshape(mean, (3, 1, 1))) / np.reshape(std, (3, 1, 1))
    np.testing.assert_allclose(norm, want, rtol=1e-5)
    check_grad(lambda a: nd.image.normalize(a, mean=mean, std=std), rand(3, 2, 2))


def test_image_ops_refuse_other_layouts():
    with pytest.raises(ShapeError, match=r"flip_left_right expects \(H, W, C\).*\(6, 5\)"):
        nd.image.flip_left_right(nd.array(IMG[..., 0]))
    with pytest.raises(ShapeError, match="normalize expects"):
        nd.image.normalize(nd.ones((2, 2)))
