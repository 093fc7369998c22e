"""`mx.kv`: key-value stores that sum gradients across devices and hold the weights.

>>> kv = mx.kv.create('device')
>>> kv.init(0, weight)
>>> kv.push(0, [grad_on_gpu0, grad_on_gpu1])
>>> kv.pull(0, out=[weight_on_gpu0, weight_on_gpu1])

'local' sums on the CPU, 'device' on the devices; 'dist_sync', 'dist_async' and their
'_device' variants run a parameter server over processes and hosts (see dist.py).
"""
from .base import KVStoreBase, KVStoreError  # noqa: F401
from .dist import KVStoreDist  # noqa: F401
from .liveness import PeerLostError  # noqa: F401
from .local import KVStoreDevice, KVStoreLocal  # noqa: F401
from . import role  # noqa: F401  (import minigluon runs role.maybe_run_role())
from .van import JobAbortedError, TimeoutError  # noqa: F401,A004
from .wire import WireError  # noqa: F401

KVStore = KVStoreBase   # every store is an mx.kv.KVStore, as in MXNet

__all__ = ["create", "KVStore", "KVStoreBase", "KVStoreLocal", "KVStoreDevice", "KVStoreDist",
           "KVStoreError", "TimeoutError", "JobAbortedError", "PeerLostError", "WireError"]

_LOCAL_STORES = {
    "local": KVStoreLocal,
    "local_allreduce_cpu": KVStoreLocal,
    "device": KVStoreDevice,
    "local_allreduce_device": KVStoreDevice,
}
_DIST_STORES = ("dist", "dist_sync", "dist_async", "dist_sync_device", "dist_async_device")


def create(name="local"):
    """A new kvstore of type `name`: 'local' (alias 'local_allreduce_cpu'), 'device'
    (alias 'local_allreduce_device'), or a distributed one: 'dist_sync' (alias 'dist'),
    'dist_async', 'dist_sync_device', 'dist_async_device'.

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
        return KVStoreDist(key)
    known = ", ".join(repr(n) for n in list(_LOCAL_STORES) + list(_DIST_STORES))
    raise KVStoreError(f"unknown kvstore type {name!r}; known types: {known}")
