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
import importlib as _importlib

from .errors import KVStoreError

# The stores load on first use: a scheduler or server process imports this package for
# role.py and its own modules only, without the stores' NDArrays and optimizers.
# name -> the module of this package that defines it
_LAZY = {
    "KVStore": "base", "KVStoreDist": "dist", "current_resume": "dist",
    "KVStoreBase": "interface", "PeerLostError": "liveness", "KVStoreDevice": "local",
    "KVStoreLocal": "local", "MODES": "modes", "ResumeState": "steps",
    "TestStore": "teststore", "JobAbortedError": "van", "TimeoutError": "van",
    "WireError": "wire",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


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
    from .interface import KVStoreBase
    from .modes import MODES
    from . import teststore  # noqa: F401  (registers 'teststore')
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
    from .dist import current_resume
    return current_resume()


def _store_class(mode):
    if mode.distributed:
        from .dist import KVStoreDist
        return KVStoreDist
    from .local import KVStoreDevice, KVStoreLocal
    return KVStoreDevice if mode.on_device else KVStoreLocal
