"""torchvision's zoo architectures written out in plain PyTorch, for a PyTorch install
without torchvision (a CPU-only torch cannot load the PyPI torchvision wheel's C
operators, which are built against the CUDA torch). Same layers, shapes, order and
in-place ReLUs as torchvision's models, so the work and its speed are the same; the
weights start from PyTorch's default initializers, which a speed benchmark does not see.

    net = torch_zoo.densenet121(num_classes=1000)
"""
import torch
from torch import nn
from torch.nn import functional as F


class _DenseLayer(nn.Module):
    """BN-ReLU-1x1 conv to bn_size*growth, BN-ReLU-3x3 conv to growth, on the
    concatenation of every earlier feature map of the block (torchvision's layer)."""

    def __init__(self, channels, growth, bn_size):
        super().__init__()
        self.norm1, self.relu1 = nn.BatchNorm2d(channels), nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(channels, bn_size * growth, 1, bias=False)
        self.norm2, self.relu2 = nn.BatchNorm2d(bn_size * growth), nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, features):
        x = self.conv1(self.relu1(self.norm1(torch.cat(features, 1))))
        return self.conv2(self.relu2(self.norm2(x)))


class _DenseBlock(nn.ModuleDict):
    def __init__(self, layers, channels, growth, bn_size):
        super().__init__({f"denselayer{i + 1}": _DenseLayer(channels + i * growth, growth,
                                                             bn_size) for i in range(layers)})

    def forward(self, x):
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


def _transition(channels, out):
    return nn.Sequential(nn.BatchNorm2d(channels), nn.ReLU(inplace=True),
                         nn.Conv2d(channels, out, 1, bias=False), nn.AvgPool2d(2, 2))


class DenseNet(nn.Module):
    """torchvision's DenseNet: a 7x7 stem and max pooling, dense blocks joined by
    transitions that halve the channels, BN, ReLU, global average pooling, classifier."""

    def __init__(self, growth=32, blocks=(6, 12, 24, 16), init=64, bn_size=4,
                 num_classes=1000):
        super().__init__()
        layers = [nn.Conv2d(3, init, 7, 2, 3, bias=False), nn.BatchNorm2d(init),
                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
        channels = init
        for i, count in enumerate(blocks):
            layers.append(_DenseBlock(count, channels, growth, bn_size))
            channels += count * growth
            if i != len(blocks) - 1:
                layers.append(_transition(channels, channels // 2))
                channels //= 2
        layers.append(nn.BatchNorm2d(channels))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = F.relu(self.features(x), inplace=True)
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def densenet121(num_classes=1000):
    """torchvision.models.densenet121's architecture."""
    return DenseNet(num_classes=num_classes)


MODELS = {"densenet121": densenet121}
