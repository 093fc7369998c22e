"""The two models of the links benchmark written in MXNet 1.x Gluon: twins of minigluon's
`model_zoo.vision.lenet` and `cifar_resnet18` (gluon/model_zoo/vision/simple.py), layer
for layer, so both frameworks train the same architecture. The launcher checks that the
two report the same number of parameters."""
from mxnet.gluon import nn


def lenet(classes=10):
    """Two conv(5x5, relu) + max-pool stages, dense 500 (relu), dense `classes`."""
    net = nn.HybridSequential()
    net.add(nn.Conv2D(20, kernel_size=5, activation="relu"), nn.MaxPool2D(2, 2),
            nn.Conv2D(50, kernel_size=5, activation="relu"), nn.MaxPool2D(2, 2),
            nn.Flatten(), nn.Dense(500, activation="relu"), nn.Dense(classes))
    return net


class Residual(nn.HybridBlock):
    """d2l's unit: conv3x3-BN-ReLU-conv3x3-BN plus an optional 1x1 shortcut, then ReLU."""

    def __init__(self, channels, use_1x1conv=False, strides=1, **kwargs):
        super().__init__(**kwargs)
        self.conv1 = nn.Conv2D(channels, kernel_size=3, padding=1, strides=strides)
        self.conv2 = nn.Conv2D(channels, kernel_size=3, padding=1)
        self.conv3 = nn.Conv2D(channels, kernel_size=1, strides=strides) \
            if use_1x1conv else None
        self.bn1, self.bn2 = nn.BatchNorm(), nn.BatchNorm()

    def hybrid_forward(self, F, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (self.conv3(x) if self.conv3 is not None else x))


def cifar_resnet18(classes=10):
    """ResNet-18 for 32x32 images (d2l's multi-machine chapter: 3x3 stem, no pooling)."""
    net = nn.HybridSequential()
    net.add(nn.Conv2D(64, kernel_size=3, strides=1, padding=1), nn.BatchNorm(),
            nn.Activation("relu"))
    for channels, first in ((64, True), (128, False), (256, False), (512, False)):
        net.add(Residual(channels, use_1x1conv=not first, strides=1 if first else 2),
                Residual(channels))
    net.add(nn.GlobalAvgPool2D(), nn.Dense(classes))
    return net
