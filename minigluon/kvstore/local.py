"""The in-process kvstores: 'local' sums pushed values on the CPU, 'device' on a device.

Both keep one stored value per key, in the storage type it was initialized with. A push
sums the values of every device into one array (reduce.py; row_sparse values into a
row_sparse sum of the rows any device touched), then either applies the updater to the
stored value with that sum as the gradient, or replaces the stored value with the sum
(converted to the key's storage type). A pull copies the stored value into each output, on
its own device; row_sparse_pull copies only the rows asked for (rowsparse.py).
"""
from ..autograd import pause
from ..context import cpu
from ..ndarray import zeros
from .base import KVStore, KVStoreError, check_same_layout
from .reduce import sum_into
from .rowsparse import (check_row_sparse_outs, gather_rows, group_row_sparse_pull,
                        is_row_sparse, row_ids_of, sum_values)

__all__ = ["KVStoreLocal", "KVStoreDevice"]


class KVStoreLocal(KVStore):
    """The 'local' kvstore (alias 'local_allreduce_cpu'): values live and are summed on
    the CPU, and the optimizer, when set, runs there.

    >>> kv = mx.kv.create('local')
    >>> kv.init('w', mx.nd.zeros((2,)))
    >>> kv.push('w', [mx.nd.ones((2,), ctx=mx.cpu(0)), mx.nd.ones((2,), ctx=mx.cpu(1))])
    >>> kv.pull('w', out=[a0, a1])             # both become [2, 2]
    """

    def __init__(self, name="local"):
        super().__init__(name)
        self._store = {}         # key -> NDArray: the value `pull` returns
        self._merge_buf = {}     # key -> NDArray: where pushes are summed for the updater

    def _merge_context(self, key, values):
        """The device where the values pushed for `key` are summed."""
        return cpu()

    def _home_context(self, value):
        """The device that holds a freshly initialized value."""
        return cpu()

    def init(self, key, value):
        for k, values in self._grouped(key, value, "init", decides=True):
            if k in self._store:
                raise KVStoreError(f"init of key {k!r}: the key is already initialized; a key "
                                   "is initialized once, then changed with push")
            if len(values) != 1:
                raise KVStoreError(f"init of key {k!r}: expected one value, got {len(values)}; "
                                   "initialize with one array and pull to copy it to devices")
            with pause():
                self._store[k] = values[0].copyto(self._home_context(values[0]))

    def push(self, key, value, priority=0):
        with pause():
            for k, values in self._grouped(key, value, "push"):
                self._push_one(k, values)

    def _push_one(self, key, values):
        stored = self._stored(key, values, "push to")
        ctx = self._merge_context(key, values)
        if stored.context != ctx:
            stored = self._store[key] = stored.copyto(ctx)
        if stored.stype != "default" or any(v.stype != "default" for v in values):
            self._push_sparse(key, values, stored, ctx)
            return
        if self._updater is None:
            sum_into(values, stored)
            return
        merged = self._merge_buf.get(key)
        if merged is None or merged.context != ctx:
            merged = self._merge_buf[key] = zeros(stored.shape, ctx=ctx, dtype=stored.dtype)
        sum_into(values, merged)
        self._updater(key, merged, stored)

    def _push_sparse(self, key, values, stored, ctx):
        """A push where the key or a value is sparse: the updater gets the sum in the
        values' storage type (row_sparse when all are: its lazy update touches only those
        rows); without one the sum, in the key's storage type, becomes the value."""
        merged = sum_values(values, ctx)
        if self._updater is not None:
            self._updater(key, merged, stored)
        elif merged.stype == stored.stype:
            self._store[key] = merged
        else:
            self._store[key] = merged.tostype(stored.stype)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        if out is None:
            raise KVStoreError("pull needs out=: the array (or list of arrays, one per "
                               "device) to copy the value into")
        with pause():
            for k, outs in self._grouped(key, out, "pull"):
                stored = self._stored(k, outs, "pull from")
                for arr in outs:
                    if arr.stype == "default":
                        arr[...] = stored if stored.stype == "default" else \
                            stored.tostype("default")
                    elif not ignore_sparse:
                        _check_sparse_pull(k, arr)
                        stored.copyto(arr)        # converted into out's storage type

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        with pause():
            for k, pairs in group_row_sparse_pull(key, out, row_ids):
                self._check_key_kind([k], "row_sparse_pull")
                outs = [o for o, _ in pairs]
                stored = self._stored(k, outs, "row_sparse_pull from", dtype=False)
                check_row_sparse_outs(k, outs)
                for arr, ids in pairs:              # rows are cast into out's dtype
                    rows = row_ids_of(k, ids, stored.shape[0])
                    arr[:] = gather_rows(stored, rows, arr.context, arr.dtype)

    def set_gradient_compression(self, compression_params):
        super().set_gradient_compression(compression_params)
        if self._compression["type"] != "none":
            raise KVStoreError(
                f"gradient compression {self._compression['type']!r} is not supported by the "
                f"{self._type!r} kvstore: it compresses the messages between machines of a "
                "dist_* kvstore, and an in-process store sends none; drop compression_params")

    def _stored(self, key, arrays, where, dtype=True):
        """The stored value of `key`, checked against the layout of `arrays`."""
        stored = self._store.get(key)
        if stored is None:
            raise KVStoreError(f"{where} key {key!r}: the key has not been initialized; call "
                               f"kv.init({key!r}, value) first")
        check_same_layout(where, key, arrays, stored, dtype)
        return stored


class KVStoreDevice(KVStoreLocal):
    """The 'device' kvstore (alias 'local_allreduce_device'): the values of a key are
    summed on one of the devices that push it, and the optimizer, when set, runs there.

    Each key is assigned, on its first push, to the pushing device that holds the fewest
    elements so far, spreading the work over the devices as MXNet does.
    """

    def __init__(self, name="device"):
        super().__init__(name)
        self._key_ctx = {}       # key -> the device where it is summed
        self._load = {}          # device -> number of elements of the keys it sums

    def _home_context(self, value):
        return value.context

    def _merge_context(self, key, values):
        ctx = self._key_ctx.get(key)
        if ctx is None:
            candidates = list(dict.fromkeys(v.context for v in values))
            ctx = min(candidates, key=lambda c: self._load.get(c, 0))
            self._load[ctx] = self._load.get(ctx, 0) + values[0].size
            self._key_ctx[key] = ctx
        return ctx


def _check_sparse_pull(key, out):
    if not is_row_sparse(out):
        raise KVStoreError(f"pull from key {key!r}: cannot pull into a {out.stype} array; "
                           "pull into a dense or row_sparse array")
