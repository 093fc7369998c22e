"""`mx.name`: how symbols without an explicit name get one (`fullyconnected0`, ...).

The current NameManager hands out names per hint (the operator's lower-cased name) from
its own counters. `with mx.name.NameManager():` starts fresh counters for the block and
puts the previous manager back after it; `with mx.name.Prefix('net_'):` also prefixes
every name, automatic or given, as MXNet does: a HybridBlock traced on Symbols runs its
`hybrid_forward` inside `Prefix(block.prefix)`, so `F.FullyConnected(..., name='fwd')` in
a block `dense0_` makes the node `dense0_fwd`.

>>> with mx.name.Prefix('enc_'):
...     y = mx.sym.FullyConnected(x, num_hidden=4)     # named enc_fullyconnected0
...     z = mx.sym.relu(y, name='act')                  # named enc_act
"""
import itertools
import threading

__all__ = ["NameManager", "Prefix"]

_local = threading.local()


class _CurrentProperty(type):
    """`NameManager.current`, readable and settable on the class, per thread (MXNet's)."""

    @property
    def current(cls):
        if not hasattr(_local, "manager"):
            _local.manager = NameManager()
        return _local.manager

    @current.setter
    def current(cls, manager):
        if not isinstance(manager, NameManager):
            raise TypeError(f"NameManager.current must be a NameManager, got {manager!r}")
        _local.manager = manager


class NameManager(metaclass=_CurrentProperty):
    """Names automatically: `get(None, 'conv')` gives conv0, conv1, ...; a given name is
    kept. Subclass and override `get` to name differently."""

    def __init__(self):
        self._counters = {}
        self._previous = None

    def get(self, name, hint):
        """`name` when given, else `hint` followed by how many times it was asked for."""
        if name:
            return name
        counter = self._counters.setdefault(hint, itertools.count())
        return f"{hint}{next(counter)}"

    def __enter__(self):
        self._previous = NameManager.current
        NameManager.current = self
        return self

    def __exit__(self, *exc):
        NameManager.current = self._previous
        self._previous = None


class Prefix(NameManager):
    """A NameManager that puts `prefix` before every name, the given ones too."""

    def __init__(self, prefix):
        super().__init__()
        self._prefix = prefix

    def get(self, name, hint):
        return self._prefix + super().get(name, hint)
