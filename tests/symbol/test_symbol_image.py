"""mx.sym.image: each `_image_*` operator under its short name, as a graph node whose
forward and backward equal mx.nd.image's."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.ndarray.registry import OPS

IMAGE_OPS = sorted(k[len("_image_"):] for k in OPS if k.startswith("_image_"))
needs_crop = pytest.mark.skipif("_image_crop" not in OPS,
                                reason="mx.nd.image's operators are not registered in this tree")


def test_namespace_lists_every_image_operator():
    assert mx.sym.image.__all__ == IMAGE_OPS
    for name in IMAGE_OPS:
        assert callable(getattr(mx.sym.image, name))


@needs_crop
def test_symbolic_crop_forward_and_backward():
    img = np.arange(60, dtype=np.float32).reshape(5, 4, 3)
    sym = mx.sym.image.crop(mx.sym.var("data"), 2, 1, 1, 2)
    grad = nd.zeros(img.shape)
    ex = sym.bind(mx.cpu(), {"data": nd.array(img)}, args_grad={"data": grad})
    out = ex.forward(is_train=True)[0]
    np.testing.assert_array_equal(out.asnumpy(), img[1:3, 2:3])
    ex.backward([out])
    want = np.zeros_like(img)
    want[1:3, 2:3] = img[1:3, 2:3]
    np.testing.assert_array_equal(grad.asnumpy(), want)
