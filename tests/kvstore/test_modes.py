"""The kvstore modes (modes.py): the table kv.create reads, and what each mode tells the
distributed worker, the server and the Trainer."""
import pytest

import minigluon as mx
from minigluon.kvstore.modes import MODES, from_wire, mode_of
from minigluon.kvstore.wire import Flag


def test_the_table_holds_every_name_kv_create_knows():
    assert list(MODES) == ["local", "local_allreduce_cpu", "device", "local_allreduce_device",
                           "dist", "dist_sync", "dist_async", "dist_sync_device",
                           "dist_async_device"]
    with pytest.raises(mx.kv.KVStoreError, match="known types: 'local', 'local_allreduce_cpu'"):
        mx.kv.create("nope")


@pytest.mark.parametrize("name", [n for n, m in MODES.items() if not m.distributed])
def test_in_process_modes_pick_their_store_class(name):
    kv = mx.kv.create(name.upper())
    want = mx.kv.KVStoreDevice if MODES[name].on_device else mx.kv.KVStoreLocal
    assert type(kv) is want and kv.type == name


def test_what_a_mode_means_for_the_worker_server_and_trainer():
    assert [n for n, m in MODES.items() if m.store_must_update] == ["dist_async",
                                                                   "dist_async_device"]
    assert MODES["dist"].wire_flags == Flag.SYNC and MODES["dist_async"].wire_flags == 0
    assert from_wire(Flag.SYNC | Flag.SHM).name == "dist_sync"
    assert from_wire(Flag.NONE).name == "dist_async"
    assert MODES["local"].device_updates_above == 1024 * 1024 * 16
    assert all(m.device_updates_above is None for n, m in MODES.items() if n != "local")


def test_a_name_outside_the_table_reads_as_mxnet_reads_it():
    assert mode_of("dist_sync") is MODES["dist_sync"]
    odd = mode_of("my_dist_async_device")
    assert (odd.distributed, odd.sync, odd.on_device) == (True, False, True)
    assert not mode_of("DIST_SYNC").distributed        # case matters, as in MXNet's test
