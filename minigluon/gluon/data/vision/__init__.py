"""`gluon.data.vision`: image datasets and transforms."""
from .datasets import (CIFAR10, CIFAR100, MNIST, FashionMNIST, ImageFolderDataset,  # noqa: F401
                       ImageRecordDataset, SyntheticDigits)
from . import transforms  # noqa: F401
