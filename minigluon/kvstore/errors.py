"""The kvstore's own error, in a module that imports nothing heavy: the scheduler's and
the server's modules raise it without loading the stores (base.py re-exports it)."""
from ..base import MXNetError


class KVStoreError(MXNetError, ValueError):
    """A kvstore used the wrong way: an unknown or uninitialized key, a bad value..."""
