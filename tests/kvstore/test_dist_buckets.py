"""Buckets on real jobs: several small keys of one server pushed as one PUSH_MANY and
pulled with one PULL_MANY give exactly what separate pushes and pulls give (sums without
an optimizer, bit-identical weights with one), every key counting its own rounds; a bad
bucket (a key never initialized, a wrong shape, a key twice) is refused whole with an
error naming the key, and the server goes on serving. And push_nowait, the overlap's
push that does not wait for a zero-copy send."""
from clusterkit import assert_buckets_change_nothing, buckets_on_and_off
from test_dist_cluster import run_job

ROUND_TRIP = """
kv = mx.kv.create('dist_sync')
W, r = kv.num_workers, kv.rank
SPECS = {0: ((3, 4), np.float32), 1: ((5,), np.float64), 2: ((2, 2, 2), np.float32),
         3: ((7,), np.float32), 4: ((1,), np.float32), 5: ((6, 3), np.float64)}
KEYS = list(SPECS)
CTXS = [mx.cpu(0), mx.cpu(1)]
plain = mx.kv.create('dist_sync')                # store 1: the same keys, key by key

def grad(key, rank, t, part):
    shape, dtype = SPECS[key]
    rng = np.random.RandomState(1000 * t + 10 * rank + part + 7 * key)
    return rng.standard_normal(shape).astype(dtype)

def by_server(store):
    groups = {}
    for k in KEYS:
        groups.setdefault(store.bucket_server(k, 1 << 20), []).append(k)
    return groups

for store in (kv, plain):
    store.init(KEYS, [nd.array(np.ones(SPECS[k][0]), dtype=SPECS[k][1]) for k in KEYS])
groups = by_server(kv)
assert None not in groups and len(groups) == min(2, kv.num_servers), groups
sums = {}
for t in (1, 2, 3):
    outs = {k: [nd.zeros(SPECS[k][0], dtype=SPECS[k][1], ctx=c) for c in CTXS] for k in KEYS}
    laters = []
    for server, keys in groups.items():
        kv.push_bucket([(k, [nd.array(grad(k, r, t, p), dtype=SPECS[k][1], ctx=c)
                             for p, c in enumerate(CTXS)]) for k in keys])
        laters += kv.pull_bucket_later([(k, outs[k]) for k in keys])
    for later in laters:
        later.wait()
    for k in KEYS:                               # the same round, key by key
        plain.push(k, [nd.array(grad(k, r, t, p), dtype=SPECS[k][1], ctx=c)
                       for p, c in enumerate(CTXS)])
        alone = nd.zeros(SPECS[k][0], dtype=SPECS[k][1])
        plain.pull(k, out=alone)
        want = sum(grad(k, w, t, 0) + grad(k, w, t, 1) for w in range(W))
        np.testing.assert_allclose(outs[k][0].asnumpy(), want, rtol=1e-5)
        assert (outs[k][0].asnumpy() == alone.asnumpy()).all(), (t, k)   # bit-identical
        assert (outs[k][1].asnumpy() == alone.asnumpy()).all(), (t, k)
    sums[t] = float(sum(outs[k][0].asnumpy().sum() for k in KEYS))
# a bucket mixed with one-key calls: a key's rounds go on from either
kv.push(3, nd.ones((7,)))
out = nd.zeros((7,))
kv.pull_bucket_later([(3, out)])[0].wait()
assert (out.asnumpy() == W).all()
report(rank=r, groups={str(s): ks for s, ks in groups.items()}, sums=sums)
"""


def test_bucketed_pushes_and_pulls_equal_key_by_key_ones(tmp_path):
    results, _ = run_job(tmp_path, ROUND_TRIP, workers=2, servers=2)
    assert results[0]["sums"] == results[1]["sums"]
    assert sorted(k for ks in results[0]["groups"].values() for k in ks) == list(range(6))


def test_trainer_parameters_are_bit_identical_with_buckets_on_and_off(tmp_path):
    results, _ = run_job(tmp_path, buckets_on_and_off(steps=4), workers=2, servers=2)
    assert_buckets_change_nothing(results, steps=4)
    for res in results:
        # per step one bucket per server, sent from backward (once every parameter is
        # final), not left to step
        assert {when for _, when in res["on"][1]} == {"backward"}, res["on"][1]


BAD = """
kv = mx.kv.create('dist_sync')
from minigluon.kvstore.wire import Cmd, Message
from minigluon.kvstore.postoffice import server_name
kv.init([0, 1], [nd.ones((4,)), nd.ones((2, 3))])
van = kv._van

def send(cmd, entries):
    # a hand-made bucket to server 0 (the worker's own calls check their keys first)
    parts = [Message(cmd, key=k, dtype=np.float32, shape=shape, version=v, offset=0,
                     length=int(np.prod(shape)),
                     payload=[np.ones(int(np.prod(shape)), np.float32)] if cmd == Cmd.PUSH
                     else []) for k, shape, v in entries]
    msg = Message.bucket_of(parts, store=kv._store, flags=kv._flags)
    req = van.request(server_name(0), msg, 'a bad bucket')
    try:
        van.wait([req])
    except mx.kv.KVStoreError as err:
        return str(err)
    return None

errors = {
    'unknown': send(Cmd.PUSH, [(0, (4,), 1), (9, (4,), 1)]),
    'shape': send(Cmd.PUSH, [(0, (4,), 1), (1, (3, 2), 1)]),
    'pull_unknown': send(Cmd.PULL, [(0, (4,), 0), (9, (4,), 0)]),
}
try:
    kv.push_bucket([(0, nd.ones((4,))), (0, nd.ones((4,)))])
except mx.kv.KVStoreError as err:
    errors['twice_local'] = str(err)
twice = Message.bucket_of([Message(Cmd.PULL, key=0, dtype=np.float32, shape=(4,),
                                   length=4)] * 2, store=kv._store, flags=kv._flags)
try:
    van.wait([van.request(server_name(0), twice, 'a key twice')])
except mx.kv.KVStoreError as err:
    errors['twice'] = str(err)
# nothing of the refused buckets was taken: round 1 of key 0 is this push's alone
kv.push_bucket([(0, nd.full((4,), 3)), (1, nd.full((2, 3), 2))])
a, b = nd.zeros((4,)), nd.zeros((2, 3))
for later in kv.pull_bucket_later([(0, a), (1, b)]):
    later.wait()
# push_nowait: a big value goes zero-copy (no shared memory here), wait() says when the
# array may change again
kv.init(2, nd.zeros((100000,)))
big = nd.full((100000,), 7)
sent = kv.push_nowait(2, big)
sent.wait()
sent.wait()                          # a second wait does nothing
big[:] = -1
kv.pull(2, out=big)
report(errors=errors, a=a.asnumpy().tolist(), b=b.asnumpy().tolist(),
       big=float(big.asnumpy().min()), big_max=float(big.asnumpy().max()))
"""


def test_a_bad_bucket_is_refused_whole_with_a_clear_error_and_the_server_goes_on(
        tmp_path):
    results, _ = run_job(tmp_path, BAD, workers=1, servers=1,
                         env={"MINIGLUON_KVSTORE_SHM": "0"})
    errors = results[0]["errors"]
    assert "push to key 9: the key has not been initialized" in errors["unknown"]
    assert "kv.init(9, value)" in errors["unknown"]
    assert "push to key 1: shape (3, 2)" in errors["shape"]
    assert "does not match the initialized shape (2, 3)" in errors["shape"]
    assert "pull from key 9: the key has not been initialized" in errors["pull_unknown"]
    assert "a key appears twice" in errors["twice"]
    assert "bucket of keys [0, 0]" in errors["twice_local"]
    assert results[0]["a"] == [3.0] * 4                  # round 1 is the good push only
    assert results[0]["b"] == [[2.0] * 3] * 2
    assert results[0]["big"] == results[0]["big_max"] == 7.0
