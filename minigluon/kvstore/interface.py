"""`mx.kv.KVStoreBase`: the protocol a kvstore offers the Trainer, and the registry of
user-defined stores.

A store written outside minigluon (an allreduce library, a test double) subclasses
`KVStoreBase`, implements `broadcast` and `pushpull` (and `set_optimizer` with
`is_capable('optimizer')` returning True if it can update weights), and registers itself;
`mx.kv.create('<its class name, lowercase>')` then builds it, and `gluon.Trainer` drives
it like the built-in stores.

>>> @mx.kv.KVStoreBase.register
... class MyStore(mx.kv.KVStoreBase):
...     def broadcast(self, key, value, out, priority=0): ...
...     def pushpull(self, key, value, out=None, priority=0): ...
>>> type(mx.kv.create('mystore')).__name__
'MyStore'
"""
import warnings

__all__ = ["KVStoreBase"]


def _missing(store, what):
    return NotImplementedError(
        f"{type(store).__name__} does not implement {what}; a kvstore subclassing "
        "mx.kv.KVStoreBase must override it (or leave it out of what it is used for)")


class KVStoreBase:
    """The abstract kvstore: the operations data-parallel training needs.

    Subclasses override the methods below; every one of them here raises
    NotImplementedError. `register` makes a subclass available to `mx.kv.create`.
    """

    OPTIMIZER = "optimizer"
    kv_registry = {}      # lowercase class name -> class, filled by `register`

    # ---- data ---------------------------------------------------------------------
    def broadcast(self, key, value, out, priority=0):
        """Copy `value` (the one of rank 0) into `out` (an NDArray or a list, one per
        device) on every worker."""
        raise _missing(self, "broadcast")

    def pushpull(self, key, value, out=None, priority=0):
        """Sum `value` (an NDArray or a list, one per device) over every device and worker
        and write the sum into `out`, or back into `value` when `out` is None."""
        raise _missing(self, "pushpull")

    # ---- updates ------------------------------------------------------------------
    def set_optimizer(self, optimizer):
        """Run `optimizer` inside the store on every pushed gradient."""
        raise _missing(self, "set_optimizer")

    def is_capable(self, capability):
        """Whether the store supports `capability` (e.g. KVStoreBase.OPTIMIZER)."""
        raise _missing(self, "is_capable")

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Write the store's optimizer states to `fname`."""
        raise _missing(self, "save_optimizer_states")

    def load_optimizer_states(self, fname):
        """Read optimizer states written by `save_optimizer_states`."""
        raise _missing(self, "load_optimizer_states")

    # ---- identity -----------------------------------------------------------------
    @property
    def type(self):
        """The store's type name, e.g. 'local'."""
        raise _missing(self, "type")

    @property
    def rank(self):
        """This worker's rank, in [0, num_workers)."""
        raise _missing(self, "rank")

    @property
    def num_workers(self):
        """How many workers take part."""
        raise _missing(self, "num_workers")

    # ---- registry -----------------------------------------------------------------
    @staticmethod
    def register(klass):
        """Class decorator: make `klass` creatable as `mx.kv.create(klass.__name__.lower())`.
        Registering a second class of the same name replaces the first, with a warning."""
        if not isinstance(klass, type):
            raise TypeError(f"KVStoreBase.register takes a class, got {klass!r}")
        name = klass.__name__.lower()
        old = KVStoreBase.kv_registry.get(name)
        if old is not None and old is not klass:
            warnings.warn(f"kvstore {klass.__module__}.{klass.__name__} replaces the "
                          f"registered kvstore {old.__module__}.{old.__name__} as {name!r}",
                          stacklevel=2)
        KVStoreBase.kv_registry[name] = klass
        return klass
