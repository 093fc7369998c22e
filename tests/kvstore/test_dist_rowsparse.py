"""row_sparse keys on real clusters (2 workers, 2 servers): pushes carry only the touched
rows of each server's row range, row_sparse_pull asks only for the rows it needs and gets
exactly them, the servers sum a round's rows and update only those rows, and bad rows get
clear errors while the servers go on serving exactly.

MXNET_KVSTORE_BIGARRAY_BOUND is 20, so 'emb' (9 x 4) is split by rows over both servers
(rows 0-3 and 4-8) and 'half' (10 x 3, float16) too; 'tiny' lives whole on one. Values are
small integers: every sum is exact and equality is exact.
"""
import numpy as np

from test_dist_cluster import run_job

ENV = {"MXNET_KVSTORE_BIGARRAY_BOUND": "20"}

COMMON = """
from minigluon.kvstore.wire import Cmd, Flag
W, r = kv.num_workers, kv.rank
SPECS = {'emb': ((9, 4), np.float32), 'half': ((10, 3), np.float16),
         'tiny': ((3, 2), np.float32)}

def touched(key, rank, t, dev):
    # the rows worker `rank`'s device `dev` touches in round t (sometimes none)
    rows = SPECS[key][0][0]
    rng = np.random.RandomState(100 * t + 10 * rank + dev + len(key))
    return np.unique(rng.randint(0, rows, size=rng.randint(0, 4)))

def grad(key, rank, t, dev):
    shape, dtype = SPECS[key]
    ids = touched(key, rank, t, dev)
    data = np.stack([np.full(shape[1:], 1 + rank + 2 * dev + int(i)) for i in ids]) \\
        if ids.size else np.zeros((0,) + shape[1:])
    return nd.sparse.row_sparse_array((data.astype(dtype), ids), shape=shape,
                                      ctx=mx.cpu(dev), dtype=dtype)

def dense(arr):
    return arr.asnumpy().astype(np.float64)

sent = []                   # (cmd, key, server, slice offset, row ids) of row messages
request = kv._van.request
def spy(peer, msg, what, **kw):
    if msg.flags & Flag.ROW_SPARSE and msg.cmd in (Cmd.PUSH, Cmd.PULL):
        ids = np.frombuffer(bytes(msg.payload[0]), np.int64).tolist()
        sent.append((msg.cmd, msg.key, peer, msg.offset, ids))
    return request(peer, msg, what, **kw)
kv._van.request = spy

def rows_sent(cmd, key):
    # {first row of the server's range: ids sent there, made absolute again}
    info = kv._keys[key]
    out = {}
    for c, k, _, off, ids in sent:
        if c == cmd and k == key:
            first = off // info.row
            out.setdefault(first, []).append([first + i for i in ids])
    return out
"""

EXACT = """
kv = mx.kv.create('dist_sync')
""" + COMMON + """
KEYS = list(SPECS)
kv.init(KEYS, [nd.zeros(SPECS[k][0], dtype=SPECS[k][1]).tostype('row_sparse') for k in KEYS])
kv.init('dense', nd.zeros((5, 2)))
assert [p[1:] for p in kv._keys['emb'].parts] == [(0, 16), (16, 20)]   # rows 0-3, 4-8
for t in (1, 2, 3):
    del sent[:]
    kv.push(KEYS, [[grad(k, r, t, 0), grad(k, r, t, 1)] for k in KEYS])
    kv.push('dense', nd.sparse.row_sparse_array(([[t, t]], [r]), shape=(5, 2)))
    # each server got exactly the touched rows of its range, re-based
    mine = np.union1d(touched('emb', r, t, 0), touched('emb', r, t, 1))
    got = rows_sent(Cmd.PUSH, 'emb')
    assert sorted(got) == [0, 4], got
    assert got[0] == [[i for i in mine if i < 4]] and got[4] == [[i for i in mine if i >= 4]]
    for k in KEYS:
        shape, dtype = SPECS[k]
        want = sum(dense(grad(k, w, t, d)) for w in range(W) for d in (0, 1))
        rng = np.random.RandomState(7 * t + r)
        asked = [nd.array(rng.randint(0, shape[0], size=5)), nd.array([], dtype='int64'),
                 nd.array(np.arange(shape[0]))]
        outs = [nd.sparse.zeros('row_sparse', shape, dtype=dtype, ctx=mx.cpu(i))
                for i in range(3)]
        del sent[:]
        kv.row_sparse_pull(k, out=outs, row_ids=asked)
        for out, ids, i in zip(outs, asked, range(3)):
            rows = np.unique(ids.asnumpy().astype(np.int64))
            assert out.stype == 'row_sparse' and out.context == mx.cpu(i)
            assert out.indices.asnumpy().tolist() == rows.tolist(), (k, out.indices, rows)
            expect = np.zeros(shape)
            expect[rows] = want[rows]
            np.testing.assert_array_equal(dense(out), expect, err_msg=f'{k} round {t}')
        if k == 'emb':      # a pull asks each server only for the wanted rows of its range
            asked_rows = sorted(i for ids in rows_sent(Cmd.PULL, 'emb').values()
                                for part in ids for i in part)
            wanted = [np.unique(a.asnumpy().astype(np.int64)).tolist() for a in asked]
            assert asked_rows == sorted(sum(wanted, [])), (asked_rows, wanted)
        whole = nd.zeros(shape, dtype=dtype)
        kv.pull(k, out=whole)
        np.testing.assert_array_equal(dense(whole), want)
    # row_sparse_pull from a dense key; one row-id array for two outs
    outs = [nd.sparse.zeros('row_sparse', (5, 2)) for _ in range(2)]
    kv.row_sparse_pull('dense', out=outs, row_ids=nd.array([1, 0, 1]))
    for out in outs:
        assert out.indices.asnumpy().tolist() == [0, 1]
        np.testing.assert_array_equal(out.asnumpy()[:2], [[t, t], [t, t]])
# pull skips row_sparse outs unless told, then fills them with the whole value
skipped = nd.sparse.zeros('row_sparse', (9, 4))
kv.pull('emb', out=skipped)
assert skipped.indices.asnumpy().size == 0
kv.pull('emb', out=skipped, ignore_sparse=False)
np.testing.assert_array_equal(dense(skipped), sum(dense(grad('emb', w, 3, d))
                                                  for w in range(W) for d in (0, 1)))
kv.barrier()
"""


INIT_ROWS = """
kv = mx.kv.create('dist_sync')          # a fresh store
# worker 0 initializes a big row_sparse key with 3 stored rows: only they (and their ids)
# go to the servers, never the dense table; every other row starts at zero
table = np.zeros((2000, 4), np.float32)
stored = [1, 1500, 1999]
table[stored] = np.arange(1, 13).reshape(3, 4)
before = kv.wire_bytes()
kv.init('big', nd.sparse.row_sparse_array((table[stored], stored), shape=(2000, 4)))
init_bytes = kv.wire_bytes()['sent'] - before['sent']
rows_bytes = 3 * (4 * 4 + 8)                   # values and int64 ids
HEADERS = 2 * 200                              # one INIT per server: header, ids frame
if r == 0:
    assert rows_bytes <= init_bytes < rows_bytes + HEADERS, init_bytes   # dense: 32000
else:
    assert init_bytes < HEADERS, init_bytes                           # INIT_WAITs only
out = nd.sparse.zeros('row_sparse', (2000, 4))
kv.row_sparse_pull('big', out=out, row_ids=nd.array(np.arange(2000), dtype='int64'))
np.testing.assert_array_equal(out.asnumpy(), table)
kv.barrier()
# a push of 2 rows and a pull of 3 move those rows' bytes and ids, plus headers
before = kv.wire_bytes()
kv.push('big', nd.sparse.row_sparse_array((np.ones((2, 4), np.float32), [5 + r, 1600]),
                                          shape=(2000, 4)))
kv.row_sparse_pull('big', out=out, row_ids=nd.array([5, 6, 1600], dtype='int64'))
now = kv.wire_bytes()
moved = now['sent'] - before['sent'] + now['received'] - before['received']
assert 2 * 24 + 3 * 24 <= moved < 2 * 24 + 3 * 24 + 6 * 200, moved
np.testing.assert_array_equal(out.asnumpy()[[5, 6, 1600]], [[1] * 4, [1] * 4, [2] * 4])
"""


ROWOPT = """
import minigluon as mx


@mx.optimizer.register
class HalveTouched(mx.optimizer.Optimizer):
    \"\"\"w[row] = w[row] / 2 - grad[row] on the rows the gradient stores, nothing else:
    a rule whose result tells which rows it was given.\"\"\"

    def create_state(self, index, weight):
        return None

    def update(self, index, weight, grad, state):
        assert grad.stype == 'row_sparse' and weight.stype == 'row_sparse', \\
            (grad.stype, weight.stype)
        if (grad.data.asnumpy() >= 99).any():
            raise ValueError('a gradient of 99 or more is refused by this test rule')
        ids = grad.indices.asnumpy()
        w = weight.asnumpy()
        w[ids] = w[ids] / 2 - grad.data.asnumpy()
        weight[:] = mx.nd.array(w, dtype=w.dtype).tostype('row_sparse')
"""

LAZY = """
import rowopt
kv = mx.kv.create(MODE)              # a store of its own, with the optimizer
kv.init('emb', (nd.ones((9, 4)) * 8).tostype('row_sparse'))
kv.set_optimizer(rowopt.HalveTouched())
before = np.full((9, 4), 8.0)
for t in (1, 2):
    kv.push('emb', [grad('emb', r, t, 0), grad('emb', r, t, 1)])
    if MODE == 'dist_async':
        kv._van.wait_all()     # the servers have our push (applied before the next request)
        kv.barrier()           # and everyone else's
    rows = [np.union1d(touched('emb', w, t, 0), touched('emb', w, t, 1)) for w in range(W)]
    parts = [dense(grad('emb', w, t, 0)) + dense(grad('emb', w, t, 1)) for w in range(W)]
    expect = before.copy()
    if MODE == 'dist_sync':    # one update with the round's sum, on the rows anyone touched
        union = np.union1d(rows[0], rows[1])
        expect[union] = before[union] / 2 - (parts[0] + parts[1])[union]
        check = np.arange(9)
    else:                      # one update per push, in any order: check the rows that
        for w in range(W):     # only one worker touched, and those nobody did
            expect[rows[w]] = before[rows[w]] / 2 - parts[w][rows[w]]
        check = np.setdiff1d(np.arange(9), np.intersect1d(rows[0], rows[1]))
    out = nd.sparse.zeros('row_sparse', (9, 4))
    kv.row_sparse_pull('emb', out=out, row_ids=nd.array(np.arange(9)))
    got = dense(out)
    np.testing.assert_array_equal(got[check], expect[check], err_msg=f'round {t}')
    untouched = np.setdiff1d(np.arange(9), np.union1d(rows[0], rows[1]))
    np.testing.assert_array_equal(got[untouched], before[untouched])   # not updated at all
    before = got
    kv.barrier()               # nobody pushes round t+1 before everyone pulled round t
if MODE == 'dist_sync':        # an update that fails ends its round: its pulls get the
    from minigluon.kvstore import KVStoreError          # error, and the job goes on
    kv.push('emb', nd.sparse.row_sparse_array(([[99.] * 4], [5]), shape=(9, 4)))
    out = nd.sparse.zeros('row_sparse', (9, 4))
    try:
        kv.row_sparse_pull('emb', out=out, row_ids=nd.array([5]))
    except KVStoreError as err:
        assert "the update of round 3 failed: ValueError: a gradient of 99" in str(err), err
    else:
        raise AssertionError('the failed update was not reported')
    kv.push('emb', nd.sparse.zeros('row_sparse', (9, 4)))      # round 4: no rows
    kv.row_sparse_pull('emb', out=out, row_ids=nd.array(np.arange(9)))
    np.testing.assert_array_equal(dense(out), before)          # round 3 changed nothing
"""


def _job(tmp_path, mode, code):
    (tmp_path / "rowopt.py").write_text(ROWOPT)
    env = dict(ENV, MINIGLUON_PS_SECRET="ab" * 32)     # the servers may import rowopt
    code = f"MODE = {mode!r}\n" + code + "report(rank=r, ok=True)\n"
    results, _ = run_job(tmp_path, code, workers=2, servers=2, env=env)
    assert sorted(r["rank"] for r in results) == [0, 1]
    assert all(r["ok"] for r in results)


def test_servers_update_each_push_on_its_rows_dist_async(tmp_path):
    _job(tmp_path, "dist_async", "kv = mx.kv.create(MODE)\n" + COMMON + LAZY)


BAD = """
from minigluon.base import ShapeError
from minigluon.kvstore import KVStoreError
from minigluon.kvstore.messages import RowIds
from minigluon.kvstore.postoffice import server_name
from minigluon.kvstore.wire import Message

def expect(exc, texts, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as err:
        for text in texts:
            assert text in str(err), f'{text!r} not in {str(err)!r}'
        return
    raise AssertionError(f'{fn} did not raise {exc.__name__}')

kv = mx.kv.create('dist_sync')         # a fresh store (the job's second)
kv.init('emb', nd.zeros((9, 4)).tostype('row_sparse'))
kv.init('dense', nd.zeros((10, 4)))     # split at element 20: a row boundary

def raw(cmd, key='emb', shape=(9, 4), part=1, ids=(1,), flags=Flag.ROW_SPARSE):
    # a hand-made request to the server of the key's part, as a buggy worker could send
    info = kv._keys[key]
    server, off, n = info.parts[part]
    ids = np.array(ids, np.int64)
    payload = [ids.tobytes()]
    if cmd == Cmd.PUSH:
        payload.append(np.ones(len(ids) * shape[1], np.float32))
    msg = Message(cmd, key=key, store=kv._store, flags=kv._flags | flags, dtype=np.float32,
                  shape=shape if key == 'emb' else info.shape, version=info.pushes + 1,
                  offset=off, length=n,
                  payload=payload)
    kv._van.wait([kv._van.request(server_name(server), msg, f'raw {cmd.name}')])

# worker-side checks, before anything is sent
expect(KVStoreError, ["row_sparse_pull of key 'emb': row ids [9]", "out of range",
                      "[0, 9)"], kv.row_sparse_pull, 'emb',
       out=nd.sparse.zeros('row_sparse', (9, 4)), row_ids=nd.array([2, 9]))
expect(KVStoreError, ["out must be a row_sparse array"], kv.row_sparse_pull, 'emb',
       out=nd.zeros((9, 4)), row_ids=nd.array([2]))
expect(ShapeError, ["push to key 'emb': shape (9, 5) does not match"], kv.push, 'emb',
       nd.sparse.zeros('row_sparse', (9, 5)))
ckv = mx.kv.create('dist_sync')
ckv.set_gradient_compression({'type': '2bit', 'threshold': 0.5})
ckv.init('c', nd.zeros((4, 2)).tostype('row_sparse'))
expect(KVStoreError, ["push to key 'c': 2-bit gradient compression does not apply to "
                      "row_sparse keys"], ckv.push, 'c', nd.sparse.zeros('row_sparse', (4, 2)))
# server-side checks: the servers answer with an error naming the key, and drop the push
if r == 1:
    expect(KVStoreError, ["push to key 'emb': row ids [5]", "outside this server's 5 rows"],
           raw, Cmd.PUSH, ids=(0, 5))
    expect(KVStoreError, ["push to key 'emb': shape (9, 8)",
                          "does not match the initialized row_sparse shape (9, 4)"],
           raw, Cmd.PUSH, shape=(9, 8), part=0, ids=(0,))
    expect(KVStoreError, ["push to key 'dense': a row_sparse push to a key initialized as "
                          "shape (10, 4)"], raw, Cmd.PUSH, key='dense', part=0, ids=(0,))
    expect(KVStoreError, ["pull from key 'dense': rows asked of a key initialized as shape "
                          "(10, 4)"], raw, Cmd.PULL, key='dense', part=1, ids=(0,))
    expect(KVStoreError, ["pull from key 'emb': row ids [7]"], raw, Cmd.PULL, ids=(2, 7))
    expect(KVStoreError, ["bad row ids", "not sorted and unique"], raw, Cmd.PULL,
           ids=(3, 1))
kv.barrier()
# the servers go on serving exactly: nothing of the refused pushes was merged
for t in (1, 2):
    kv.push('emb', nd.sparse.row_sparse_array(([[t] * 4], [2 + 4 * r]), shape=(9, 4)))
    out = nd.sparse.zeros('row_sparse', (9, 4))
    kv.row_sparse_pull('emb', out=out, row_ids=nd.array(np.arange(9)))
    want = np.zeros((9, 4))
    want[[2, 6]] = t
    np.testing.assert_array_equal(out.asnumpy(), want)
"""


def test_exact_rows_bad_rows_and_lazy_updates_dist_sync(tmp_path):
    """One job (cluster start-up is most of a test's time): exact sums and rows (EXACT),
    bad input on a second store after which the servers still serve exactly (BAD), and
    updates of the touched rows only, one of them failing, on a third store (LAZY); between
    them, the init of a row_sparse key and a step send only its stored or touched rows
    (INIT_ROWS, by the worker's byte counts)."""
    _job(tmp_path, "dist_sync", EXACT + INIT_ROWS + BAD + LAZY)


def test_states_of_row_sparse_keys_split_and_join_in_their_storage_type():
    """save/load_optimizer_states cut a whole-key state into the servers' row slices and
    join them back: a row_sparse state stays row_sparse, with each slice's 2-D shape."""
    from minigluon import nd
    from minigluon.kvstore.dist import _join_states, _split_state
    whole = np.zeros((9, 4), np.float32)
    whole[[1, 6]] = [[1, 2, 3, 4], [5, 6, 7, 8]]
    state = (nd.array(whole).tostype("row_sparse"), nd.array(whole), None)
    pieces = [_split_state(state, 0, 16, (4, 4)), _split_state(state, 16, 20, (5, 4))]
    assert [p[0].stype for p in pieces] == ["row_sparse"] * 2
    assert [p[1].stype for p in pieces] == ["default"] * 2
    assert pieces[1][0].shape == (5, 4) and pieces[1][0].indices.asnumpy().tolist() == [2]
    joined = _join_states(pieces, (9, 4))
    assert joined[0].stype == "row_sparse" and joined[1].stype == "default"
    assert joined[2] is None
    for arr in joined[:2]:
        np.testing.assert_array_equal(arr.asnumpy(), whole)
    flat = _split_state(state, 16, 20)                # a dense key's slice: flat
    assert flat[1].shape == (20,) and flat[0].stype == "default"
