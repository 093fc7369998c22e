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
         ("vgg11", (1, 3, 32, 32)), ("vgg11_bn", (1, 3, 32, 32)),
         ("alexnet", (1, 3, 64, 64)), ("squeezenet1.0", (1, 3, 64, 64)),
         ("squeezenet1.1", (2, 3, 48, 48)), ("mobilenet0.25", (2, 3, 32, 32)),
         ("mobilenetv2_0.25", (2, 3, 32, 32)), ("densenet121", (1, 3, 32, 32)),
         ("inceptionv3", (1, 3, 75, 75)), ("resnet50_v2", (1, 3, 32, 32)),
         ("vgg19_bn", (1, 3, 32, 32))]


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


def trainable_count(net):
    return sum(int(np.prod(p.shape)) for p in net.collect_params().values()
               if p.grad_req != "null")


# Trainable parameters with 1000 classes. Where the architecture is torchvision's, its
# published count; MXNet's differences are added in the open:
# - ResNet v1 (MXNet) gives the first and last 1x1 convolution of each bottleneck a bias:
#   + sum over stages of blocks * (channels / 4 + channels);
# - MobileNet v2 (MXNet) keeps the 1x1 expansion of the first block (32 -> 32, + BN: 1,088)
#   and its 1x1 classifier has no bias (- 1,000);
# - MobileNet v1's count is Keras's (alpha 1.0), whose layers are the same.
def _bottleneck_biases(blocks):
    return sum(n * (c // 4 + c) for n, c in zip(blocks, (256, 512, 1024, 2048)))


PARAM_COUNTS = [
    ("alexnet", 224, 61_100_840),
    ("squeezenet1.0", 64, 1_248_424),
    ("squeezenet1.1", 64, 1_235_496),
    ("densenet121", 32, 7_978_856),
    ("inceptionv3", 75, 23_834_568),
    ("mobilenet1.0", 32, 4_231_976),
    ("mobilenetv2_1.0", 32, 3_504_872 + 1_088 - 1_000),
    ("resnet50_v1", 32, 25_557_032 + _bottleneck_biases((3, 4, 6, 3))),
    ("resnet101_v1", 32, 44_549_160 + _bottleneck_biases((3, 4, 23, 3))),
]


@pytest.mark.parametrize("name,size,count", PARAM_COUNTS, ids=[c[0] for c in PARAM_COUNTS])
def test_parameter_count_matches_the_published_architecture(name, size, count):
    net = vision.get_model(name)
    net.initialize(mx.init.Zero())            # the count, not the values, is checked
    assert net(nd.zeros((1, 3, size, size))).shape == (1, 1000)
    assert trainable_count(net) == count


def test_every_mxnet_model_zoo_name_builds():
    names = ["alexnet", "densenet121", "densenet161", "densenet169", "densenet201",
             "inceptionv3", "squeezenet1.0", "squeezenet1.1", "vgg11", "vgg13", "vgg16",
             "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn"]
    names += [f"resnet{n}_v{v}" for n in (18, 34, 50, 101, 152) for v in (1, 2)]
    names += [f"mobilenet{m}" for m in ("1.0", "0.75", "0.5", "0.25")]
    names += [f"mobilenetv2_{m}" for m in ("1.0", "0.75", "0.5", "0.25")]
    for name in names:
        assert isinstance(vision.get_model(name, classes=3), mx.gluon.HybridBlock), name
