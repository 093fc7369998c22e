"""kvstore modes: what each name `mx.kv.create` takes means, as one small object per mode.

A mode says whether the store is distributed, whether its pushes are synchronous, where a
worker sums its devices' values, and what that means for the Trainer. `kv.create`, the
distributed worker (dist.py), the server and gluon.Trainer read these fields and never
test the name, so adding a mode is one line in `MODES`.

>>> mode_of("dist_async_device").on_device
True
>>> mode_of("dist_async").store_must_update      # async servers apply every push
True
"""
from dataclasses import dataclass

from .wire import Flag

__all__ = ["Mode", "MODES", "mode_of", "from_wire"]

_LARGE_PARAM = 1024 * 1024 * 16


@dataclass(frozen=True, slots=True)
class Mode:
    """One kvstore mode.

    name: the name `kv.create` takes (and `kv.type` returns).
    distributed: a parameter server over processes (dist.py), else an in-process store
        (local.py).
    on_device: a push's per-device values are summed on a device, not on the host.
    sync: every push of a round is merged before a pull of that round is answered; an
        asynchronous (dist_async) server applies each push on arrival.
    device_updates_above: the Trainer updates on the devices by default (instead of in
        the store) when a parameter has more elements than this; None: never.
    """
    name: str
    distributed: bool
    on_device: bool
    sync: bool = True
    device_updates_above: int = None

    @property
    def store_must_update(self):
        """The optimizer can run only in the store (servers that apply each push on
        arrival): update_on_kvstore=False is an error for the Trainer."""
        return self.distributed and not self.sync

    @property
    def wire_flags(self):
        """The header flags that carry this mode to the servers."""
        return Flag.SYNC if self.sync else Flag.NONE


# the order is that of the error message for an unknown name
MODES = {m.name: m for m in (
    Mode("local", distributed=False, on_device=False, device_updates_above=_LARGE_PARAM),
    Mode("local_allreduce_cpu", distributed=False, on_device=False),
    Mode("device", distributed=False, on_device=True),
    Mode("local_allreduce_device", distributed=False, on_device=True),
    Mode("dist", distributed=True, on_device=False),
    Mode("dist_sync", distributed=True, on_device=False),
    Mode("dist_async", distributed=True, on_device=False, sync=False),
    Mode("dist_sync_device", distributed=True, on_device=True),
    Mode("dist_async_device", distributed=True, on_device=True, sync=False),
)}


_SYNC, _ASYNC = MODES["dist_sync"], MODES["dist_async"]


def mode_of(name):
    """The mode called `name`. A name outside the table (a store class built directly
    with another name, or a Trainer given an unknown name, which kv.create then refuses)
    reads as MXNet reads it: 'dist' in it means distributed, 'async' asynchronous."""
    mode = MODES.get(name)
    if mode is not None:
        return mode
    return Mode(name, distributed="dist" in name, on_device=name.endswith("_device"),
                sync="async" not in name)


def from_wire(flags):
    """The mode a server serves a request in, from its header flags (servers know only
    sync or async; a '_device' worker sums on its devices before it sends)."""
    return _SYNC if flags & Flag.SYNC else _ASYNC
