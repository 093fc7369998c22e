"""Small models: LeNet and an MLP for MNIST, and the CIFAR-10 ResNet-18 of the d2l book."""
from ... import nn
from ...block import HybridBlock
from .pretrained import load_pretrained


class LeNet(HybridBlock):
    """LeNet for 28x28 digits: two conv+pool stages, then dense 500 and dense `classes`.

    Inputs: data (N, 1, 28, 28). Outputs: logits (N, classes).
    """

    def __init__(self, classes=10, activation="relu", **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.Conv2D(20, kernel_size=5, activation=activation),
                              nn.MaxPool2D(pool_size=2, strides=2),
                              nn.Conv2D(50, kernel_size=5, activation=activation),
                              nn.MaxPool2D(pool_size=2, strides=2),
                              nn.Flatten(),
                              nn.Dense(500, activation=activation))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


class MLP(HybridBlock):
    """A multilayer perceptron: Dense(h, relu) for each h in `hidden`, then Dense(classes)."""

    def __init__(self, hidden=(128, 64), classes=10, activation="relu", **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.body = nn.HybridSequential(prefix="")
            for units in hidden:
                self.body.add(nn.Dense(units, activation=activation))
            self.body.add(nn.Dense(classes))

    def hybrid_forward(self, F, x):
        return self.body(x)


class _Residual(HybridBlock):
    """The d2l residual unit: conv3x3-BN-ReLU-conv3x3-BN plus an optional 1x1 shortcut."""

    def __init__(self, channels, use_1x1conv=False, strides=1, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv1 = nn.Conv2D(channels, kernel_size=3, padding=1, strides=strides)
            self.conv2 = nn.Conv2D(channels, kernel_size=3, padding=1)
            self.conv3 = nn.Conv2D(channels, kernel_size=1, strides=strides) \
                if use_1x1conv else None
            self.bn1 = nn.BatchNorm()
            self.bn2 = nn.BatchNorm()

    def hybrid_forward(self, F, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        if self.conv3 is not None:
            x = self.conv3(x)
        return F.relu(y + x)


def cifar_resnet18(classes=10, pretrained=False, root="~/.minigluon/models", ctx=None,
                   **kwargs):
    """ResNet-18 for 32x32 images as in d2l's multi-machine chapter (3x3 stem, no pooling)."""
    net = nn.HybridSequential(**kwargs)
    with net.name_scope():
        net.add(nn.Conv2D(64, kernel_size=3, strides=1, padding=1), nn.BatchNorm(),
                nn.Activation("relu"))
        for channels, first in ((64, True), (128, False), (256, False), (512, False)):
            stage = nn.HybridSequential()
            with stage.name_scope():
                stage.add(_Residual(channels, use_1x1conv=not first, strides=1 if first else 2),
                          _Residual(channels))
            net.add(stage)
        net.add(nn.GlobalAvgPool2D(), nn.Dense(classes))
    return load_pretrained(net, "cifar_resnet18", root, ctx) if pretrained else net


def lenet(classes=10, pretrained=False, root="~/.minigluon/models", ctx=None, **kwargs):
    """A LeNet (see LeNet)."""
    net = LeNet(classes=classes, **kwargs)
    return load_pretrained(net, "lenet", root, ctx) if pretrained else net


def mlp(classes=10, hidden=(128, 64), pretrained=False, root="~/.minigluon/models", ctx=None,
        **kwargs):
    """An MLP (see MLP)."""
    net = MLP(hidden=hidden, classes=classes, **kwargs)
    return load_pretrained(net, "mlp", root, ctx) if pretrained else net
