"""Lossy real clusters (PS_DROP_MSG): with PS_RESEND=1 dist_sync training ends with exactly
the parameters of a lossless run, rendezvous, barriers and finalize included (and with
MINIGLUON_PS_SECRET, so resent messages keep valid tags); without it a lost message is a
TimeoutError within the deadline, not a hang."""
import re

from test_dist_cluster import _dump, run_job

TRAIN = """
from minigluon.gluon.model_zoo import vision
import hashlib
try:
    kv = mx.kv.create('dist_sync')
    r, W = kv.rank, kv.num_workers
    mx.random.seed(0)
    net = vision.mlp(classes=10, hidden=(64, 32))
    net.initialize(mx.init.Xavier())
    net(nd.zeros((1, 50)))
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': 0.1, 'momentum': 0.9}, kvstore=kv,
                            update_on_kvstore=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for t in range(STEPS):
        if t == 2:
            trainer.set_learning_rate(0.05)        # SET_LR is resent and deduplicated too
        rng = np.random.RandomState(100 * t + r)
        x, y = nd.array(rng.randn(8, 50)), nd.array(rng.randint(0, 10, 8))
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(8 * W)
        if t % 2:
            kv.barrier()
    digest = hashlib.sha256()
    for p in net.collect_params().values():
        digest.update(p.data().asnumpy().tobytes())
    report(rank=r, digest=digest.hexdigest())
except (mx.kv.TimeoutError, mx.kv.JobAbortedError) as err:
    report(error=f'{type(err).__name__}: {err}')
"""
# big keys split over both servers; the first dense weight (3200 floats) takes shm
COMMON = {"MXNET_KVSTORE_BIGARRAY_BOUND": "1000"}
# with seed 1 no rendezvous message is lost: the run without resend fails while training
LOSSY = {"PS_DROP_MSG": "10", "PS_DROP_SEED": "1", "PS_VERBOSE": "1"}
SECRET = "resend-test-secret-0123456789"


def test_lossy_training_with_resend_gives_the_lossless_parameters(tmp_path):
    code = "STEPS = 4\n" + TRAIN
    clean, _ = run_job(tmp_path, code, workers=2, servers=2, env=COMMON)
    lossy, outputs = run_job(tmp_path, code, workers=2, servers=2, env=dict(
        COMMON, PS_RESEND="1", PS_RESEND_TIMEOUT="100", MINIGLUON_PS_SECRET=SECRET, **LOSSY))
    assert all("digest" in r for r in clean + lossy), (clean, lossy)
    assert {r["digest"] for r in clean} == {r["digest"] for r in lossy}, _dump(outputs)
    assert len({r["digest"] for r in lossy}) == 1
    dropped = {name: int(m.group(1)) for name, (_, _, err) in outputs.items()
               for m in [re.search(r"dropped (\d+) of \d+ requests", err)] if m}
    assert set(dropped) == {"scheduler", "server0", "server1", "worker0", "worker1"}, dropped
    assert sum(dropped.values()) >= 10, dropped        # messages were lost and recovered


def test_lossy_training_without_resend_times_out_and_every_process_exits(tmp_path):
    code = "STEPS = 30\n" + TRAIN
    env = dict(COMMON, MINIGLUON_KVSTORE_TIMEOUT="2", PS_HEARTBEAT_INTERVAL="0.2",
               PS_HEARTBEAT_TIMEOUT="4", **LOSSY)      # the deadline ends waits first
    outputs = run_job(tmp_path, code, workers=2, servers=1, env=env, deadline=40,
                      expect_fail=True)
    results = [r for r in (_result_of(outputs[f"worker{w}"]) for w in range(2)) if r]
    errors = [r["error"] for r in results if "error" in r]
    assert errors, _dump(outputs)
    timeouts = [e for e in errors if e.startswith("TimeoutError")]
    assert timeouts, errors
    assert re.search(r"no reply from (scheduler|server 0) \(tcp://127\.0\.0\.1:\d+|ipc://",
                     timeouts[0]), timeouts
    assert "within 2 s" in timeouts[0]


def _result_of(output):
    from test_dist_cluster import _result
    return _result(output[1])
