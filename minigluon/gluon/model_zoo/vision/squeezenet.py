"""SqueezeNet 1.0 and 1.1 (Iandola et al. 2016): fire modules, a 1x1 conv classifier."""
from ....base import MXNetError
from ... import nn
from ...block import HybridBlock
from ...contrib.nn import HybridConcurrent
from ._factory import factory
from .pretrained import load_pretrained


def _fire(squeeze, expand1x1, expand3x3):
    """Squeeze to `squeeze` channels, then 1x1 and 3x3 expansions side by side."""
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(squeeze, 1, activation="relu"))
    paths = HybridConcurrent(axis=1, prefix="")
    paths.add(nn.Conv2D(expand1x1, 1, activation="relu"),
              nn.Conv2D(expand3x3, 3, padding=1, activation="relu"))
    out.add(paths)
    return out


class SqueezeNet(HybridBlock):
    """SqueezeNet `version` '1.0' or '1.1' (same accuracy, 2.4x less computation)."""

    def __init__(self, version, classes=1000, **kwargs):
        super().__init__(**kwargs)
        if version not in ("1.0", "1.1"):
            raise MXNetError(f"SqueezeNet: version must be '1.0' or '1.1', got {version!r}")
        pool = dict(pool_size=3, strides=2, ceil_mode=True)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            if version == "1.0":
                self.features.add(nn.Conv2D(96, 7, strides=2, activation="relu"),
                                  nn.MaxPool2D(**pool), _fire(16, 64, 64),
                                  _fire(16, 64, 64), _fire(32, 128, 128),
                                  nn.MaxPool2D(**pool), _fire(32, 128, 128),
                                  _fire(48, 192, 192), _fire(48, 192, 192),
                                  _fire(64, 256, 256), nn.MaxPool2D(**pool),
                                  _fire(64, 256, 256))
            else:
                self.features.add(nn.Conv2D(64, 3, strides=2, activation="relu"),
                                  nn.MaxPool2D(**pool), _fire(16, 64, 64),
                                  _fire(16, 64, 64), nn.MaxPool2D(**pool),
                                  _fire(32, 128, 128), _fire(32, 128, 128),
                                  nn.MaxPool2D(**pool), _fire(48, 192, 192),
                                  _fire(48, 192, 192), _fire(64, 256, 256),
                                  _fire(64, 256, 256))
            self.features.add(nn.Dropout(0.5))
            self.output = nn.HybridSequential(prefix="")
            self.output.add(nn.Conv2D(classes, 1, activation="relu"), nn.GlobalAvgPool2D(),
                            nn.Flatten())

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def get_squeezenet(version, pretrained=False, ctx=None, root="~/.minigluon/models", **kwargs):
    """SqueezeNet '1.0' or '1.1'."""
    net = SqueezeNet(version, **kwargs)
    return load_pretrained(net, f"squeezenet{version}", root, ctx) if pretrained else net


squeezenet1_0, squeezenet1_1 = (factory(f"squeezenet{v}", get_squeezenet, v)
                                for v in ("1.0", "1.1"))
