"""DenseNet-121/161/169/201 (Huang et al. 2017): dense blocks whose layers each see the
concatenation of all earlier outputs, joined by 1x1-conv + 2x2-average-pool transitions."""
from ... import nn
from ...block import HybridBlock
from ...contrib.nn import HybridConcurrent, Identity
from ._factory import factory
from .pretrained import load_pretrained

# num_layers: (stem channels, growth rate, layers per dense block)
_SPEC = {121: (64, 32, [6, 12, 24, 16]), 161: (96, 48, [6, 12, 36, 24]),
         169: (64, 32, [6, 12, 32, 32]), 201: (64, 32, [6, 12, 48, 32])}


def _dense_layer(growth_rate, bn_size, dropout):
    """BN-ReLU-1x1 conv to bn_size*growth, BN-ReLU-3x3 conv to growth; its output is
    concatenated to its input."""
    new = nn.HybridSequential(prefix="")
    new.add(nn.BatchNorm(), nn.Activation("relu"),
            nn.Conv2D(bn_size * growth_rate, 1, use_bias=False),
            nn.BatchNorm(), nn.Activation("relu"),
            nn.Conv2D(growth_rate, 3, padding=1, use_bias=False))
    if dropout:
        new.add(nn.Dropout(dropout))
    out = HybridConcurrent(axis=1, prefix="")
    out.add(Identity(), new)
    return out


def _transition(channels):
    out = nn.HybridSequential(prefix="")
    out.add(nn.BatchNorm(), nn.Activation("relu"), nn.Conv2D(channels, 1, use_bias=False),
            nn.AvgPool2D(2, 2))
    return out


class DenseNet(HybridBlock):
    """A 7x7 stem, dense blocks of `block_config[i]` layers adding `growth_rate` channels
    each, transitions halving the channels, then BN-ReLU, global pooling, the classifier."""

    def __init__(self, num_init_features, growth_rate, block_config, bn_size=4, dropout=0,
                 classes=1000, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.Conv2D(num_init_features, 7, 2, 3, use_bias=False),
                              nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(3, 2, 1))
            channels = num_init_features
            for i, num_layers in enumerate(block_config):
                block = nn.HybridSequential(prefix=f"stage{i + 1}_")
                with block.name_scope():
                    for _ in range(num_layers):
                        block.add(_dense_layer(growth_rate, bn_size, dropout))
                self.features.add(block)
                channels += num_layers * growth_rate
                if i != len(block_config) - 1:
                    channels //= 2
                    self.features.add(_transition(channels))
            self.features.add(nn.BatchNorm(), nn.Activation("relu"), nn.GlobalAvgPool2D(),
                              nn.Flatten())
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def get_densenet(num_layers, pretrained=False, ctx=None, root="~/.minigluon/models",
                 **kwargs):
    """DenseNet with 121, 161, 169 or 201 layers."""
    if num_layers not in _SPEC:
        raise ValueError(f"get_densenet: num_layers must be one of {sorted(_SPEC)}, got "
                         f"{num_layers}")
    init, growth, config = _SPEC[num_layers]
    net = DenseNet(init, growth, config, **kwargs)
    return load_pretrained(net, f"densenet{num_layers}", root, ctx) if pretrained else net


densenet121, densenet161, densenet169, densenet201 = (
    factory(f"densenet{n}", get_densenet, n) for n in (121, 161, 169, 201))
