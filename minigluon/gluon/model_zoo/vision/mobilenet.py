"""MobileNet v1 (Howard et al. 2017) and v2 (Sandler et al. 2018) with a width
`multiplier`, as MXNet's model zoo builds them (mobilenet1.0, mobilenetv2_0.5, ...)."""
from ....base import MXNetError
from ... import nn
from ...block import HybridBlock
from ._factory import factory
from .pretrained import load_pretrained


class _ReLU6(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.clip(x, 0, 6)


def _conv(out, channels, kernel=1, stride=1, pad=0, groups=1, active=True, relu6=False):
    """Conv (no bias), BatchNorm, and ReLU (or ReLU6) unless active=False."""
    out.add(nn.Conv2D(channels, kernel, stride, pad, groups=groups, use_bias=False),
            nn.BatchNorm(scale=True))
    if active:
        out.add(_ReLU6() if relu6 else nn.Activation("relu"))


def _check_multiplier(name, multiplier):
    if not isinstance(multiplier, (int, float)) or multiplier <= 0:
        raise MXNetError(f"{name}: multiplier must be a positive number, got {multiplier!r}")


class MobileNet(HybridBlock):
    """MobileNet v1: a 3x3 conv, then 13 depthwise-separable blocks, global pooling and
    the classifier; every width scaled by `multiplier`."""

    def __init__(self, multiplier=1.0, classes=1000, **kwargs):
        super().__init__(**kwargs)
        _check_multiplier("MobileNet", multiplier)
        dw_channels = [int(c * multiplier) for c in [32, 64] + [128] * 2 + [256] * 2 +
                       [512] * 6 + [1024]]
        channels = [int(c * multiplier) for c in [64] + [128] * 2 + [256] * 2 + [512] * 6 +
                    [1024] * 2]
        strides = [1, 2] * 3 + [1] * 5 + [2, 1]
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            _conv(self.features, int(32 * multiplier), 3, 2, 1)
            for dwc, c, s in zip(dw_channels, channels, strides):
                _conv(self.features, dwc, 3, s, 1, groups=dwc)       # depthwise
                _conv(self.features, c)                               # pointwise
            self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


class LinearBottleneck(HybridBlock):
    """MobileNet v2's inverted residual: 1x1 expansion by t, 3x3 depthwise (stride),
    1x1 linear projection; the input is added back when shapes allow."""

    def __init__(self, in_channels, channels, t, stride, **kwargs):
        super().__init__(**kwargs)
        self.use_shortcut = stride == 1 and in_channels == channels
        with self.name_scope():
            self.out = nn.HybridSequential(prefix="")
            _conv(self.out, in_channels * t, relu6=True)
            _conv(self.out, in_channels * t, 3, stride, 1, groups=in_channels * t, relu6=True)
            _conv(self.out, channels, active=False)

    def hybrid_forward(self, F, x):
        out = self.out(x)
        return out + x if self.use_shortcut else out


class MobileNetV2(HybridBlock):
    """MobileNet v2: a 3x3 conv, 17 linear bottlenecks, a 1x1 conv to 1280 channels,
    global pooling and a 1x1 conv classifier (no bias)."""

    def __init__(self, multiplier=1.0, classes=1000, **kwargs):
        super().__init__(**kwargs)
        _check_multiplier("MobileNetV2", multiplier)
        in_group = [int(c * multiplier) for c in [32] + [16] + [24] * 2 + [32] * 3 +
                    [64] * 4 + [96] * 3 + [160] * 3]
        out_group = [int(c * multiplier) for c in [16] + [24] * 2 + [32] * 3 + [64] * 4 +
                     [96] * 3 + [160] * 3 + [320]]
        ts = [1] + [6] * 16
        strides = [1, 2] * 2 + [1, 1, 2] + [1] * 6 + [2] + [1] * 3
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="features_")
            _conv(self.features, int(32 * multiplier), 3, 2, 1, relu6=True)
            for in_c, c, t, s in zip(in_group, out_group, ts, strides):
                self.features.add(LinearBottleneck(in_c, c, t, s))
            _conv(self.features, int(1280 * multiplier) if multiplier > 1.0 else 1280,
                  relu6=True)
            self.features.add(nn.GlobalAvgPool2D())
            self.output = nn.HybridSequential(prefix="output_")
            self.output.add(nn.Conv2D(classes, 1, use_bias=False, prefix="pred_"),
                            nn.Flatten())

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def get_mobilenet(multiplier, pretrained=False, ctx=None, root="~/.minigluon/models",
                  **kwargs):
    """MobileNet v1 with width `multiplier` (1.0, 0.75, 0.5, 0.25)."""
    net = MobileNet(multiplier, **kwargs)
    name = f"mobilenet{multiplier}"
    return load_pretrained(net, name, root, ctx) if pretrained else net


def get_mobilenet_v2(multiplier, pretrained=False, ctx=None, root="~/.minigluon/models",
                     **kwargs):
    """MobileNet v2 with width `multiplier` (1.0, 0.75, 0.5, 0.25)."""
    net = MobileNetV2(multiplier, **kwargs)
    name = f"mobilenetv2_{multiplier}"
    return load_pretrained(net, name, root, ctx) if pretrained else net


mobilenet1_0, mobilenet0_75, mobilenet0_5, mobilenet0_25 = (
    factory(f"mobilenet{m}", get_mobilenet, m) for m in (1.0, 0.75, 0.5, 0.25))
mobilenet_v2_1_0, mobilenet_v2_0_75, mobilenet_v2_0_5, mobilenet_v2_0_25 = (
    factory(f"mobilenetv2_{m}", get_mobilenet_v2, m) for m in (1.0, 0.75, 0.5, 0.25))
