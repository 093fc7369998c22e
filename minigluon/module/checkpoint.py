"""Checkpoint files of `mx.mod.Module`, named as MXNet names them.

`prefix-symbol.json` holds the graph, `prefix-EPOCH.params` (epoch as 4 digits) the
parameters under `arg:<name>` and `aux:<name>` keys, and `prefix-EPOCH.states` the
optimizer states as the updater dumps them.

>>> mx.mod.save_checkpoint('net', 3, sym, arg_params, aux_params)   # net-0003.params
>>> sym, arg_params, aux_params = mx.mod.load_checkpoint('net', 3)
"""
import os

from .. import ndarray as nd
from .. import symbol as sym_mod
from ..base import MXNetError

__all__ = ["save_checkpoint", "load_checkpoint", "params_file", "states_file"]


def params_file(prefix, epoch):
    """The parameters file of `epoch`: `prefix-0003.params`."""
    return f"{prefix}-{int(epoch):04d}.params"


def states_file(prefix, epoch):
    """The optimizer states file of `epoch`: `prefix-0003.states`."""
    return f"{prefix}-{int(epoch):04d}.states"


def save_checkpoint(prefix, epoch, symbol, arg_params, aux_params):
    """Write `prefix-symbol.json` (when `symbol` is given) and `prefix-EPOCH.params`."""
    if symbol is not None:
        symbol.save(f"{prefix}-symbol.json")
    arrays = {f"arg:{k}": v for k, v in arg_params.items()}
    arrays.update({f"aux:{k}": v for k, v in aux_params.items()})
    nd.save(params_file(prefix, epoch), arrays)


def load_checkpoint(prefix, epoch):
    """(symbol, arg_params, aux_params) from the files `save_checkpoint` wrote."""
    path = params_file(prefix, epoch)
    if not os.path.exists(path):
        raise MXNetError(f"load_checkpoint: no parameters file {path!r} for prefix "
                         f"{prefix!r}, epoch {epoch}; check the prefix and the epoch number")
    symbol = sym_mod.load(f"{prefix}-symbol.json")
    arg_params, aux_params = {}, {}
    for key, value in nd.load(path).items():
        kind, _, name = key.partition(":")
        if kind not in ("arg", "aux") or not name:
            raise MXNetError(f"load_checkpoint: {path!r} holds key {key!r}; expected "
                             "'arg:<name>' or 'aux:<name>' keys")
        (arg_params if kind == "arg" else aux_params)[name] = value
    return symbol, arg_params, aux_params
