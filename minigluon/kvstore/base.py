"""`mx.kv.KVStore`, the class of minigluon's own stores, and the key/value checks they share.

A kvstore holds one value per key. Workers `push` values (one per device) that the store
sums; with an optimizer set, the sum is a gradient and the store updates the value it holds
with it; `pull` copies the held value back to every device. The Trainer talks to
parameters only through this interface, so the in-process stores (`local.py`) and the
distributed one plug in the same way.

`KVStore` fills in the abstract `KVStoreBase` (interface.py, also the registry of
user-defined stores) with `init`/`push`/`pull` and an in-store optimizer.

row_sparse values and `row_sparse_pull` are described in rowsparse.py. As in MXNet, an
in-process store takes either int keys or str keys, never both: the first key initialized
decides (the distributed store takes both).
"""
from collections import OrderedDict

import numpy as np

from ..base import ShapeError, DTypeError
from .errors import KVStoreError
from ..ndarray import NDArray
from .interface import KVStoreBase
from .steps import ResumeState

__all__ = ["KVStore", "KVStoreError", "group_key_values", "check_compression_params"]


class KVStore(KVStoreBase):
    """The operations of every minigluon kvstore (MXNet's `mx.kv.KVStore` API).

    >>> kv = mx.kv.create('local')
    >>> kv.init(3, mx.nd.ones((2, 3)))
    >>> kv.push(3, [mx.nd.ones((2, 3), ctx=mx.cpu(0)), mx.nd.ones((2, 3), ctx=mx.cpu(1))])
    >>> out = mx.nd.zeros((2, 3))
    >>> kv.pull(3, out=out)                     # out is now all 2
    """

    def __init__(self, name):
        self._type = name
        self._updater = None
        self._compression = {"type": "none"}
        self._key_kind = None    # (int or str, the first key): the keys this store takes

    def __repr__(self):
        return f"<{type(self).__name__} type={self._type!r}>"

    # ---- identity -------------------------------------------------------------------
    @property
    def type(self):
        """The name this store was created with, e.g. 'local' or 'device'."""
        return self._type

    @property
    def rank(self):
        """This worker's rank among `num_workers` (0 in a one-process store)."""
        return 0

    @property
    def num_workers(self):
        """How many workers push to this store (1 in a one-process store)."""
        return 1

    def resume_state(self):
        """Where this worker starts in its job; a one-process store always starts anew
        (a distributed one may replace a lost worker, see docs/restarts.md)."""
        return ResumeState()

    @staticmethod
    def is_capable(capability):
        """Whether the store supports `capability`; only 'optimizer' is defined."""
        return check_capability(capability) == KVStore.OPTIMIZER

    # ---- data -----------------------------------------------------------------------
    def init(self, key, value):
        """Set the initial value of `key` (or of each key of a list), once per key."""
        raise NotImplementedError

    def push(self, key, value, priority=0):
        """Sum `value` (one NDArray, or a list with one per device) into `key`.

        With an optimizer or updater set, the sum is applied as a gradient to the stored
        value; otherwise it replaces the stored value. Lists of keys take lists of values.
        """
        raise NotImplementedError

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copy the value of `key` into `out` (an NDArray, or a list, one per device).

        row_sparse outs are skipped (left as they are) unless `ignore_sparse=False`, which
        copies the whole value into them; row_sparse_pull copies only some rows."""
        raise NotImplementedError

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Copy the rows `row_ids` (an NDArray of row ids; repeats are fine) of the value of
        `key` into the row_sparse array `out`, which then stores exactly those rows, sorted.

        `out` may be a list (one per device) with one `row_ids` for all or a list of them,
        one per out; a list of keys takes a list of outs and a list of row ids per key.

        >>> kv.row_sparse_pull('w', out=mx.nd.sparse.zeros('row_sparse', (5, 2)),
        ...                    row_ids=mx.nd.array([4, 0, 4]))     # rows 0 and 4
        """
        raise NotImplementedError

    def pushpull(self, key, value, out=None, priority=0):
        """`push(key, value)` then `pull(key, out)`; `out=None` pulls into `value`."""
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key, value, out, priority=0):
        """`init(key, value)` then `pull(key, out)`: every `out` gets `value`."""
        self.init(key, value)
        self.pull(key, out, priority)

    def barrier(self):
        """Wait until every worker reaches this point (nothing to wait for here)."""

    def _grouped(self, key, value, where, decides=False):
        """group_key_values(key, value, where), with the keys checked to be of the kind
        (int or str) of this store's initialized keys; `decides` (init): the first key
        sets that kind."""
        pairs = group_key_values(key, value, where)
        self._check_key_kind([k for k, _ in pairs], where, decides)
        return pairs

    # MXNet's rule; the distributed store lets int and str keys live side by side, as it
    # did before the rule came in (its servers tell keys apart by their kind too)
    _one_key_kind = True

    def _check_key_kind(self, keys, where, decides=False):
        if not self._one_key_kind:
            return
        for k in keys:
            kind = str if isinstance(k, str) else int
            if self._key_kind is None:
                if not decides:
                    continue
                self._key_kind = (kind, k)
            if self._key_kind[0] is not kind:
                used = self._key_kind[0].__name__
                raise KVStoreError(
                    f"{where} key {k!r}: this kvstore uses {used} keys (such as "
                    f"{self._key_kind[1]!r}); a kvstore takes either int keys or str keys, "
                    f"not both: use {used} keys, or another store for these")

    # ---- updates --------------------------------------------------------------------
    def set_optimizer(self, optimizer):
        """Apply `optimizer` to pushed gradients inside the store (update_on_kvstore)."""
        from ..optimizer import get_updater
        self.set_updater(get_updater(optimizer))

    def set_updater(self, updater):
        """Call `updater(key, merged_gradient, stored_value)` on every push."""
        if not callable(updater):
            raise KVStoreError(f"set_updater: the updater must be callable as "
                               f"updater(key, grad, weight), got {type(updater).__name__}")
        self._updater = updater

    _set_updater = set_updater

    @property
    def optimizer(self):
        """The Optimizer this store updates with (set_optimizer, load_optimizer_states),
        or None."""
        return getattr(self._updater, "optimizer", None)

    def set_learning_rate(self, lr):
        """Give the store's optimizer the rate `lr` from the next update on; its states
        (momenta, update counts) are kept. Not allowed with an lr_scheduler."""
        optimizer = self.optimizer
        if optimizer is None:
            raise KVStoreError(f"set_learning_rate: this {self._type!r} kvstore has no "
                               "optimizer; call set_optimizer(optimizer) first")
        optimizer.set_learning_rate(lr)

    def set_gradient_compression(self, compression_params):
        """Compress pushed gradients, e.g. `{'type': '2bit', 'threshold': 0.5}`."""
        self._compression = check_compression_params(compression_params)

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Write the store's optimizer states (and the optimizer with `dump_optimizer`)."""
        updater = self._updater_with_states("save_optimizer_states")
        with open(fname, "wb") as fout:
            fout.write(updater.get_states(dump_optimizer))

    def load_optimizer_states(self, fname):
        """Read optimizer states written by `save_optimizer_states`."""
        updater = self._updater_with_states("load_optimizer_states")
        with open(fname, "rb") as fin:
            updater.set_states(fin.read())

    def _updater_with_states(self, what):
        if self._updater is None or not hasattr(self._updater, "get_states"):
            raise KVStoreError(f"{what}: this {self._type!r} kvstore has no optimizer "
                               "states; call set_optimizer(optimizer) first")
        return self._updater


def _check_key(key, where):
    if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer, str)):
        raise KVStoreError(f"{where}: a key must be an int or a str, got {key!r} "
                           f"({type(key).__name__})")
    return key if isinstance(key, str) else int(key)


def _as_arrays(key, value, where):
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values or not all(isinstance(v, NDArray) for v in values):
        raise KVStoreError(f"{where} key {key!r}: expected an NDArray or a non-empty list "
                           f"of NDArrays (one per device), got {value!r}")
    return values


def group_key_values(key, value, where):
    """[(key, [NDArray, ...]), ...]: the arrays of each distinct key, keys in first-seen
    order. `key` is an int/str with an NDArray or list of them, or a list of keys with a
    list of such values; `where` ('push', 'pull', ...) names the call in errors."""
    if isinstance(key, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(key):
            got = f"{len(value)} values" if isinstance(value, (list, tuple)) else repr(value)
            raise KVStoreError(f"{where}: {len(key)} keys need a list of {len(key)} values "
                               f"(an NDArray or a list of NDArrays per key), got {got}")
        pairs = zip(key, value)
    else:
        pairs = [(key, value)]
    grouped = OrderedDict()
    for k, v in pairs:
        k = _check_key(k, where)
        grouped.setdefault(k, []).extend(_as_arrays(k, v, where))
    return list(grouped.items())


def check_same_layout(where, key, arrays, stored, dtype=True):
    """Raise unless every array has the shape (and, with `dtype`, the dtype) of the
    stored value of `key`."""
    for arr in arrays:
        if arr.shape != stored.shape:
            raise ShapeError(f"{where} key {key!r}: shape {arr.shape} does not match the "
                             f"initialized shape {stored.shape}")
        if dtype and arr.dtype != stored.dtype:
            raise DTypeError(f"{where} key {key!r}: dtype {np.dtype(arr.dtype).name} does not "
                             f"match the initialized dtype {np.dtype(stored.dtype).name}")


_COMPRESSION_KEYS = {"none": set(), "2bit": {"threshold"}, "1bit": {"threshold"}}


def check_compression_params(params):
    """The validated compression settings: {'type': ..., 'threshold': ...} (threshold
    defaults to 0.5 for '2bit' and 0 for '1bit', as in MXNet)."""
    if not isinstance(params, dict) or "type" not in params:
        raise KVStoreError("compression_params must be a dict with a 'type' key, e.g. "
                           f"{{'type': '2bit', 'threshold': 0.5}}, got {params!r}")
    ctype = params["type"]
    if not isinstance(ctype, str) or ctype not in _COMPRESSION_KEYS:
        raise KVStoreError(f"unknown gradient compression type {ctype!r}; use one of "
                           f"{sorted(_COMPRESSION_KEYS)}")
    unknown = set(params) - {"type"} - _COMPRESSION_KEYS[ctype]
    if unknown:
        raise KVStoreError(f"compression type {ctype!r} does not take {sorted(unknown)}")
    out = {"type": ctype}
    if ctype != "none":
        out["threshold"] = _check_threshold(ctype, params.get("threshold",
                                                              0.5 if ctype == "2bit" else 0.0))
    return out


def _check_threshold(ctype, threshold):
    number = isinstance(threshold, (int, float, np.floating)) and not isinstance(threshold, bool)
    positive_needed = ctype == "2bit"
    if not number or threshold < 0 or (positive_needed and threshold == 0):
        bound = "> 0" if positive_needed else ">= 0"
        raise KVStoreError(f"compression threshold for {ctype!r} must be a number {bound}, "
                           f"got {threshold!r}")
    return float(threshold)


def check_capability(capability):
    """`capability` as the lower-case name of a known capability, or a KVStoreError."""
    if isinstance(capability, str) and capability.lower() == KVStoreBase.OPTIMIZER:
        return capability.lower()
    raise KVStoreError(f"unknown kvstore capability {capability!r}; known: "
                       f"{KVStoreBase.OPTIMIZER!r}")
