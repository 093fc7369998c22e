"""The error of `mx.recordio`: a RecordIO file or record that cannot be read or written."""
from ..base import MXNetError

__all__ = ["RecordIOError"]


class RecordIOError(MXNetError, IOError):
    """A RecordIO file that cannot be read or written (corrupt, truncated, wrong mode...)."""
