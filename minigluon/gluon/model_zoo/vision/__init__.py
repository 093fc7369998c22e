"""Vision models by name: `get_model('resnet18_v1', classes=10)`."""
from ....base import unknown_name
from .resnet import (BasicBlockV1, BasicBlockV2, BottleneckV1, ResNetV1, ResNetV2,  # noqa: F401
                     get_resnet, resnet18_v1, resnet18_v2, resnet34_v1, resnet50_v1)
from .simple import LeNet, MLP, cifar_resnet18, lenet, mlp  # noqa: F401
from .vgg import VGG, get_vgg, vgg11, vgg11_bn, vgg13, vgg16  # noqa: F401

_MODELS = {
    "lenet": lenet, "mlp": mlp, "cifar_resnet18": cifar_resnet18,
    "resnet18_v1": resnet18_v1, "resnet34_v1": resnet34_v1, "resnet50_v1": resnet50_v1,
    "resnet18_v2": resnet18_v2,
    "vgg11": vgg11, "vgg11_bn": vgg11_bn, "vgg13": vgg13, "vgg16": vgg16,
}


def get_model(name, **kwargs):
    """The model called `name` (case-insensitive), built with `kwargs` (classes, ...)."""
    key = name.lower()
    if key not in _MODELS:
        raise unknown_name("model", name, _MODELS)
    return _MODELS[key](**kwargs)
