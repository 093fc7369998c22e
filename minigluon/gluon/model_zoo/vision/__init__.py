"""Vision models by name: `get_model('resnet18_v1', classes=10)`, with MXNet's model-zoo
names (alexnet, densenet121, inceptionv3, mobilenet1.0, mobilenetv2_0.5, resnet50_v2,
squeezenet1.1, vgg16_bn, ...)."""
from ....base import unknown_name
from .alexnet import AlexNet, alexnet  # noqa: F401
from .densenet import (DenseNet, densenet121, densenet161, densenet169,  # noqa: F401
                       densenet201, get_densenet)
from .inception import Inception3, inception_v3  # noqa: F401
from .mobilenet import (LinearBottleneck, MobileNet, MobileNetV2, get_mobilenet,  # noqa: F401
                        get_mobilenet_v2, mobilenet0_25, mobilenet0_5, mobilenet0_75,
                        mobilenet1_0, mobilenet_v2_0_25, mobilenet_v2_0_5,
                        mobilenet_v2_0_75, mobilenet_v2_1_0)
from .resnet import (BasicBlockV1, BasicBlockV2, BottleneckV1, BottleneckV2,  # noqa: F401
                     ResNetV1, ResNetV2, get_resnet, resnet18_v1, resnet18_v2, resnet34_v1,
                     resnet34_v2, resnet50_v1, resnet50_v2, resnet101_v1, resnet101_v2,
                     resnet152_v1, resnet152_v2)
from .simple import LeNet, MLP, cifar_resnet18, lenet, mlp  # noqa: F401
from .squeezenet import SqueezeNet, get_squeezenet, squeezenet1_0, squeezenet1_1  # noqa: F401
from .vgg import (VGG, get_vgg, vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16,  # noqa: F401
                  vgg16_bn, vgg19, vgg19_bn)

# the factories carry their model-zoo names (resnet50_v1, mobilenetv2_0.5, ...)
_NAMED = (densenet121, densenet161, densenet169, densenet201, squeezenet1_0, squeezenet1_1,
          mobilenet1_0, mobilenet0_75, mobilenet0_5, mobilenet0_25, mobilenet_v2_1_0,
          mobilenet_v2_0_75, mobilenet_v2_0_5, mobilenet_v2_0_25, resnet18_v1, resnet34_v1,
          resnet50_v1, resnet101_v1, resnet152_v1, resnet18_v2, resnet34_v2, resnet50_v2,
          resnet101_v2, resnet152_v2, vgg11, vgg13, vgg16, vgg19, vgg11_bn, vgg13_bn,
          vgg16_bn, vgg19_bn)
_MODELS = {"lenet": lenet, "mlp": mlp, "cifar_resnet18": cifar_resnet18, "alexnet": alexnet,
           "inceptionv3": inception_v3, **{f.__name__: f for f in _NAMED}}


def get_model(name, **kwargs):
    """The model called `name` (case-insensitive), built with `kwargs` (classes, ...)."""
    key = name.lower()
    if key not in _MODELS:
        raise unknown_name("model", name, _MODELS)
    return _MODELS[key](**kwargs)
