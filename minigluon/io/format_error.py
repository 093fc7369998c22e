"""The error of the data-file readers of `mx.io` and `gluon.data` (IDX, CIFAR batches,
archives): a file that is corrupt, truncated or not in the expected format."""
from ..base import MXNetError

__all__ = ["DatasetFormatError"]


class DatasetFormatError(MXNetError, ValueError):
    """A data file that is corrupt, truncated or not in the expected format."""
