"""2-bit gradient compression on a real cluster matches a NumPy reference of MXNet's rule
(quantize with the residual kept on each worker, dequantize and sum on the servers)
exactly, for small and split big keys, float32 and float16."""
import pytest

from clusterkit import assert_buckets_change_nothing, buckets_on_and_off
from test_dist_cluster import run_job

TWO_BIT = """
T = 0.5
kv = mx.kv.create('dist_sync')
W, r = kv.num_workers, kv.rank
kv.set_gradient_compression({'type': '2bit', 'threshold': T})
SPECS = {3: ((3, 5), np.float32), 'big': ((101,), np.float32), 'h': ((37,), np.float16),
         'hbig': ((9, 9), np.float16)}
KEYS = list(SPECS)
kv.init(KEYS, [nd.zeros(s, dtype=d) for s, d in SPECS.values()])

def grad(key, rank, t):
    shape, dtype = SPECS[key]
    rng = np.random.RandomState(7 * t + 100 * rank + sum(map(ord, str(key))))
    return rng.uniform(-1, 1, shape).astype(dtype)

def quantize(g, residual):
    # MXNet's rule in NumPy: r += g; r >= T sends +T, r <= -T sends -T, else 0
    residual += g.astype(residual.dtype)
    sent = np.where(residual >= T, T, np.where(residual <= -T, -T, 0)).astype(residual.dtype)
    residual -= sent
    return sent

residuals = {(k, w): np.zeros(SPECS[k][0], np.float32 if SPECS[k][1] == np.float16
                              else SPECS[k][1]) for k in KEYS for w in range(W)}
outs = [nd.zeros(s, dtype=d) for s, d in SPECS.values()]
for t in range(4):
    kv.push(KEYS, [[nd.array(grad(k, r, t), dtype=SPECS[k][1], ctx=mx.cpu(0))] for k in KEYS])
    kv.pull(KEYS, out=outs)
    for k, out in zip(KEYS, outs):
        want = sum(quantize(grad(k, w, t), residuals[(k, w)]) for w in range(W))
        got = out.asnumpy()
        assert got.dtype == SPECS[k][1]
        np.testing.assert_array_equal(got, want.astype(SPECS[k][1]), err_msg=f'{k} {t}')
        assert set(np.unique(got)) <= {T * i for i in range(-W, W + 1)}
    # the worker keeps the same residual as the reference
    for k in KEYS:
        mine = kv._compressor.residual(k, np.zeros(1, SPECS[k][1]))
        np.testing.assert_array_equal(mine.reshape(SPECS[k][0]), residuals[(k, r)])
report(rank=r, ok=True)
"""


@pytest.mark.parametrize("workers, servers", [(2, 2)])
def test_two_bit_matches_numpy_reference(tmp_path, workers, servers):
    results, _ = run_job(tmp_path, TWO_BIT, workers, servers,
                         env={"MXNET_KVSTORE_BIGARRAY_BOUND": "40"})
    assert all(r["ok"] for r in results)


TRAINER = """
kv = mx.kv.create('dist_sync')
net = gluon.nn.Dense(4, in_units=6)
net.initialize(mx.init.One())
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 1.0}, kvstore=kv,
                        compression_params={'type': '2bit', 'threshold': 0.25})
x = nd.ones((2, 6)) * 0.1
for _ in range(3):
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    trainer.step(1)
w = net.weight.data().asnumpy()
# gradient 0.2 per element and worker: the residual reaches 0.25 at steps 2 and 3
report(w=sorted(set(w.ravel().tolist())))
"""


@pytest.mark.parametrize("on_kvstore", [True, False])
def test_trainer_with_compression_params(tmp_path, on_kvstore):
    # updates on the workers: each pulls the round as the workers' codes, then updates
    code = TRAINER.replace("kvstore=kv,", f"kvstore=kv, update_on_kvstore={on_kvstore},")
    results, _ = run_job(tmp_path, code, workers=2, servers=1)
    assert results[0]["w"] == results[1]["w"] == [1.0 - 2 * 2 * 0.25]


CODES_BACK = """
kv = mx.kv.create('dist_sync')
kv.set_gradient_compression({'type': '2bit', 'threshold': 0.5})
n = 100000
kv.init(['g', 'w'], [nd.zeros((n,)), nd.zeros((n,))])

def pulled(key):
    out = nd.zeros((n,))
    before = kv.wire_bytes()['received']
    kv.pull(key, out=out)
    return kv.wire_bytes()['received'] - before, sorted(set(out.asnumpy().tolist()))

kv.push('g', nd.full((n,), kv.rank + 1.0))      # 1.0 and 2.0: each sends +0.5
g = pulled('g')
kv.set_optimizer(mx.optimizer.SGD(learning_rate=1.0, rescale_grad=1.0))
kv.push('w', nd.full((n,), kv.rank + 1.0))
w = pulled('w')
report(g=g, w=w)
"""


def test_a_merged_round_comes_back_as_codes_and_weights_as_floats(tmp_path):
    # over the socket (no shared memory): the merged sum of 2 workers' codes travels as
    # their codes, 2 x n/16 words; weights updated on the server travel as n floats
    results, _ = run_job(tmp_path, CODES_BACK, workers=2, servers=1,
                         env={"MINIGLUON_KVSTORE_SHM": "0"})
    n = 100000
    for res in results:
        (g_bytes, g_values), (w_bytes, w_values) = res["g"], res["w"]
        assert g_values == [1.0] and w_values == [-1.0]
        assert 2 * n // 4 <= g_bytes < 2 * n // 4 + 1000, g_bytes
        assert 4 * n <= w_bytes < 4 * n + 1000, w_bytes


def test_two_bit_codes_in_buckets_give_the_weights_of_pushes_alone(tmp_path):
    # 2-bit codes ride in buckets: a bucket's codes are those each key would send alone
    code = buckets_on_and_off(steps=3, compression={"type": "2bit", "threshold": 0.01})
    results, _ = run_job(tmp_path, code, workers=2, servers=2)
    assert_buckets_change_nothing(results, steps=3)
