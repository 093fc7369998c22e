"""The Updater: keeps one optimizer state per parameter index, and checkpoints them.

`updater(index, grad, weight)` creates the state on first use and applies the optimizer.
`get_states()` returns bytes holding every state (multi-precision master copies included)
and the optimizer's update counts, so `set_states()` resumes training bit for bit. States
are saved as host NumPy arrays (a sparse state as its stype, shape and components, so it
comes back sparse) and return to each weight's device on its next update.

The bytes are a pickle: load only checkpoints you trust.
"""
import pickle

import numpy as np

from ..base import MXNetError
from ..context import cpu
from ..ndarray import NDArray
from ..ndarray import sparse as nd_sparse

__all__ = ["Updater", "get_updater", "STATE_CLASSES"]

_FORMAT = "minigluon.optimizer.Updater/1"


class _HostArray:
    """A state array saved on the host; it becomes an NDArray again when loaded. `data` is
    a NumPy array, or for a sparse state `(stype, shape, components)` with the components
    in the order of its constructor: (data, indices) or (data, indices, indptr)."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data

    def __getstate__(self):
        return self.data

    def __setstate__(self, data):
        self.data = data


# The classes of this module that get_states() pickles (besides the optimizer's own and
# NumPy's): a restricted unpickler of states (kvstore/safe_pickle.py) must allow them.
STATE_CLASSES = (_HostArray,)


class Updater:
    """Apply an optimizer to parameters by index, creating their states on first use.

    >>> updater = mx.optimizer.get_updater(mx.optimizer.Adam())
    >>> updater(0, grad, weight)                 # weight changes in place
    >>> blob = updater.get_states()
    >>> updater.set_states(blob)                 # back to the same states and counts
    """

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.states = {}
        self.states_synced = {}
        self.aggregate_updates = False

    def __call__(self, index, grad, weight):
        """Update `weight` (or each weight of a list) in place from `grad`."""
        if isinstance(index, (list, tuple)):
            indices, grads, weights = list(index), list(grad), list(weight)
        else:
            indices, grads, weights = [index], [grad], [weight]
        if weights:
            self.optimizer._set_current_context(weights[0].context.device_id)
        for idx, g, w in zip(indices, grads, weights):
            idx = idx.decode() if isinstance(idx, bytes) else idx
            self._prepare_state(idx, w)
            self.optimizer.update_multi_precision(idx, w, g, self.states[idx])

    def _prepare_state(self, index, weight):
        if index not in self.states:
            self.states[index] = self.optimizer.create_state_multi_precision(index, weight)
            self.states_synced[index] = True
        elif not self.states_synced.get(index, False):
            self.states[index] = self.sync_state_context(self.states[index], weight.context)
            self.states_synced[index] = True

    def sync_state_context(self, state, context):
        """`state` (an NDArray, or a tuple/list of them) moved onto `context`."""
        if isinstance(state, NDArray):
            return state.as_in_context(context)
        if isinstance(state, (tuple, list)):
            return type(state)(self.sync_state_context(s, context) for s in state)
        return state

    def get_states(self, dump_optimizer=False):
        """Every state and the update counts as bytes; with `dump_optimizer`, the optimizer
        too (its hyperparameters and lr_scheduler, not its param_dict)."""
        opt = self.optimizer
        payload = {
            "format": _FORMAT,
            "states": {i: _to_host(s) for i, s in self.states.items()},
            "update_counts": opt.update_counts(),
            "num_update": opt.num_update,
            "optimizer": opt if dump_optimizer else None,
        }
        return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)

    def set_states(self, states):
        """Restore what `get_states` saved; states move to each weight's device on use."""
        payload = pickle.loads(states)
        if not (isinstance(payload, dict) and payload.get("format") == _FORMAT):
            raise MXNetError("set_states: these bytes are not minigluon Updater states "
                             f"(expected format {_FORMAT!r}); pass what get_states returned")
        if payload["optimizer"] is not None:
            payload["optimizer"].param_dict = self.optimizer.param_dict
            self.optimizer = payload["optimizer"]
        else:
            self.optimizer.set_update_counts(payload["update_counts"], payload["num_update"])
        self.states = {i: _from_host(s) for i, s in payload["states"].items()}
        self.states_synced = dict.fromkeys(self.states, False)


def get_updater(optimizer):
    """An Updater for `optimizer` (MXNet's kvstore-style updater closure)."""
    return Updater(optimizer)


def _to_host(state):
    if isinstance(state, nd_sparse.BaseSparseNDArray):
        parts = (state.data, state.indices) + ((state.indptr,) if state.stype == "csr" else ())
        return _HostArray((state.stype, state.shape, tuple(p.asnumpy() for p in parts)))
    if isinstance(state, NDArray):
        return _HostArray(state.asnumpy())
    if isinstance(state, (tuple, list)):
        return type(state)(_to_host(s) for s in state)
    return state


def _from_host(state):
    if isinstance(state, _HostArray) and isinstance(state.data, tuple):
        stype, shape, parts = state.data
        make = nd_sparse.row_sparse_array if stype == "row_sparse" else nd_sparse.csr_matrix
        return make(tuple(np.array(p, copy=True) for p in parts), shape=shape, ctx=cpu())
    if isinstance(state, _HostArray):
        return NDArray(np.array(state.data, copy=True), cpu())
    if isinstance(state, (tuple, list)):
        return type(state)(_from_host(s) for s in state)
    return state
