"""Loading pretrained weights: only from a local file, since minigluon fetches none."""
import os

from ....base import MXNetError


def load_pretrained(net, name, root, ctx):
    """Load `root/<name>.params` into `net`, or explain why that is impossible."""
    path = os.path.join(os.path.expanduser(root), f"{name}.params")
    if not os.path.isfile(path):
        raise MXNetError(
            f"pretrained=True for {name!r}: minigluon downloads no weights, and {path} does not "
            "exist. Put a file written by net.save_parameters() there (or pass root=...), or "
            "use pretrained=False and train the model")
    net.load_parameters(path, ctx=ctx)
    return net
