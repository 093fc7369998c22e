"""Values pulled from real dist_sync / dist_async clusters equal the exact expected sums.

dist_sync and dist_async in every (W, S) of (1,1), (2,1), (2,2), (3,2); the *_device
modes on two simulated GPUs per worker in (2,2) only: they differ from their plain modes
on the worker alone (the devices' parts are reduced on gpu(0) before the push, and the
pulled value, split keys' slices assembled, goes back to both devices), while the servers'
and the network's path, which the other sizes vary, is the plain mode's. Keys small and
big (MXNET_KVSTORE_BIGARRAY_BOUND is 40 here, so big keys are split over the servers, in
slices that do not divide evenly), float32 and float16, int and str keys, two devices per
worker. Values are small integers, so every sum is exact in float16 and float32 and
equality is exact. Parts of 64 KiB and more travel through shared memory, except with
MINIGLUON_KVSTORE_SHM=0 (zmq frames).

dist_sync without an optimizer: a pull returns the sum of the round's pushes of all
workers. dist_async needs an optimizer: SGD(learning_rate=1) makes the stored value
init - sum(every push so far), whatever the order the pushes arrive in.
"""
import pytest

from test_dist_cluster import run_job

SUMS = """
W, r = kv.num_workers, kv.rank
sync = 'async' not in kv.type
# *_device modes reduce on the devices: simulated GPUs (MINIGLUON_SIMULATED_GPUS=2) there
CTXS = [mx.gpu(0), mx.gpu(1)] if kv.type.endswith('_device') else [mx.cpu(0), mx.cpu(1)]
SPECS = {3: ((2, 3), np.float32), 'big': ((10, 9), np.float32), 'odd': ((7, 7), np.float32),
         'h': ((5,), np.float16), 'hbig': ((61,), np.float16), 11: ((41,), np.float32),
         'large': ((250, 281), np.float32), 12: ((70001,), np.float16)}
KEYS = list(SPECS)

def ints(key, seed):
    shape, dtype = SPECS[key]
    rng = np.random.RandomState(seed + sum(map(ord, str(key))))
    return rng.randint(-8, 9, size=shape).astype(dtype)

def pushed(key, rank, t):
    # what worker `rank` pushes for key in round t, as its two devices' parts
    a = ints(key, 1000 * t + rank)
    b = np.full(a.shape, t, dtype=a.dtype)
    return a, b

# every worker offers its own init values; worker 0's must win
kv.init(KEYS, [nd.array(ints(k, 100 + r), dtype=SPECS[k][1]) for k in KEYS])
outs = {k: [nd.zeros(SPECS[k][0], dtype=SPECS[k][1], ctx=c) for c in CTXS] for k in KEYS}
kv.pull(KEYS, out=[outs[k] for k in KEYS])
for k in KEYS:
    for o in outs[k]:
        np.testing.assert_array_equal(o.asnumpy(), ints(k, 100), err_msg=f'init {k}')
if not sync:
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=1.0))
total = {k: np.zeros(SPECS[k][0], np.float64) for k in KEYS}
for t in (1, 2, 3):
    values = []
    for k in KEYS:
        a, b = pushed(k, r, t)
        values.append([nd.array(a, ctx=CTXS[0], dtype=a.dtype),
                       nd.array(b, ctx=CTXS[1], dtype=b.dtype)])
    if t == 3:               # one key at a time, one device, pushpull
        for k, (v0, v1) in zip(KEYS, values):
            kv.pushpull(k, v0 + v1.as_in_context(CTXS[0]))
    else:
        kv.push(KEYS, values)
    round_sum = {k: sum(sum(p.astype(np.float64) for p in pushed(k, w, t)) for w in range(W))
                 for k in KEYS}
    if not sync:
        kv.barrier()         # every worker's pushes of round t are in
    kv.pull(KEYS, out=[outs[k] for k in KEYS])
    for k in KEYS:
        total[k] += round_sum[k]
        want = round_sum[k] if sync else ints(k, 100) - total[k]
        for o, c in zip(outs[k], CTXS):
            assert o.dtype == SPECS[k][1] and o.context == c
            np.testing.assert_array_equal(o.asnumpy(), want.astype(SPECS[k][1]),
                                          err_msg=f'key {k!r} round {t}')
    if not sync:
        kv.barrier()         # nobody pushes round t+1 before everyone pulled round t
import os
assert all(kv._node.shm) == (os.environ.get('MINIGLUON_KVSTORE_SHM') != '0')
assert bool(kv._node.segments) == all(kv._node.shm)      # big parts went through it
report(rank=r, ok=True)
"""


@pytest.mark.parametrize("workers, servers, shm", [(1, 1, "1"), (2, 1, "0"), (2, 2, "1"),
                                                   (3, 2, "1")])
@pytest.mark.parametrize("mode", ["dist_sync", "dist_async"])
def test_pulled_values_are_exact_sums(tmp_path, mode, workers, servers, shm):
    code = f"kv = mx.kv.create({mode!r})\n" + SUMS
    results, _ = run_job(tmp_path, code, workers, servers,
                         env={"MXNET_KVSTORE_BIGARRAY_BOUND": "40",
                              "MINIGLUON_KVSTORE_SHM": shm})
    assert sorted(r["rank"] for r in results) == list(range(workers))
    assert all(r["ok"] for r in results)


@pytest.mark.parametrize("workers, servers", [(2, 2)])      # 2 servers: split keys' slices
@pytest.mark.parametrize("mode", ["dist_sync_device", "dist_async_device"])
def test_device_modes_give_exact_sums_on_simulated_gpus(tmp_path, mode, workers, servers):
    code = f"kv = mx.kv.create({mode!r})\nassert kv.type == {mode!r}\n" + SUMS
    results, _ = run_job(tmp_path, code, workers, servers,
                         env={"MXNET_KVSTORE_BIGARRAY_BOUND": "40",
                              "MINIGLUON_SIMULATED_GPUS": "2"})
    assert sorted(r["rank"] for r in results) == list(range(workers))
    assert all(r["ok"] for r in results)


def test_dist_is_dist_sync(tmp_path):
    code = "kv = mx.kv.create('dist')\nassert kv.type == 'dist'\n" + SUMS
    results, _ = run_job(tmp_path, code, 2, 2, env={"MXNET_KVSTORE_BIGARRAY_BOUND": "40"})
    assert all(r["ok"] for r in results)
