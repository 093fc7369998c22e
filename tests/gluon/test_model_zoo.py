"""model_zoo.vision: every model builds, runs forward with the right output shape, and
hybridizes to the same result; pretrained weights come only from a local file."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.gluon.model_zoo import vision

CASES = [("lenet", (2, 1, 28, 28)), ("mlp", (2, 1, 28, 28)), ("cifar_resnet18", (2, 3, 32, 32)),
         ("resnet18_v1", (1, 3, 64, 64)), ("resnet18_v2", (1, 3, 64, 64)),
         ("resnet34_v1", (1, 3, 32, 32)), ("resnet50_v1", (1, 3, 32, 32)),
         ("vgg11", (1, 3, 32, 32)), ("vgg11_bn", (1, 3, 32, 32))]


@pytest.mark.parametrize("name,shape", CASES, ids=[c[0] for c in CASES])
def test_model_runs_and_hybridizes_identically(name, shape):
    mx.random.seed(0)
    net = vision.get_model(name, classes=7)
    net.initialize(mx.init.Xavier())
    x = nd.random.uniform(shape=shape)
    plain = net(x)
    assert plain.shape == (shape[0], 7)
    net.hybridize()
    net(x)
    np.testing.assert_array_equal(net(x).asnumpy(), plain.asnumpy())


def test_unknown_model_lists_known_ones():
    with pytest.raises(mx.MXNetError, match="unknown model 'resnet19'.*resnet18_v1"):
        vision.get_model("resnet19")


def test_pretrained_needs_a_local_file(tmp_path):
    with pytest.raises(mx.MXNetError, match="downloads no weights.*lenet.params"):
        vision.get_model("lenet", pretrained=True, root=str(tmp_path))
    net = vision.lenet()
    net.initialize()
    x = nd.random.uniform(shape=(1, 1, 28, 28))
    ref = net(x)
    net.save_parameters(str(tmp_path / "lenet.params"))
    loaded = vision.get_model("lenet", pretrained=True, root=str(tmp_path))
    np.testing.assert_array_equal(loaded(x).asnumpy(), ref.asnumpy())
