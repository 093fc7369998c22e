"""'teststore': MXNet's example of a user-defined kvstore, registered through
`KVStoreBase.register`.

It only implements the abstract protocol (broadcast, pushpull) in this process, with no
optimizer (`is_capable('optimizer')` is False), so a Trainer using it updates the weights
on the devices. It exists to test the registry and the Trainer's handling of stores that
are not minigluon's own.

>>> kv = mx.kv.create('teststore')
>>> kv.pushpull(0, [mx.nd.ones((2,)), mx.nd.ones((2,))], out=out)    # out == [2, 2]
"""
from ..autograd import pause
from .base import KVStoreError, check_capability, group_key_values
from .interface import KVStoreBase

__all__ = ["TestStore"]


@KVStoreBase.register
class TestStore(KVStoreBase):
    """A single-process kvstore built only on the KVStoreBase protocol."""

    __test__ = False     # not a pytest test class, despite its name

    def broadcast(self, key, value, out, priority=0):
        """Copy `value` into every array of `out`."""
        with pause():
            for (_, values), (k, outs) in _paired(key, value, out, "broadcast"):
                if len(values) != 1:
                    raise KVStoreError(f"broadcast of key {k!r}: expected one value to copy, "
                                       f"got {len(values)}")
                for arr in outs:
                    arr[...] = values[0]

    def pushpull(self, key, value, out=None, priority=0):
        """Sum the arrays of `value` and write the sum into `out` (or into `value`)."""
        with pause():
            for (_, values), (_, outs) in _paired(key, value, value if out is None else out,
                                                  "pushpull"):
                total = values[0].copy()
                for val in values[1:]:
                    total += val.as_in_context(total.context)
                for arr in outs:
                    arr[...] = total.as_in_context(arr.context)

    @staticmethod
    def is_capable(capability):
        """No capability: this store cannot run an optimizer."""
        check_capability(capability)
        return False

    @property
    def type(self):
        return "teststore"

    @property
    def rank(self):
        return 0

    @property
    def num_workers(self):
        return 1


def _paired(key, value, out, where):
    """The (key, values) and (key, outs) groups of one call, side by side."""
    values = group_key_values(key, value, where)
    outs = group_key_values(key, out, where)
    return list(zip(values, outs))
