"""Learning-rate changes on a dist kvstore: `trainer.set_learning_rate` (and
`kv.set_learning_rate`) reach the servers' optimizer between steps and keep its momenta, so
a cluster whose rate changes gives exactly the parameters of single-process training with
the same schedule; an lr_scheduler's refusal comes back from the servers; a duplicate
SET_LR is answered from the cache, never applied again."""
import subprocess
import sys
import textwrap

import numpy as np

from minigluon.kvstore.resender import DuplicateFilter
from minigluon.kvstore.wire import Cmd, Message

from test_dist_cluster import DEADLINE, PREAMBLE, _dump, _result, base_env, run_job

SCHEDULE = """
STEPS, BATCH = 6, 8
kv = mx.kv.create('dist_sync')
W, r = kv.num_workers, kv.rank
ctxs = [mx.cpu(0), mx.cpu(1)]

def make_net(ctx):
    mx.random.seed(0)
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(16, in_units=8, activation='relu'), gluon.nn.Dense(4, in_units=16))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    return net

def batch(t):
    rng = np.random.RandomState(100 + t)
    return (rng.randn(BATCH, 8).astype(np.float32),
            rng.randint(0, 4, BATCH).astype(np.float32))

def new_rate(trainer, t):
    # before the first step (the optimizer is not on the servers yet), then the d2l way
    if t == 0:
        trainer.set_learning_rate(0.2)
    elif t in (2, 4):
        trainer.set_learning_rate(trainer.learning_rate * 0.5)

loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
opt = {'learning_rate': 0.4, 'momentum': 0.9, 'wd': 1e-3}
nets = {u: make_net([mx.cpu(0)]) for u in (True, False)}     # the worker's share of each batch
trainers = {u: gluon.Trainer(nets[u].collect_params(), 'sgd', opt, kvstore=mx.kv.create(
    'dist_sync'), update_on_kvstore=u) for u in (True, False)}
ref = make_net(ctxs)                          # one process: device i computes worker i's share
ref_trainer = gluon.Trainer(ref.collect_params(), 'sgd', opt, kvstore=None)
share = BATCH // W
for t in range(STEPS):
    x, y = batch(t)
    for u in (True, False):
        new_rate(trainers[u], t)
        with autograd.record():
            loss = loss_fn(nets[u](nd.array(x[r * share:(r + 1) * share])),
                           nd.array(y[r * share:(r + 1) * share]))
        loss.backward()
        trainers[u].step(BATCH)
    new_rate(ref_trainer, t)
    xs, ys = gluon.utils.split_and_load(x, ctxs), gluon.utils.split_and_load(y, ctxs)
    with autograd.record():
        losses = [loss_fn(ref(a), b) for a, b in zip(xs, ys)]
    autograd.backward(losses)
    ref_trainer.step(BATCH)
    assert trainers[True].learning_rate == ref_trainer.learning_rate, t
same = {}
for u in (True, False):
    mine = [p.data().asnumpy() for p in nets[u].collect_params().values()]
    want = [p.data(mx.cpu(0)).asnumpy() for p in ref.collect_params().values()]
    same[str(u)] = all((a == b).all() for a, b in zip(mine, want))
report(rank=r, same=same, lr=trainers[True].learning_rate)
"""


def test_lr_schedule_on_a_cluster_gives_the_single_process_parameters(tmp_path):
    # the first weight (128 floats) is split over both servers; every message is tagged
    env = {"MXNET_KVSTORE_BIGARRAY_BOUND": "100", "PS_VERBOSE": "1",
           "MINIGLUON_PS_SECRET": "lr-test-secret-0123456789"}
    results, outputs = run_job(tmp_path, SCHEDULE, workers=2, servers=2, env=env)
    assert sorted(r["rank"] for r in results) == [0, 1]
    for res in results:        # update_on_kvstore True and False: bit for bit
        assert res["same"] == {"True": True, "False": True}, _dump(outputs)
        assert res["lr"] == 0.2 * 0.5 * 0.5
    for server in ("server0", "server1"):      # the first trainer's store is store 1
        log = outputs[server][2]
        assert "learning rate of store 1 set to 0.1\n" in log, log    # 0.2 went with the
        assert "learning rate of store 1 set to 0.05\n" in log, log   # optimizer itself
        assert "learning rate of store 2" not in log   # update_on_kvstore=False: no change


REPRO = """
def step(net, trainer, x=1.0):
    with autograd.record():
        loss = net(nd.array([[x]])).sum()
    loss.backward()
    trainer.step(1)
    return float(net.weight.data().asnumpy()[0, 0])

def one_weight(**opt):
    net = gluon.nn.Dense(1, use_bias=False, in_units=1)
    net.initialize(mx.init.One())
    trainer = gluon.Trainer(net.collect_params(), 'sgd', dict({'learning_rate': 1.0}, **opt),
                            kvstore=mx.kv.create('dist_sync'))
    return net, trainer

def error_of(call, *args):
    try:
        call(*args)
    except mx.base.MXNetError as err:
        return f"{type(err).__name__}: {err}"
    return None

out = {}
net, tr = one_weight()                       # the repro: 1 - 1.0 * 1, then - 0.1 * 1
out['weights'] = [step(net, tr)]
tr.set_learning_rate(0.1)
out['weights'].append(step(net, tr))
out['lr'] = tr.learning_rate
tr.save_states('s.states')                   # the servers' optimizer comes back with 0.1
tr.set_learning_rate(0.05)
tr.load_states('s.states')
out['loaded_lr'] = tr.learning_rate
out['weights'].append(step(net, tr))         # -0.1 - 0.1 * 1: the servers use 0.1 again

net, tr = one_weight(momentum=0.5)           # before the first step, with momentum kept
tr.set_learning_rate(0.5)
out['early'] = [step(net, tr)]               # 1 - 0.5
tr.set_learning_rate(0.25)
out['early'].append(step(net, tr))           # mom = 0.5 * -0.5 - 0.25 = -0.5: 0.5 - 0.5

sched = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
net, tr = one_weight(lr_scheduler=sched)
out['sched_lr'] = [tr.learning_rate]
out['sched_w'] = [step(net, tr) for _ in range(4)]    # rates 1, 1, 0.5, 0.5 on the server
out['sched_lr'].append(tr.learning_rate)             # as in MXNet: the last update's
out['scheduler'] = error_of(tr.set_learning_rate, 0.1)

kv = mx.kv.create('dist_sync')
out['no_optimizer'] = error_of(kv.set_learning_rate, 0.1)
kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.3))
out['negative'] = error_of(kv.set_learning_rate, -1.0)
out['not_a_number'] = error_of(kv.set_learning_rate, 'fast')
kv.set_learning_rate(0.03)
out['kv_lr'] = kv.optimizer.learning_rate
report(**out)
"""


def test_one_worker_repro_and_errors(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text(PREAMBLE + textwrap.dedent(REPRO))
    proc = subprocess.run([sys.executable, str(script)], env=base_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=DEADLINE)
    assert proc.returncode == 0, proc.stderr
    out = _result(proc.stdout)
    assert out["weights"][:2] == [0.0, float(np.float32(-0.1))], out
    assert abs(out["weights"][2] - -0.2) < 1e-6, out
    assert out["lr"] == 0.1 and out["loaded_lr"] == 0.1
    assert out["early"] == [0.5, 0.0], out
    # the worker's learning_rate follows the servers' schedule (it stayed 1.0 before)
    assert out["sched_w"] == [0.0, -1.0, -1.5, -2.0] and out["sched_lr"] == [1.0, 0.5], out
    assert out["scheduler"].startswith("KVStoreError: server 0: set_learning_rate: SGD: the "
                                       "learning rate comes from its lr_scheduler; change the "
                                       "scheduler"), out["scheduler"]
    assert "call set_optimizer(optimizer) first" in out["no_optimizer"]
    assert "server 0: set_learning_rate: SGD: learning_rate must be a number >= 0, got -1.0" \
        in out["negative"]
    assert out["not_a_number"] == ("KVStoreError: set_learning_rate: the rate must be a "
                                   "number, got 'fast'")
    assert out["kv_lr"] == 0.03


def test_a_duplicate_set_lr_is_answered_from_the_cache():
    dup = DuplicateFilter()
    assert dup.classify(b"w", 1, Cmd.SET_LR) == "new"
    dup.answered(b"w", 1, [b"ack-1"])
    assert dup.classify(b"w", 1, Cmd.SET_LR) == ("cached", [b"ack-1"])   # not applied again
    msg = Message(Cmd.SET_LR, payload=[np.float64(0.25).tobytes()])
    assert Message.decode(msg.encode()).body() == np.float64(0.25).tobytes()
