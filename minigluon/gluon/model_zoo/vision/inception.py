"""Inception v3 (Szegedy et al. 2015), without the auxiliary classifier, as MXNet's
model zoo has it. Made for 299x299 inputs; anything from 75x75 up runs."""
from ... import nn
from ...block import HybridBlock
from ...contrib.nn import HybridConcurrent
from .pretrained import load_pretrained


def _conv(channels, kernel, strides=None, padding=None):
    """Conv (no bias), BatchNorm (epsilon 0.001), ReLU."""
    out = nn.HybridSequential(prefix="")
    kwargs = {"strides": strides} if strides is not None else {}
    if padding is not None:
        kwargs["padding"] = padding
    out.add(nn.Conv2D(channels, kernel, use_bias=False, **kwargs), nn.BatchNorm(epsilon=0.001),
            nn.Activation("relu"))
    return out


def _branch(pool, *convs):
    """A pooling ('avg' 3x3 stride 1, 'max' 3x3 stride 2, or None) then conv settings
    (channels, kernel, strides, padding)."""
    out = nn.HybridSequential(prefix="")
    if pool == "avg":
        out.add(nn.AvgPool2D(3, 1, 1))
    elif pool == "max":
        out.add(nn.MaxPool2D(3, 2))
    for setting in convs:
        out.add(_conv(*setting))
    return out


def _concat(*branches, prefix):
    out = HybridConcurrent(axis=1, prefix=prefix)
    with out.name_scope():
        out.add(*branches)
    return out


def _block_a(pool_features, prefix):
    return _concat(_branch(None, (64, 1)),
                   _branch(None, (48, 1), (64, 5, None, 2)),
                   _branch(None, (64, 1), (96, 3, None, 1), (96, 3, None, 1)),
                   _branch("avg", (pool_features, 1)), prefix=prefix)


def _block_b(prefix):
    return _concat(_branch(None, (384, 3, 2)),
                   _branch(None, (64, 1), (96, 3, None, 1), (96, 3, 2)),
                   _branch("max"), prefix=prefix)


def _block_c(c7, prefix):
    return _concat(_branch(None, (192, 1)),
                   _branch(None, (c7, 1), (c7, (1, 7), None, (0, 3)),
                           (192, (7, 1), None, (3, 0))),
                   _branch(None, (c7, 1), (c7, (7, 1), None, (3, 0)),
                           (c7, (1, 7), None, (0, 3)), (c7, (7, 1), None, (3, 0)),
                           (192, (1, 7), None, (0, 3))),
                   _branch("avg", (192, 1)), prefix=prefix)


def _block_d(prefix):
    return _concat(_branch(None, (192, 1), (320, 3, 2)),
                   _branch(None, (192, 1), (192, (1, 7), None, (0, 3)),
                           (192, (7, 1), None, (3, 0)), (192, 3, 2)),
                   _branch("max"), prefix=prefix)


def _split_3x3(*first):
    """Convs `first`, then 1x3 and 3x1 convs of 384 side by side."""
    out = nn.HybridSequential(prefix="")
    for setting in first:
        out.add(_conv(*setting))
    out.add(_concat(_conv(384, (1, 3), None, (0, 1)), _conv(384, (3, 1), None, (1, 0)),
                    prefix=""))
    return out


def _block_e(prefix):
    return _concat(_branch(None, (320, 1)),
                   _split_3x3((384, 1)),
                   _split_3x3((448, 1), (384, 3, None, 1)),
                   _branch("avg", (192, 1)), prefix=prefix)


class Inception3(HybridBlock):
    """Inception v3: a convolutional stem, 3 A blocks, B, 4 C blocks, D, 2 E blocks,
    global average pooling, dropout and the classifier."""

    def __init__(self, classes=1000, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(_conv(32, 3, 2), _conv(32, 3), _conv(64, 3, None, 1),
                              nn.MaxPool2D(3, 2), _conv(80, 1), _conv(192, 3),
                              nn.MaxPool2D(3, 2),
                              _block_a(32, "A1_"), _block_a(64, "A2_"), _block_a(64, "A3_"),
                              _block_b("B_"),
                              _block_c(128, "C1_"), _block_c(160, "C2_"),
                              _block_c(160, "C3_"), _block_c(192, "C4_"),
                              _block_d("D_"), _block_e("E1_"), _block_e("E2_"),
                              nn.GlobalAvgPool2D(), nn.Dropout(0.5))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def inception_v3(pretrained=False, ctx=None, root="~/.minigluon/models", **kwargs):
    """Inception v3."""
    net = Inception3(**kwargs)
    return load_pretrained(net, "inceptionv3", root, ctx) if pretrained else net
