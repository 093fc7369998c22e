"""VGG (Simonyan & Zisserman 2014) with MXNet model-zoo names: vgg11, vgg11_bn, ..."""
from .... import initializer
from ... import nn
from ...block import HybridBlock
from ._factory import factory
from .pretrained import load_pretrained

_SPEC = {11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]),
         13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
         16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]),
         19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512])}


class VGG(HybridBlock):
    """Stages of 3x3 convolutions (`layers[i]` of `filters[i]` channels) each followed by
    2x2 max pooling, then two Dense(4096)+Dropout and the classifier."""

    def __init__(self, layers, filters, classes=1000, batch_norm=False, **kwargs):
        super().__init__(**kwargs)
        if len(layers) != len(filters):
            raise ValueError(f"VGG: layers {layers} and filters {filters} differ in length")
        conv_init = initializer.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            for num, channels in zip(layers, filters):
                for _ in range(num):
                    self.features.add(nn.Conv2D(channels, kernel_size=3, padding=1,
                                                weight_initializer=conv_init))
                    if batch_norm:
                        self.features.add(nn.BatchNorm())
                    self.features.add(nn.Activation("relu"))
                self.features.add(nn.MaxPool2D(strides=2))
            for _ in range(2):
                self.features.add(nn.Dense(4096, activation="relu", weight_initializer="normal"),
                                  nn.Dropout(rate=0.5))
            self.output = nn.Dense(classes, weight_initializer="normal")

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def get_vgg(num_layers, pretrained=False, ctx=None, root="~/.minigluon/models", **kwargs):
    """VGG with 11, 13, 16 or 19 layers; batch_norm=True adds BatchNorm after each conv."""
    if num_layers not in _SPEC:
        raise ValueError(f"get_vgg: num_layers must be one of {sorted(_SPEC)}, got {num_layers}")
    layers, filters = _SPEC[num_layers]
    net = VGG(layers, filters, **kwargs)
    name = f"vgg{num_layers}{'_bn' if kwargs.get('batch_norm') else ''}"
    return load_pretrained(net, name, root, ctx) if pretrained else net


vgg11, vgg13, vgg16, vgg19 = (factory(f"vgg{n}", get_vgg, n) for n in (11, 13, 16, 19))
vgg11_bn, vgg13_bn, vgg16_bn, vgg19_bn = (factory(f"vgg{n}_bn", get_vgg, n, batch_norm=True)
                                          for n in (11, 13, 16, 19))
