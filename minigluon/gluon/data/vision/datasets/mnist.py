"""MNIST and Fashion-MNIST: (28, 28, 1) uint8 images in the IDX files of their canonical
distribution, downloaded from a mirror when missing."""
import os

from .....io.idx import read_idx
from .downloads import MXNET_S3, DownloadedDataset

__all__ = ["MNIST", "FashionMNIST"]


class MNIST(DownloadedDataset):
    """MNIST handwritten digits: (28, 28, 1) uint8 images, labels 0-9.

    Reads `train-images-idx3-ubyte.gz`, `train-labels-idx1-ubyte.gz` (train=True) or
    `t10k-images-idx3-ubyte.gz`, `t10k-labels-idx1-ubyte.gz` (train=False) from `root`.

    Parameters
    ----------
    root : str, optional
        Folder of the files; see the module doc for the default.
    train : bool
        Training or test set.
    transform : callable, optional
        Called as `transform(data, label)` on each sample.
    """

    _name = "mnist"
    _mirrors = (("https://ossci-datasets.s3.amazonaws.com/mnist/", "md5"),
                (MXNET_S3 + "mnist/", "sha1"))
    _digests = {
        "train-images-idx3-ubyte.gz": ("6c95f4b05d2bf285e1bfb0e7960c31bd3b3f8a7d",
                                       "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        "train-labels-idx1-ubyte.gz": ("2a80914081dc54586dbdf242f9805a6b8d2a15fc",
                                       "d53e105ee54ea40749a09fcbcd1e9432"),
        "t10k-images-idx3-ubyte.gz": ("c3a25af1f52dad7f726cce8cacb138654b760d48",
                                      "9fb629c4189551a2d022fa330f9573f3"),
        "t10k-labels-idx1-ubyte.gz": ("763e7fa3757d93b0cdec073cef058b2004252c17",
                                      "ec29112dd5afa0611ce80d1b7f02629c"),
    }

    def __init__(self, root=None, train=True, transform=None):
        self._train = train
        super().__init__(root, transform)

    def _sources(self, name):
        sha1, md5 = self._digests[name]
        return [(base + name, sha1 if kind == "sha1" else None, md5 if kind == "md5" else None)
                for base, kind in self._mirrors]

    def _get_data(self):
        prefix = "train" if self._train else "t10k"
        names = [f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-labels-idx1-ubyte.gz"]
        paths = [os.path.join(self._root, n) for n in names]
        # an uncompressed copy (same name without .gz) is used when it is all there is
        paths = [p if os.path.exists(p) or not os.path.exists(p[:-3]) else p[:-3]
                 for p in paths]
        if not all(os.path.exists(p) for p in paths):
            paths = self._ensure(names, {n: self._sources(n) for n in names})
        images = read_idx(paths[0], 3)
        labels = read_idx(paths[1], 1)
        self._set(images[:, :, :, None], labels, paths[0])


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: (28, 28, 1) uint8 clothing images, labels 0-9, in the same
    files and layout as MNIST (see MNIST for the parameters)."""

    _name = "fashion-mnist"
    _mirrors = (("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", "md5"),
                (MXNET_S3 + "fashion-mnist/", "sha1"))
    _digests = {
        "train-images-idx3-ubyte.gz": ("0cf37b0d40ed5169c6b3aba31069a9770ac9043d",
                                       "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        "train-labels-idx1-ubyte.gz": ("236021d52f1e40852b06a4c3008d8de8aef1e40b",
                                       "25c81989df183df01b3e8a0aad5dffbe"),
        "t10k-images-idx3-ubyte.gz": ("626ed6a7c06dd17c0eec72fa3be1740f146a2863",
                                      "bef4ecab320f06d8554ea6380940ec79"),
        "t10k-labels-idx1-ubyte.gz": ("17f9ab60e7257a1620f4ad76bbbaf857c3920701",
                                      "bb300cfdad3c16e7a12a480ee83cd310"),
    }
