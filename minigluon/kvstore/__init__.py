"""`mx.kv`: key-value stores that sum gradients across devices and hold the weights.

>>> kv = mx.kv.create('device')
>>> kv.init(0, weight)
>>> kv.push(0, [grad_on_gpu0, grad_on_gpu1])
>>> kv.pull(0, out=[weight_on_gpu0, weight_on_gpu1])

'local' sums on the CPU, 'device' on the devices; 'dist_sync', 'dist_async' and their
'_device' variants run a parameter server over processes and hosts (see dist.py). What
each name means is one entry of modes.MODES. A store registered with
`KVStoreBase.register` (interface.py; 'teststore' is one) is created by its class name.
"""
from .base import KVStore, KVStoreError  # noqa: F401
from .dist import KVStoreDist, current_resume  # noqa: F401
from .interface import KVStoreBase
from .liveness import PeerLostError  # noqa: F401
from .local import KVStoreDevice, KVStoreLocal  # noqa: F401
from .modes import MODES
from .steps import ResumeState
from . import role  # noqa: F401  (import minigluon runs role.maybe_run_role())
from .teststore import TestStore  # noqa: F401  (registers 'teststore')
from .van import JobAbortedError, TimeoutError  # noqa: F401,A004
from .wire import WireError  # noqa: F401

__all__ = ["create", "KVStore", "KVStoreBase", "KVStoreLocal", "KVStoreDevice", "KVStoreDist",
           "TestStore", "KVStoreError", "TimeoutError", "JobAbortedError", "PeerLostError", "WireError",
           "ResumeState", "resume_state"]


def create(name="local"):
    """A new kvstore of type `name`: 'local' (alias 'local_allreduce_cpu'), 'device'
    (alias 'local_allreduce_device'), or a distributed one: 'dist_sync' (alias 'dist'),
    'dist_async', 'dist_sync_device', 'dist_async_device'; or a store registered with
    `KVStoreBase.register`, by its class name in lowercase (e.g. 'teststore').

    >>> kv = mx.kv.create('local')
    >>> kv.type
    'local'
    """
    if not isinstance(name, str):
        raise KVStoreError(f"the kvstore name must be a str such as 'local' or 'device', "
                           f"got {name!r}")
    registered = KVStoreBase.kv_registry.get(name.lower())
    if registered is not None:
        return registered()
    mode = MODES.get(name.lower())
    if mode is None:
        known = ", ".join(repr(n) for n in [*MODES, *KVStoreBase.kv_registry])
        raise KVStoreError(f"unknown kvstore type {name!r}; known types: {known}")
    return _store_class(mode)(mode.name)


def resume_state():
    """Where this process starts in its distributed job (`ResumeState`): a replacement
    worker started by `minigluon-launch --max-restarts` resumes after the steps its rank
    had made; any other process, or one with no dist kvstore yet, at step 0. DataLoaders
    over a SplitSampler read it to skip the batches already trained (docs/restarts.md).

    >>> mx.kv.resume_state().step
    0
    """
    return current_resume()


def _store_class(mode):
    if mode.distributed:
        return KVStoreDist
    return KVStoreDevice if mode.on_device else KVStoreLocal
