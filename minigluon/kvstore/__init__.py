"""`mx.kv`: key-value stores that sum gradients across devices and hold the weights.

>>> kv = mx.kv.create('device')
>>> kv.init(0, weight)
>>> kv.push(0, [grad_on_gpu0, grad_on_gpu1])
>>> kv.pull(0, out=[weight_on_gpu0, weight_on_gpu1])

'local' sums on the CPU, 'device' on the devices; the 'dist_*' stores are not built yet.
"""
from .base import KVStoreBase, KVStoreError, KVStoreNotBuiltError  # noqa: F401
from .local import KVStoreDevice, KVStoreLocal  # noqa: F401

KVStore = KVStoreBase   # every store is an mx.kv.KVStore, as in MXNet

__all__ = ["create", "KVStore", "KVStoreBase", "KVStoreLocal", "KVStoreDevice",
           "KVStoreError", "KVStoreNotBuiltError"]

_LOCAL_STORES = {
    "local": KVStoreLocal,
    "local_allreduce_cpu": KVStoreLocal,
    "device": KVStoreDevice,
    "local_allreduce_device": KVStoreDevice,
}
_DIST_STORES = ("dist", "dist_sync", "dist_async", "dist_sync_device", "dist_async_device")


def create(name="local"):
    """A new kvstore of type `name`: 'local' (alias 'local_allreduce_cpu') or 'device'
    (alias 'local_allreduce_device').

    >>> kv = mx.kv.create('local')
    >>> kv.type
    'local'
    """
    if not isinstance(name, str):
        raise KVStoreError(f"the kvstore name must be a str such as 'local' or 'device', "
                           f"got {name!r}")
    key = name.lower()
    if key in _LOCAL_STORES:
        return _LOCAL_STORES[key](key)
    if key in _DIST_STORES:
        raise KVStoreNotBuiltError(
            f"kvstore {name!r}: the distributed kvstore is not built yet in minigluon; on one "
            "machine use 'local' or 'device' (they sum over the devices of this process)")
    known = ", ".join(repr(n) for n in list(_LOCAL_STORES) + list(_DIST_STORES))
    raise KVStoreError(f"unknown kvstore type {name!r}; known types: {known}")
