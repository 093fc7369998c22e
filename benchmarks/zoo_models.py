"""The model-zoo benchmark's models, each built twice: in minigluon and the same
architecture in PyTorch (torchvision where it has it), with a batch of random data.

A spec names the input (`image` shape or the LSTM's `tokens`), the batch, the classes and
how many steps one timing round runs (small models need several for a measurable round).
The Gluon and torchvision ImageNet models differ in details that change a few percent
of the work: torchvision's resnet50 strides in the 3x3 convolution of a bottleneck (v1.5),
Gluon's resnet50_v1 in the first 1x1. FLOPs are counted on the minigluon model.
"""
import numpy as np

VOCAB = 10000       # a PTB-sized vocabulary for the language model
LM_HIDDEN = 256
LM_STEPS = 35

SPECS = {
    "resnet18_v1": dict(image=(3, 224, 224), batch=16, classes=1000, steps=1),
    "resnet50_v1": dict(image=(3, 224, 224), batch=16, classes=1000, steps=1),
    "mobilenet_v2_1.0": dict(image=(3, 224, 224), batch=16, classes=1000, steps=1),
    "vgg11": dict(image=(3, 224, 224), batch=8, classes=1000, steps=1),
    "densenet121": dict(image=(3, 224, 224), batch=8, classes=1000, steps=1),
    "lenet": dict(image=(1, 28, 28), batch=64, classes=10, steps=20),
    "cifar_resnet18": dict(image=(3, 32, 32), batch=32, classes=10, steps=2),
    "lstm_lm": dict(tokens=LM_STEPS, batch=32, classes=VOCAB, steps=2),
}

# the benchmark's names that minigluon's get_model spells differently
ZOO_NAMES = {"mobilenet_v2_1.0": "mobilenetv2_1.0"}

TORCHVISION = {"resnet18_v1": "resnet18", "resnet50_v1": "resnet50",
               "mobilenet_v2_1.0": "mobilenet_v2", "vgg11": "vgg11",
               "densenet121": "densenet121"}


def batch_arrays(spec, seed=0):
    """(data, label) as NumPy arrays: images and class labels, or token ids (T, N) for both."""
    rng = np.random.default_rng(seed)
    if "tokens" in spec:
        shape = (spec["tokens"], spec["batch"])
        return (rng.integers(0, VOCAB, shape).astype(np.int64),
                rng.integers(0, VOCAB, shape).astype(np.int64))
    data = rng.standard_normal((spec["batch"], *spec["image"])).astype(np.float32)
    return data, rng.integers(0, spec["classes"], spec["batch"]).astype(np.int64)


# ---------------------------------------------------------------- minigluon

def minigluon_net(name, spec):
    """The minigluon model called `name`, not yet initialized."""
    if name == "lstm_lm":
        return _minigluon_lm()
    from minigluon.gluon.model_zoo import vision
    return vision.get_model(ZOO_NAMES.get(name, name), classes=spec["classes"])


def _minigluon_lm():
    from minigluon.gluon import nn, rnn
    from minigluon.gluon.block import HybridBlock

    class LanguageModel(HybridBlock):
        """Embedding, a 2-layer LSTM over (T, N), a decoder to the vocabulary per step."""

        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.embedding = nn.Embedding(VOCAB, LM_HIDDEN)
                self.lstm = rnn.LSTM(LM_HIDDEN, num_layers=2, layout="TNC",
                                     input_size=LM_HIDDEN)
                self.decoder = nn.Dense(VOCAB, flatten=False, in_units=LM_HIDDEN)

        def hybrid_forward(self, F, tokens):
            return self.decoder(self.lstm(self.embedding(tokens)))
    return LanguageModel()


def count_forward_flops(net, data):
    """Multiply-add FLOPs (2 per MAC) of one forward per sample, counted over the
    convolutions, dense layers and LSTMs on a forward of `data` (the others are small)."""
    from minigluon.gluon import nn, rnn
    total = [0.0]

    def weighted(block, inputs, out):
        weight = block.weight.data()
        total[0] += 2.0 * out.size * (weight.size // weight.shape[0])

    def recurrent(block, inputs, out):
        weights = sum(p.data().size for n, p in block.collect_params().items()
                      if n.endswith("weight"))
        total[0] += 2.0 * LM_STEPS * data.shape[1] * weights

    handles = []

    def visit(block):
        if isinstance(block, (nn.Conv2D, nn.Dense)):
            handles.append(block.register_forward_hook(weighted))
        elif isinstance(block, rnn.LSTM):
            handles.append(block.register_forward_hook(recurrent))
            return
        for child in block._children.values():
            visit(child)
    visit(net)
    net(data)
    for handle in handles:
        handle.detach()
    batch = data.shape[1] if data.ndim == 2 else data.shape[0]
    return total[0] / batch


# ---------------------------------------------------------------- PyTorch

def torch_net(name, spec):
    """The same architecture in PyTorch."""
    from torch import nn
    if name in TORCHVISION:
        return _torchvision_net(name, spec)
    if name == "lenet":
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
                             nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
                             nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, spec["classes"]))
    if name == "cifar_resnet18":
        from resnet18_train import torch_resnet18
        return torch_resnet18(spec["classes"])
    if name == "lstm_lm":
        return _torch_lm()
    raise ValueError(f"no PyTorch model for {name!r}; known: {sorted(SPECS)}")


def _torchvision_net(name, spec):
    """torchvision's model, or where torchvision is missing (a CPU-only torch cannot load
    the PyPI wheel's operators) the same architecture from torch_zoo.py."""
    try:
        import torchvision
    except (ImportError, RuntimeError, OSError) as err:
        import torch_zoo
        if name not in torch_zoo.MODELS:
            raise RuntimeError(f"{name} needs torchvision in the PyTorch venv ({err}); help: "
                               f"install it, or run --models {','.join(torch_zoo.MODELS)}, "
                               "which torch_zoo.py writes out") from err
        return torch_zoo.MODELS[name](num_classes=spec["classes"])
    return getattr(torchvision.models, TORCHVISION[name])(num_classes=spec["classes"])


def _torch_lm():
    from torch import nn

    class LanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(VOCAB, LM_HIDDEN)
            self.lstm = nn.LSTM(LM_HIDDEN, LM_HIDDEN, num_layers=2)
            self.decoder = nn.Linear(LM_HIDDEN, VOCAB)

        def forward(self, tokens):
            return self.decoder(self.lstm(self.embedding(tokens))[0])
    return LanguageModel()
