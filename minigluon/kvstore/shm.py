"""Shared-memory segments: the same-host data path between a worker and a server.

A worker copies a big push into a segment of its own and sends only the segment's name;
the server reads the values in place. For a pull, the server copies the value into the
worker's pull segment. Every segment is created by a worker (a file in /dev/shm, mode
0600) and unlinked by it once the server has mapped it, so no name outlives its first use
and a crash leaves at most the segments that were never used.

>>> seg = Segment.create(4 * 1024)
>>> peer = Segment.attach(seg.name, 4 * 1024)       # in the server
>>> seg.unlink()                                     # both mappings stay valid
"""
import mmap
import os
import re
import uuid

import numpy as np

from .. import config
from .errors import KVStoreError

__all__ = ["Segment", "available", "valid_name"]

SHM_DIR = "/dev/shm"
_NAME = re.compile(r"^mgkv-[0-9a-f]{1,16}-[0-9a-f]{1,40}$")


def available():
    """Whether this process may use shared memory (MINIGLUON_KVSTORE_SHM and /dev/shm)."""
    return config.kvstore_use_shm() and os.path.isdir(SHM_DIR)


def valid_name(name):
    """Whether `name` is a segment name minigluon made (no path can sneak in)."""
    return bool(_NAME.match(name))


class Segment:
    """A named shared-memory file mapped into this process."""

    def __init__(self, name, nbytes, create):
        path = os.path.join(SHM_DIR, name)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, nbytes)
            elif os.fstat(fd).st_size < nbytes:
                raise KVStoreError(f"shared memory segment {name} holds "
                                   f"{os.fstat(fd).st_size} bytes, {nbytes} needed")
            self._map = mmap.mmap(fd, max(nbytes, 1))
        finally:
            os.close(fd)
        self.name, self.nbytes, self.path = name, nbytes, path
        self.linked = create
        self.req = None          # the last request that used it (workers)
        self.server = None       # workers: the server rank it carries values to
        self.stale = False       # workers: that server was replaced; use a new segment

    @classmethod
    def create(cls, nbytes):
        """A new segment of `nbytes` (zero-filled), named after this process."""
        return cls(f"mgkv-{os.getpid():x}-{uuid.uuid4().hex}", nbytes, create=True)

    @classmethod
    def attach(cls, name, nbytes):
        """Map the segment `name` made by a peer; KVStoreError if it is not usable."""
        if not valid_name(name):
            raise KVStoreError(f"{name!r} is not a minigluon shared memory segment name")
        try:
            return cls(name, nbytes, create=False)
        except OSError as err:
            raise KVStoreError(f"cannot map shared memory segment {name}: {err}") from None

    def view(self, dtype, count):
        """The first `count` values of the segment as a flat NumPy array (no copy)."""
        return np.frombuffer(self._map, dtype=dtype, count=count)

    def release(self, reply=None):
        """A reply showed the server has mapped the segment: drop the name."""
        self.unlink()

    def unlink(self):
        """Remove the name (mappings stay valid); the creator calls it once."""
        if self.linked:
            self.linked = False
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
