"""Vision datasets: MNIST, FashionMNIST, CIFAR10/100, image folders, RecordIO image files,
and SyntheticDigits (procedural MNIST-shaped digits for offline smoke tests).

Samples are `(image, label)`: an HWC uint8 NDArray and an int32 label, as in MXNet, passed
through `transform(image, label)` when one is given.

Where the files live: the `root` argument, by default `$MINIGLUON_DATA/<name>` when that
variable is set, else the repository's `datasets/<name>` folder (`~/.minigluon/datasets/<name>`
for an installed package). Files already there are used as they are. Missing files are
downloaded from their canonical locations and checked against known SHA-1/MD5 digests; with
no network the error names the files and the folder to put them in.

One module per dataset family (`mnist`, `cifar`, `image_files`, `synthetic_digits`, drawn by
`glyphs`); `downloads` holds the file fetching and the in-memory base class they share.

Example::

    train = gluon.data.vision.MNIST(train=True).transform_first(transforms.ToTensor())
"""
from .....io.format_error import DatasetFormatError
from .cifar import CIFAR10, CIFAR100
from .downloads import DatasetNotFoundError, default_root  # noqa: F401  (examples use it)
from .image_files import ImageFolderDataset, ImageRecordDataset
from .mnist import MNIST, FashionMNIST
from .synthetic_digits import SyntheticDigits

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "CIFAR100", "ImageRecordDataset",
           "ImageFolderDataset", "SyntheticDigits", "DatasetNotFoundError",
           "DatasetFormatError"]
