"""ResNet v1 and v2 (He et al. 2015, 2016) with MXNet model-zoo names and layouts."""
from ... import nn
from ...block import HybridBlock
from ._factory import factory
from .pretrained import load_pretrained


def _conv3x3(channels, stride, in_channels):
    return nn.Conv2D(channels, kernel_size=3, strides=stride, padding=1, use_bias=False,
                     in_channels=in_channels)


class BasicBlockV1(HybridBlock):
    """Two 3x3 convolutions with BatchNorm, added to the (projected) input, then ReLU."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.body = nn.HybridSequential(prefix="")
        self.body.add(_conv3x3(channels, stride, in_channels), nn.BatchNorm(),
                      nn.Activation("relu"), _conv3x3(channels, 1, channels), nn.BatchNorm())
        self.downsample = None
        if downsample:
            self.downsample = nn.HybridSequential(prefix="")
            self.downsample.add(nn.Conv2D(channels, kernel_size=1, strides=stride,
                                          use_bias=False, in_channels=in_channels),
                                nn.BatchNorm())

    def hybrid_forward(self, F, x):
        residual = x if self.downsample is None else self.downsample(x)
        return F.relu(self.body(x) + residual)


class BottleneckV1(HybridBlock):
    """1x1 reduce, 3x3, 1x1 expand (each with BatchNorm), added to the input, then ReLU."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        mid = channels // 4
        self.body = nn.HybridSequential(prefix="")
        self.body.add(nn.Conv2D(mid, kernel_size=1, strides=stride), nn.BatchNorm(),
                      nn.Activation("relu"), _conv3x3(mid, 1, mid), nn.BatchNorm(),
                      nn.Activation("relu"), nn.Conv2D(channels, kernel_size=1, strides=1),
                      nn.BatchNorm())
        self.downsample = None
        if downsample:
            self.downsample = nn.HybridSequential(prefix="")
            self.downsample.add(nn.Conv2D(channels, kernel_size=1, strides=stride,
                                          use_bias=False, in_channels=in_channels),
                                nn.BatchNorm())

    def hybrid_forward(self, F, x):
        residual = x if self.downsample is None else self.downsample(x)
        return F.relu(self.body(x) + residual)


class _PreActivation(HybridBlock):
    """v2 blocks: BN-ReLU of the input feeds both the body and, where shapes change, the
    1x1 projection of the shortcut."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.bn1 = nn.BatchNorm()

    def _shortcut(self, channels, stride, downsample, in_channels):
        # made after the body, as in MXNet, so the layers' generated names match its files
        self.downsample = nn.Conv2D(channels, 1, stride, use_bias=False,
                                    in_channels=in_channels) if downsample else None

    def hybrid_forward(self, F, x):
        residual = x
        x = F.relu(self.bn1(x))
        if self.downsample is not None:
            residual = self.downsample(x)
        return self._body(F, x) + residual


class BasicBlockV2(_PreActivation):
    """Pre-activation basic block: BN-ReLU-conv3x3 twice, plus the (projected) input."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.conv1 = _conv3x3(channels, stride, in_channels)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels, 1, channels)
        self._shortcut(channels, stride, downsample, in_channels)

    def _body(self, F, x):
        return self.conv2(F.relu(self.bn2(self.conv1(x))))


class BottleneckV2(_PreActivation):
    """Pre-activation bottleneck: BN-ReLU before each of the 1x1 reduce, 3x3 (stride) and
    1x1 expand convolutions, plus the (projected) input."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        mid = channels // 4
        self.conv1 = nn.Conv2D(mid, kernel_size=1, strides=1, use_bias=False)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(mid, stride, mid)
        self.bn3 = nn.BatchNorm()
        self.conv3 = nn.Conv2D(channels, kernel_size=1, strides=1, use_bias=False)
        self._shortcut(channels, stride, downsample, in_channels)

    def _body(self, F, x):
        x = self.conv2(F.relu(self.bn2(self.conv1(x))))
        return self.conv3(F.relu(self.bn3(x)))


class _ResNet(HybridBlock):
    def _stem(self, channels, thumbnail):
        if thumbnail:
            self.features.add(_conv3x3(channels, 1, 0))
        else:
            self.features.add(nn.Conv2D(channels, 7, 2, 3, use_bias=False), nn.BatchNorm(),
                              nn.Activation("relu"), nn.MaxPool2D(3, 2, 1))

    def _make_layer(self, block, layers, channels, stride, stage, in_channels):
        layer = nn.HybridSequential(prefix=f"stage{stage}_")
        with layer.name_scope():
            layer.add(block(channels, stride, channels != in_channels,
                            in_channels=in_channels, prefix=""))
            for _ in range(layers - 1):
                layer.add(block(channels, 1, False, in_channels=channels, prefix=""))
        return layer

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


class ResNetV1(_ResNet):
    """ResNet v1: `block` per stage, `layers` blocks per stage, `channels` per stage
    (channels[0] is the stem). thumbnail=True uses a 3x3 stem for small images."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False, **kwargs):
        super().__init__(**kwargs)
        if len(layers) != len(channels) - 1:
            raise ValueError(f"ResNetV1: {len(layers)} stages need {len(layers) + 1} channel "
                             f"counts, got {len(channels)}")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self._stem(channels[0], thumbnail)
            for i, num in enumerate(layers):
                self.features.add(self._make_layer(block, num, channels[i + 1],
                                                   1 if i == 0 else 2, i + 1, channels[i]))
            self.features.add(nn.GlobalAvgPool2D())
            self.output = nn.Dense(classes, in_units=channels[-1])


class ResNetV2(_ResNet):
    """ResNet v2 (pre-activation); arguments as ResNetV1."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False, **kwargs):
        super().__init__(**kwargs)
        if len(layers) != len(channels) - 1:
            raise ValueError(f"ResNetV2: {len(layers)} stages need {len(layers) + 1} channel "
                             f"counts, got {len(channels)}")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.BatchNorm(scale=False, center=False))
            self._stem(channels[0], thumbnail)
            in_channels = channels[0]
            for i, num in enumerate(layers):
                self.features.add(self._make_layer(block, num, channels[i + 1],
                                                   1 if i == 0 else 2, i + 1, in_channels))
                in_channels = channels[i + 1]
            self.features.add(nn.BatchNorm(), nn.Activation("relu"), nn.GlobalAvgPool2D(),
                              nn.Flatten())
            self.output = nn.Dense(classes, in_units=in_channels)


_SPEC = {18: ("basic", [2, 2, 2, 2], [64, 64, 128, 256, 512]),
         34: ("basic", [3, 4, 6, 3], [64, 64, 128, 256, 512]),
         50: ("bottleneck", [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
         101: ("bottleneck", [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
         152: ("bottleneck", [3, 8, 36, 3], [64, 256, 512, 1024, 2048])}


def get_resnet(version, num_layers, pretrained=False, ctx=None, root="~/.minigluon/models",
               **kwargs):
    """ResNet `version` (1 or 2) with `num_layers` (18, 34, 50, 101 or 152)."""
    if num_layers not in _SPEC or version not in (1, 2):
        raise ValueError(f"get_resnet: supported are version 1 or 2 and num_layers "
                         f"{sorted(_SPEC)}, got version={version}, num_layers={num_layers}")
    kind, layers, channels = _SPEC[num_layers]
    block = {"basic": BasicBlockV1 if version == 1 else BasicBlockV2,
             "bottleneck": BottleneckV1 if version == 1 else BottleneckV2}[kind]
    net = (ResNetV1 if version == 1 else ResNetV2)(block, layers, channels, **kwargs)
    name = f"resnet{num_layers}_v{version}"
    return load_pretrained(net, name, root, ctx) if pretrained else net


resnet18_v1, resnet34_v1, resnet50_v1, resnet101_v1, resnet152_v1 = (
    factory(f"resnet{n}_v1", get_resnet, 1, n) for n in (18, 34, 50, 101, 152))
resnet18_v2, resnet34_v2, resnet50_v2, resnet101_v2, resnet152_v2 = (
    factory(f"resnet{n}_v2", get_resnet, 2, n) for n in (18, 34, 50, 101, 152))
