"""gluon.Trainer on real clusters: dist_sync training gives the parameters of
single-process training on the same global batches (update_on_kvstore True and False),
dist_async converges, and optimizer states saved from one cluster continue training
exactly in a fresh one."""
import pickle

import numpy as np
import pytest

from test_dist_cluster import run_job

LENET = """
from minigluon.gluon.model_zoo import vision
import hashlib

STEPS, BATCH = 3, 8
kv = mx.kv.create('dist_sync')
W, r = kv.num_workers, kv.rank
ctxs = [mx.cpu(0), mx.cpu(1)]

def make_net(ctx):
    mx.random.seed(0)
    net = vision.lenet(classes=10)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net(nd.zeros((2, 1, 28, 28), ctx=ctx[0]))         # shapes of the deferred parameters
    return net

def batch(t):
    rng = np.random.RandomState(100 + t)
    return (rng.randn(BATCH, 1, 28, 28).astype(np.float32),
            rng.randint(0, 10, BATCH).astype(np.float32))

loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
opt = globals().get('OPT', {'learning_rate': 0.1, 'momentum': 0.9, 'wd': 1e-3})
OPT_NAME = globals().get('OPT_NAME', 'sgd')

net = make_net(ctxs)
trainer = gluon.Trainer(net.collect_params(), OPT_NAME, opt, kvstore=kv,
                        update_on_kvstore=UPDATE_ON_KVSTORE)
ref = make_net([mx.cpu(0)])
ref_trainer = gluon.Trainer(ref.collect_params(), OPT_NAME, opt, kvstore=None)
for t in range(STEPS):
    x, y = batch(t)
    share = BATCH // W
    xs = gluon.utils.split_and_load(x[r * share:(r + 1) * share], ctxs)
    ys = gluon.utils.split_and_load(y[r * share:(r + 1) * share], ctxs)
    with autograd.record():
        losses = [loss_fn(net(a), b) for a, b in zip(xs, ys)]
    for loss in losses:
        loss.backward()
    trainer.step(BATCH)                 # rescale by the global batch
    with autograd.record():
        ref_loss = loss_fn(ref(nd.array(x)), nd.array(y))
    ref_loss.backward()
    ref_trainer.step(BATCH)
digest = hashlib.sha256()
worst = 0.0
for (name, p), q in zip(net.collect_params().items(), ref.collect_params().values()):
    mine = [d.asnumpy() for d in p.list_data()]
    assert all((m == mine[0]).all() for m in mine), name      # devices agree
    np.testing.assert_allclose(mine[0], q.data().asnumpy(), rtol=1e-4, atol=1e-5,
                               err_msg=name)
    worst = max(worst, float(np.abs(mine[0] - q.data().asnumpy()).max()))
    digest.update(mine[0].tobytes())
report(rank=r, digest=digest.hexdigest(), worst=worst)
"""


@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_dist_sync_lenet_matches_single_process(tmp_path, update_on_kvstore):
    code = f"UPDATE_ON_KVSTORE = {update_on_kvstore}\n" + LENET
    results, _ = run_job(tmp_path, code, workers=2, servers=2,
                         env={"MXNET_KVSTORE_BIGARRAY_BOUND": "5000"})
    assert results[0]["digest"] == results[1]["digest"]      # every worker holds the same


@pytest.mark.parametrize("name", ["lamb", "lars"])
def test_layerwise_optimizers_run_on_the_workers_when_servers_hold_slices(tmp_path, name):
    """LeNet's big weights are split over the 2 servers (bound 5000): LAMB and LARS need
    whole weights, so the workers run them (the servers only sum) and the result is
    single-process training's; asking the servers to run them is a clear error."""
    code = (f"UPDATE_ON_KVSTORE = None\nOPT_NAME = {name!r}\n"
            f"OPT = {{'learning_rate': 0.05, 'wd': 1e-3}}\n" + LENET +
            "assert trainer._update_on_kvstore is False\n")
    results, _ = run_job(tmp_path, code, workers=2, servers=2,
                         env={"MXNET_KVSTORE_BIGARRAY_BOUND": "5000"})
    assert results[0]["digest"] == results[1]["digest"]
    refused = (f"UPDATE_ON_KVSTORE = True\nOPT_NAME = {name!r}\nOPT = {{}}\n" +
               LENET.split("for t in range(STEPS):")[0] +
               "try:\n    trainer.step(BATCH)\nexcept mx.MXNetError as err:\n"
               "    report(rank=r, error=str(err))\n")
    (tmp_path / "refused").mkdir()
    results, _ = run_job(tmp_path / "refused", refused, workers=1, servers=2,
                         env={"MXNET_KVSTORE_BIGARRAY_BOUND": "5000"})
    assert "needs each parameter whole" in results[0]["error"]
    assert "update_on_kvstore=False" in results[0]["error"]


ASYNC = """
kv = mx.kv.create('dist_async')
r = kv.rank
rng = np.random.RandomState(0)
w_true = rng.randn(1, 8).astype(np.float32)
data_rng = np.random.RandomState(10 + r)            # each worker its own data
mx.random.seed(0)
net = gluon.nn.Dense(1, in_units=8)
net.initialize(mx.init.Zero())
trainer = gluon.Trainer(net.collect_params(), OPT_NAME, OPT, kvstore=kv)
loss_fn = gluon.loss.L2Loss()
losses = []
for t in range(60):
    x = data_rng.randn(16, 8).astype(np.float32)
    y = x @ w_true.T
    with autograd.record():
        loss = loss_fn(net(nd.array(x)), nd.array(y))
    loss.backward()
    trainer.step(16)
    losses.append(float(loss.mean().asscalar()))
kv.barrier()
kv.pull([i for i, p in enumerate(trainer._params) if p is net.weight][0],
        out=net.weight.data())    # the servers' latest weight
report(rank=r, first=losses[0], last=float(np.mean(losses[-5:])),
       err=float(np.abs(net.weight.data().asnumpy() - w_true).max()))
"""


@pytest.mark.parametrize("name,params", [
    ("sgd", {"learning_rate": 0.1}),
    ("dcasgd", {"learning_rate": 0.1, "momentum": 0.5}),      # delay-compensated, on servers
])
def test_dist_async_converges(tmp_path, name, params):
    code = f"OPT_NAME, OPT = {name!r}, {params!r}\n" + ASYNC
    results, _ = run_job(tmp_path, code, workers=2, servers=2)
    for res in results:
        assert res["last"] < res["first"] / 100, res
        assert res["err"] < 0.05, res


RESUME = """
from minigluon.gluon.model_zoo import vision
import os
DIR, PHASE, K = {dir!r}, {phase!r}, 2
kv = mx.kv.create('dist_sync')
W, r = kv.num_workers, kv.rank
mx.random.seed(0)
net = vision.mlp(classes=10, hidden=(64, 32))
net.initialize(mx.init.Xavier())
net(nd.zeros((1, 50)))
if PHASE == 'resume':
    net.load_parameters(os.path.join(DIR, 'params_k'))
trainer = gluon.Trainer(net.collect_params(), 'adam', {{'learning_rate': 0.01}}, kvstore=kv)
if PHASE == 'resume':
    trainer.load_states(os.path.join(DIR, 'states_k'))
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

def step(t):
    rng = np.random.RandomState(1000 + 10 * t + r)
    x, y = rng.randn(4, 50).astype(np.float32), rng.randint(0, 10, 4).astype(np.float32)
    with autograd.record():
        loss = loss_fn(net(nd.array(x)), nd.array(y))
    loss.backward()
    trainer.step(4 * W)

steps = range(K) if PHASE == 'first' else range(K, 2 * K)
for t in steps:
    step(t)
    if PHASE == 'first' and t == K - 1:
        if r == 0:
            trainer.save_states(os.path.join(DIR, 'states_k'))
            net.save_parameters(os.path.join(DIR, 'params_k'))
        kv.barrier()
if PHASE == 'first':
    for t in range(K, 2 * K):
        step(t)
name = 'params_straight' if PHASE == 'first' else 'params_resumed'
if r == 0:
    net.save_parameters(os.path.join(DIR, name))
report(rank=r)
"""


def test_optimizer_states_saved_then_loaded_into_a_fresh_cluster_continue_exactly(tmp_path):
    env = {"MXNET_KVSTORE_BIGARRAY_BOUND": "1000"}    # the 50x64 weight is split over servers
    for phase in ("first", "resume"):
        run_dir = tmp_path / phase
        run_dir.mkdir()
        run_job(run_dir, RESUME.format(dir=str(tmp_path), phase=phase), workers=2,
                servers=2, env=env)
    import minigluon as mx
    straight = mx.nd.load(str(tmp_path / "params_straight"))
    resumed = mx.nd.load(str(tmp_path / "params_resumed"))
    assert straight.keys() == resumed.keys()
    for name in straight:
        np.testing.assert_array_equal(straight[name].asnumpy(), resumed[name].asnumpy(),
                                      err_msg=name)
    # the file is plain Updater states of whole keys (slices joined), loadable anywhere
    updater = mx.optimizer.get_updater(mx.optimizer.Adam())
    updater.set_states((tmp_path / "states_k").read_bytes())
    assert isinstance(updater.optimizer, mx.optimizer.Adam)
    shapes = [v.shape for v in straight.values()]
    assert sorted(s[0].shape for s in updater.states.values()) == sorted(shapes)
    assert pickle.loads((tmp_path / "states_k").read_bytes())["num_update"] == 2


TWO_TRAINERS = """
kv_types = ['dist_sync', 'dist_sync']
W, nets, refs, trainers, ref_trainers = None, [], [], [], []
for lr in (1.0, 0.25):                      # two models, like a GAN's G and D
    mx.random.seed(1)
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize(mx.init.Uniform(), force_reinit=True)
    ref = gluon.nn.Dense(3, in_units=4)
    ref.initialize(mx.init.Uniform())
    for p, q in zip(net.collect_params().values(), ref.collect_params().values()):
        q.set_data(p.data())
    trainers.append(gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': lr,
                                  'momentum': 0.5}, kvstore='dist_sync'))
    ref_trainers.append(gluon.Trainer(ref.collect_params(), 'sgd', {'learning_rate': lr,
                                      'momentum': 0.5}, kvstore=None))
    nets.append(net)
    refs.append(ref)
kv = trainers[0]._kvstore if trainers[0]._kvstore else None
for t in range(3):
    rng = np.random.RandomState(t)
    x = rng.randn(4, 4).astype(np.float32)
    for net, ref, tr, rtr in zip(nets, refs, trainers, ref_trainers):
        with autograd.record():
            loss = (net(nd.array(x)) ** 2).sum()
        loss.backward()
        tr.step(4)
        with autograd.record():
            ref_loss = (ref(nd.array(x)) ** 2).sum()
        ref_loss.backward()
        # every worker pushes the same batch: the servers sum W equal gradients
        rtr.step(4 / trainers[0]._kvstore.num_workers)
for net, ref in zip(nets, refs):
    for p, q in zip(net.collect_params().values(), ref.collect_params().values()):
        np.testing.assert_allclose(p.data().asnumpy(), q.data().asnumpy(), rtol=1e-5,
                                   atol=1e-6)
assert trainers[0]._kvstore is not trainers[1]._kvstore
report(ok=True)
"""


def test_two_trainers_in_one_job_keep_their_own_keys_and_optimizers(tmp_path):
    results, _ = run_job(tmp_path, TWO_TRAINERS, workers=2, servers=2)
    assert all(r["ok"] for r in results)
