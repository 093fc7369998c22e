"""Replicated servers (MINIGLUON_PS_REPLICAS=1, replica.py) on real clusters: 2 servers,
2 workers, a split key, whole keys and a row_sparse key, SGD with momentum on the
servers, a new learning rate half way. With replicas
the job's values equal, bit for bit, those of the same job without, and the copy that each
server's replica holds equals the primary's: read with real PULL messages sent to the
replica server (docs/replicas.md). Failover after a SIGKILL is in
tests/tools/test_replicas.py."""
import subprocess
import sys

import pytest

from minigluon import config
from minigluon.config import ConfigError
from test_dist_cluster import base_env, run_job

WORKER = """
from minigluon.kvstore.postoffice import server_name
from minigluon.kvstore.replica import replica_of
from minigluon.kvstore.wire import Cmd, Message

MODE = {mode!r}
kv = mx.kv.create(MODE)
shapes = {{3: (3,), 5: (40, 50), 8: (7,), 9: (5, 5)}}      # key 5: 2000 > the bound, split
for k, shape in shapes.items():
    kv.init(k, nd.arange(int(np.prod(shape))).reshape(shape) / 100.0)
ROWS = 11                       # a row_sparse key of 30 rows of 4
kv.init(ROWS, nd.sparse.row_sparse_array((np.ones((2, 4), np.float32), [3, 17]),
                                         shape=(30, 4)))
kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, rescale_grad=0.5))
outs = {{k: nd.zeros(s) for k, s in shapes.items()}}
for t in range(1, 7):
    if t == 4:                  # the copy's optimizer takes the new rate too
        kv.barrier()
        kv.set_learning_rate(0.05)
    for k, shape in shapes.items():
        grad = nd.ones(shape) * np.sin(t * (kv.rank + 1) * (k + 1))
        kv.push(k, grad)
        kv.pull(k, out=outs[k])
    touched = sorted({{(t * 7 + kv.rank) % 30, (t * 3) % 30}})
    kv.push(ROWS, nd.sparse.row_sparse_array(
        (np.full((len(touched), 4), t + kv.rank, np.float32), touched), shape=(30, 4)))
kv.barrier()                    # dist_async: every push applied by now
for k in shapes:
    kv.pull(k, out=outs[k])
rows_out = nd.sparse.zeros('row_sparse', (30, 4))
kv.row_sparse_pull(ROWS, out=rows_out, row_ids=nd.arange(30))
outs[ROWS] = rows_out.tostype('default')
shapes[ROWS] = (30, 4)


def copy_of(k):
    # the copy of key k that each part's replica server holds, by a real PULL to it
    info = kv._keys[k]
    flat, reqs = np.empty(info.size, np.float32), []
    for server, off, n in info.parts:
        msg = Message(Cmd.PULL, key=k, store=kv._store, flags=kv._flags, dtype=info.dtype,
                      shape=info.shape, version=info.pushes, offset=off, length=n)
        fill = lambda m, off=off, n=n: flat.__setitem__(slice(off, off + n), m.array())
        reqs.append(kv._van.request(server_name(replica_of(server, kv.num_servers)), msg,
                                    "the replica's copy", on_reply=fill))
    kv._van.wait(reqs)
    return flat.reshape(info.shape)


copies = {{k: copy_of(k) for k in shapes}} if {check_copies} else {{}}
report(rank=kv.rank, parts=len(kv._keys[5].parts),
       values={{k: o.asnumpy().tolist() for k, o in outs.items()}},
       copies_equal={{k: bool((c == outs[k].asnumpy()).all()) for k, c in copies.items()}})
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["dist_sync", "dist_async"])
def test_replicas_keep_values_bit_identical_and_the_copy_equals_the_primary(tmp_path, mode):
    env = {"MXNET_KVSTORE_BIGARRAY_BOUND": "1000"}
    copied, outputs = run_job(tmp_path, WORKER.format(mode=mode, check_copies=True),
                              workers=2, servers=2, env=dict(env, MINIGLUON_PS_REPLICAS="1"))
    assert all(r["parts"] == 2 for r in copied)
    for res in copied:
        assert all(res["copies_equal"].values()), res["copies_equal"]
        assert len(res["copies_equal"]) == 5
    if mode == "dist_sync":          # the same rounds, the same sums, the same updates
        plain, _ = run_job(tmp_path, WORKER.format(mode=mode, check_copies=False), workers=2,
                           servers=2, env=env)
        for ours, theirs in zip(sorted(copied, key=lambda r: r["rank"]),
                                sorted(plain, key=lambda r: r["rank"])):
            assert ours["values"] == theirs["values"]
    else:                            # every push applied once, in some order
        assert copied[0]["values"] == copied[1]["values"]


@pytest.mark.parametrize("value, message", [("2", "must be 0 or 1, got 2"),
                                            ("one", "must be an integer, got 'one'")])
def test_bad_replica_counts_are_refused_naming_the_variable(monkeypatch, value, message):
    monkeypatch.setenv("MINIGLUON_PS_REPLICAS", value)
    with pytest.raises(ConfigError, match="MINIGLUON_PS_REPLICAS " + message):
        config.ps_replicas()


def test_one_server_cannot_keep_a_replica():
    env = base_env({"DMLC_ROLE": "server", "DMLC_PS_ROOT_URI": "127.0.0.1",
                    "DMLC_PS_ROOT_PORT": "9092", "DMLC_NUM_SERVER": "1",
                    "DMLC_NUM_WORKER": "1", "MINIGLUON_PS_REPLICAS": "1"})
    proc = subprocess.run([sys.executable, "-c", "import minigluon"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "MINIGLUON_PS_REPLICAS=1 needs at least 2 servers, got DMLC_NUM_SERVER=1" in \
        proc.stderr
