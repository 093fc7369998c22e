"""Gradients pushed while backward runs (gluon/overlap.py) on real dist_sync jobs: the
parameters after a few LeNet steps (imperative and hybridized) are bit-identical with
overlap on and off, pushes really leave from backward (inside a hybridized graph's
backward too, last layer first), gradients that may still change are left to step, and what
overlap cannot take back is a clear OverlapError."""
import pytest

from test_dist_cluster import run_job

LENET = """
import hashlib
from minigluon.gluon.model_zoo import vision

STEPS, BATCH = 3, 8
ctxs = [mx.cpu(0), mx.cpu(1)]
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

def make(overlap, grad_req, hybridize):
    mx.random.seed(0)
    net = vision.lenet(classes=10)
    net.initialize(mx.init.Xavier(), ctx=ctxs)
    if hybridize:
        net.hybridize()
    net(nd.zeros((2, 1, 28, 28), ctx=ctxs[0]))
    net.collect_params().setattr('grad_req', grad_req)
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': 0.1, 'momentum': 0.9, 'wd': 1e-3},
                            kvstore='dist_sync', update_on_kvstore=UPDATE_ON_KVSTORE,
                            overlap=overlap)
    return net, trainer

def batch(t, part):
    rng = np.random.RandomState(100 + 10 * t + part)
    return (rng.randn(BATCH, 1, 28, 28).astype(np.float32),
            rng.randint(0, 10, BATCH).astype(np.float32))

def backward(net, x, y, retain):
    share = BATCH // W
    xs = gluon.utils.split_and_load(x[r * share:(r + 1) * share], ctxs)
    ys = gluon.utils.split_and_load(y[r * share:(r + 1) * share], ctxs)
    with autograd.record():
        losses = [loss_fn(net(a), b) for a, b in zip(xs, ys)]
    for loss in losses:                       # one backward per device
        loss.backward(retain_graph=retain)

def probe_first_layer(net, trainer, seen):
    # when the first layer's weight is final on the last device, how many parameters
    # were pushed already (inside a hybridized graph too: all the later layers')
    first = list(net.collect_params().values())[0]
    count = lambda: sum(trainer._overlap.pushed(i) for i in range(len(trainer._params)))
    autograd.register_post_accumulate_grad_hook(first.list_data()[-1],
                                                lambda v: seen.append(count()))

def train(overlap, how):
    net, trainer = make(overlap, 'add' if how == 'add' else 'write', how == 'hybrid')
    early, seen = 0, []
    for t in range(STEPS):
        if t == 1 and trainer._overlap is not None:   # the store exists from step 1
            probe_first_layer(net, trainer, seen)
        if t == STEPS - 1:
            del SENT[:]                       # the requests of the last step
        backward(net, *batch(t, 0), retain=(how == 'retain'))
        if how == 'add':                      # two micro-batches per step
            backward(net, *batch(t, 1), retain=False)
        if trainer._overlap is not None:
            early += sum(trainer._overlap.pushed(i) for i in range(len(trainer._params)))
        trainer.step(BATCH * (2 if how == 'add' else 1))
        if how == 'add':
            net.collect_params().zero_grad()
    digest = hashlib.sha256()
    for p in net.collect_params().values():
        values = [d.asnumpy() for d in p.list_data()]
        assert all((v == values[0]).all() for v in values), p.name
        digest.update(values[0].tobytes())
    return digest.hexdigest(), early, seen, sorted(set(SENT))

kv = mx.kv.create('dist_sync')
W, r = kv.num_workers, kv.rank
SENT, request = [], kv._van.request       # (command, asks for its value) of each request

def counted(peer, msg, *args, **kwargs):
    SENT.append((msg.cmd.name, bool(msg.flags & Flag.PULL)))
    return request(peer, msg, *args, **kwargs)

kv._van.request = counted                 # the one van of this worker: the Trainer's too
out = {}
for how in ('write', 'hybrid', 'add', 'retain'):
    for overlap in (True, False):
        out[f'{how}_{int(overlap)}'] = train(overlap, how)
report(rank=r, **out)
"""
ONE_REQUEST = [["PUSH", True], ["PUSH_MANY", True]]     # each push asks for its value

@pytest.mark.parametrize("update_on_kvstore,shm", [(True, "1"), (False, "1"), (True, "0")])
def test_overlap_on_and_off_give_bit_identical_lenets(tmp_path, update_on_kvstore, shm):
    code = (f"UPDATE_ON_KVSTORE = {update_on_kvstore}\n"
            "from minigluon.kvstore.wire import Flag\n" + LENET)
    results, _ = run_job(tmp_path, code, workers=2, servers=1,
                         env={"MINIGLUON_KVSTORE_SHM": shm})
    params = 8                                       # LeNet: 4 layers, weight and bias
    for res in results:
        for how in ("write", "hybrid", "add", "retain"):
            assert res[f"{how}_1"][0] == res[f"{how}_0"][0], (how, res)   # bit-identical
            assert res[f"{how}_0"][1] == 0
            assert res[f"{how}_0"][3] == [["PULL", False], ["PUSH", False]], res
        # early pushes ask for their values in the same request (Flag.PULL); through
        # shared memory (the big keys here) a key's push and pull are two requests
        assert res["write_1"][3] == res["hybrid_1"][3] == (
            ONE_REQUEST if shm == "0" else
            [["PULL", False], ["PUSH", False], ["PUSH_MANY", True]]), res
        # every push left early, from the second step on (the first creates the store)
        assert res["write_1"][1] == res["hybrid_1"][1] == 2 * params
        # the hybridized graph's backward pushed the later layers before the first one's
        # weight was final (its hook pushes it: 7 of 8), as operator by operator
        assert res["hybrid_1"][2] == res["write_1"][2] == [params - 1] * 2, res
        assert res["add_1"][1] == 0                  # accumulated: pushed by step
        assert res["retain_1"][1] == 0               # a retained graph: pushed by step
    assert results[0]["write_1"][0] == results[1]["write_1"][0]    # workers agree
    assert results[0]["hybrid_1"][0] == results[1]["hybrid_1"][0]


REFUSED = """
net = gluon.nn.Dense(3, in_units=4)
net.initialize(mx.init.One())
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1},
                        kvstore='dist_sync')
x = nd.ones((2, 4))

def backward():
    with autograd.record():
        loss = net(x).sum()
    loss.backward()

backward(); trainer.step(2)                 # the first step creates the store
errors = {}
backward()
try:
    backward()                              # a second backward rewrites pushed grads
except gluon.trainer.OverlapError as err:
    errors['twice'] = str(err)
trainer._overlap.end_round()                # (drop that round's bookkeeping)
trainer._wait_pulls()
backward()
try:
    trainer.set_learning_rate(0.05)         # the servers could apply it to this step or not
except gluon.trainer.OverlapError as err:
    errors['lr'] = str(err)
net.weight.grad()[:] *= 0.5                 # e.g. clipping, after the push
try:
    trainer.step(2)
except gluon.trainer.OverlapError as err:
    errors['changed'] = str(err)
report(**errors)
"""


def test_what_overlap_cannot_take_back_is_a_clear_error(tmp_path):
    results, _ = run_job(tmp_path, REFUSED, workers=1, servers=1)
    twice, changed = results[0]["twice"], results[0]["changed"]
    assert "second backward" in twice and "MINIGLUON_OVERLAP=0" in twice
    assert "dense0_weight" in changed and "changed between backward" in changed
    assert "allreduce_grads" in changed and "overlap=False" in changed
    assert "set_learning_rate() between backward and trainer.step()" in results[0]["lr"]
