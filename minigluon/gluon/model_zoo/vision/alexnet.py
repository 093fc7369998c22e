"""AlexNet (Krizhevsky et al. 2012), in the single-tower form of MXNet's model zoo."""
from ... import nn
from ...block import HybridBlock
from .pretrained import load_pretrained


class AlexNet(HybridBlock):
    """Five convolutions (three max-pooled), two Dense(4096) with dropout, the classifier.
    Made for 224x224 inputs; anything from 63x63 up runs."""

    def __init__(self, classes=1000, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.Conv2D(64, 11, 4, 2, activation="relu"),
                              nn.MaxPool2D(3, 2),
                              nn.Conv2D(192, 5, padding=2, activation="relu"),
                              nn.MaxPool2D(3, 2),
                              nn.Conv2D(384, 3, padding=1, activation="relu"),
                              nn.Conv2D(256, 3, padding=1, activation="relu"),
                              nn.Conv2D(256, 3, padding=1, activation="relu"),
                              nn.MaxPool2D(3, 2), nn.Flatten(),
                              nn.Dense(4096, activation="relu"), nn.Dropout(0.5),
                              nn.Dense(4096, activation="relu"), nn.Dropout(0.5))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def alexnet(pretrained=False, ctx=None, root="~/.minigluon/models", **kwargs):
    """AlexNet."""
    net = AlexNet(**kwargs)
    return load_pretrained(net, "alexnet", root, ctx) if pretrained else net
