"""gluon.Trainer: data parallelism over two devices (cpu or simulated gpu) with every kvstore
and update_on_kvstore mode matches single-device training step for step; model
parallelism matches too; optimizer states round-trip exactly; and the error messages."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon, nd
from minigluon.base import MXNetError
from minigluon.gluon import nn
from minigluon.gluon.trainer import StaleGradientError, _TRACKS_FRESHNESS
from minigluon.kvstore import KVStoreError

BATCH, STEPS = 8, 3
RTOL, ATOL = 1e-5, 1e-6
CPUS = [mx.cpu(0), mx.cpu(1)]


def _batches(steps=STEPS, seed=0):
    rng = np.random.RandomState(seed)
    return [(rng.rand(BATCH, 1, 16, 16).astype(np.float32), rng.randint(0, 10, BATCH))
            for _ in range(steps)]


def lenet():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(4, 3, activation="relu"), nn.MaxPool2D(2),
                nn.Conv2D(8, 3, activation="relu"), nn.MaxPool2D(2),
                nn.Flatten(), nn.Dense(16, activation="relu"), nn.Dense(10))
    return net


@pytest.fixture(scope="module")
def init_file(tmp_path_factory):
    """Initial LeNet parameters shared by every run, so runs start from the same point."""
    net = lenet()
    net.initialize(mx.init.Xavier())
    net(nd.zeros((1, 1, 16, 16)))
    fname = str(tmp_path_factory.mktemp("init") / "lenet.params")
    net.save_parameters(fname)
    return fname


def _net_on(ctxs, init_file, hybridize=False):
    net = lenet()
    net.load_parameters(init_file, ctx=ctxs)
    if hybridize:
        net.hybridize()
    return net


def _values(net, ctx=None):
    """Parameter values by structural name, as float64 NumPy arrays."""
    return {name: p.data(ctx).asnumpy().astype(np.float64)
            for name, p in net._collect_params_with_prefix().items()}


def _train_step(net, trainer, ctxs, data, label, loss_fn):
    xs = gluon.utils.split_and_load(data, ctxs)
    ys = gluon.utils.split_and_load(label, ctxs)
    with autograd.record():
        losses = [loss_fn(net(x), y) for x, y in zip(xs, ys)]
    for loss in losses:
        loss.backward()
    trainer.step(data.shape[0])


def _train(ctxs, init_file, kvstore="device", update_on_kvstore=None, optimizer="sgd",
           opt_params=None, hybridize=False, steps=STEPS):
    """Train a LeNet over `ctxs`; returns the net and its parameters after each step."""
    net = _net_on(ctxs, init_file, hybridize)
    params = opt_params or {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3}
    trainer = gluon.Trainer(net.collect_params(), optimizer, params, kvstore=kvstore,
                            update_on_kvstore=update_on_kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    history = []
    for data, label in _batches(steps):
        _train_step(net, trainer, ctxs, data, label, loss_fn)
        _check_copies_identical(net, ctxs)
        history.append(_values(net, ctxs[0]))
    return net, trainer, history


def _check_copies_identical(net, ctxs):
    for p in net.collect_params().values():
        first = p.data(ctxs[0]).asnumpy()
        for ctx in ctxs[1:]:
            np.testing.assert_array_equal(p.data(ctx).asnumpy(), first, err_msg=p.name)


def _assert_same_history(got, expected):
    assert len(got) == len(expected)
    for step, (g, e) in enumerate(zip(got, expected)):
        assert g.keys() == e.keys()
        for name in e:
            np.testing.assert_allclose(g[name], e[name], rtol=RTOL, atol=ATOL,
                                       err_msg=f"step {step}, {name}")


@pytest.fixture(scope="module")
def reference(init_file):
    """Single-device training on cpu(0): no kvstore is used for one device."""
    _, trainer, history = _train([mx.cpu(0)], init_file)
    assert trainer._kvstore is None
    return history


# ---- data parallelism ---------------------------------------------------------------------
@pytest.mark.parametrize("update_on_kvstore", [True, False])
@pytest.mark.parametrize("kvstore", ["local", "device"])
@pytest.mark.parametrize("device_kind", ["cpu", "gpu"])
def test_data_parallel_matches_single_device(device_kind, kvstore, update_on_kvstore,
                                             init_file, reference, monkeypatch):
    if device_kind == "gpu":
        monkeypatch.setenv("MINIGLUON_SIMULATED_GPUS", "2")
    ctxs = CPUS if device_kind == "cpu" else [mx.gpu(0), mx.gpu(1)]
    _, trainer, history = _train(ctxs, init_file, kvstore, update_on_kvstore)
    assert trainer._kvstore.type == kvstore
    assert trainer._update_on_kvstore is update_on_kvstore
    _assert_same_history(history, reference)


def test_update_on_kvstore_defaults_to_true_with_a_store(init_file, reference):
    _, trainer, history = _train(CPUS, init_file, "device", hybridize=True)
    assert trainer._update_on_kvstore is True
    _assert_same_history(history, reference)


def test_without_kvstore_the_trainer_sums_gradients_itself(init_file, reference):
    _, trainer, history = _train(CPUS, init_file, kvstore=None)
    assert trainer._kvstore is None
    _assert_same_history(history, reference)


@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_kvstore_object(init_file, reference, update_on_kvstore):
    kv = mx.kv.create("local")
    _, trainer, history = _train(CPUS, init_file, kv, update_on_kvstore)
    assert trainer._kvstore is kv
    _assert_same_history(history, reference)


def test_single_device_with_a_kvstore_gives_the_same_result(init_file, reference):
    _, trainer, history = _train([mx.cpu(0)], init_file, mx.kv.create("device"))
    assert trainer._kvstore is not None
    _assert_same_history(history, reference)


def test_deferred_initialization_before_the_trainer(init_file, reference):
    """The usual script: initialize, create the Trainer, then the first forward pass."""
    net = lenet()
    net.initialize(mx.init.Zero(), ctx=CPUS)
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3},
                            kvstore="local")
    net(nd.zeros((1, 1, 16, 16)))
    net.load_parameters(init_file)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    history = []
    for data, label in _batches():
        _train_step(net, trainer, CPUS, data, label, loss_fn)
        history.append(_values(net, mx.cpu(1)))
    _assert_same_history(history, reference)


def test_allreduce_grads_then_update_equals_step(init_file, reference):
    net = _net_on(CPUS, init_file)
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3},
                            kvstore="device", update_on_kvstore=False)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    history = []
    for data, label in _batches():
        xs, ys = gluon.utils.split_and_load(data, CPUS), gluon.utils.split_and_load(label, CPUS)
        with autograd.record():
            losses = [loss_fn(net(x), y) for x, y in zip(xs, ys)]
        autograd.backward(losses)
        trainer.allreduce_grads()
        trainer.update(BATCH)
        history.append(_values(net, mx.cpu(0)))
    _assert_same_history(history, reference)


# ---- model parallelism --------------------------------------------------------------------
class TwoHalves(gluon.Block):
    """Convolutions on one device, dense layers on another."""

    def __init__(self, head_ctx, **kwargs):
        super().__init__(**kwargs)
        self.head_ctx = head_ctx
        with self.name_scope():
            self.features = nn.HybridSequential()
            self.features.add(nn.Conv2D(4, 3, activation="relu", in_channels=1),
                              nn.MaxPool2D(2), nn.Flatten())
            self.head = nn.HybridSequential()
            self.head.add(nn.Dense(16, activation="relu", in_units=196), nn.Dense(10,
                                                                                  in_units=16))

    def forward(self, x):
        return self.head(self.features(x).as_in_context(self.head_ctx))


@pytest.fixture(scope="module")
def halves_file(tmp_path_factory):
    net = TwoHalves(mx.cpu(0))
    net.initialize(mx.init.Xavier())
    fname = str(tmp_path_factory.mktemp("halves") / "halves.params")
    net.save_parameters(fname)
    return fname


def _train_halves(head_ctx, init_file, two_trainers, kvstore="device"):
    net = TwoHalves(head_ctx)
    net.load_parameters(init_file, ctx=mx.cpu(0))
    net.head.collect_params().reset_ctx(head_ctx)
    opt_params = {"learning_rate": 0.1, "momentum": 0.9}
    halves = [net.features, net.head] if two_trainers else [net]
    trainers = [gluon.Trainer(h.collect_params(), "sgd", opt_params, kvstore=kvstore)
                for h in halves]
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    history = []
    for data, label in _batches():
        x, y = nd.array(data, ctx=mx.cpu(0)), nd.array(label, ctx=head_ctx)
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        for trainer in trainers:
            trainer.step(BATCH)
        history.append({name: p.data().asnumpy().astype(np.float64)
                        for name, p in net._collect_params_with_prefix().items()})
    return net, history


@pytest.mark.parametrize("two_trainers, kvstore", [(True, "device"), (False, "device"),
                                                   (False, "local_object")])
def test_model_parallel_matches_single_device(halves_file, two_trainers, kvstore):
    _, expected = _train_halves(mx.cpu(0), halves_file, two_trainers=False)
    if kvstore == "local_object":          # a store object is used even for one device
        kvstore = mx.kv.create("local")
    net, history = _train_halves(mx.cpu(1), halves_file, two_trainers, kvstore)
    assert net.head[0].weight.list_ctx() == [mx.cpu(1)]
    assert net.features[0].weight.list_ctx() == [mx.cpu(0)]
    _assert_same_history(history, expected)


def test_runs_really_train(reference, init_file):
    start = _values(_net_on([mx.cpu(0)], init_file))
    moved = [np.abs(reference[-1][k] - start[k]).max() for k in start]
    assert min(moved) > 1e-4


# ---- optimizer states ---------------------------------------------------------------------
@pytest.mark.parametrize("ctxs, update_on_kvstore", [
    ([mx.cpu(0)], None), (CPUS, True), (CPUS, False)])
def test_save_and_load_states_continue_identically(ctxs, update_on_kvstore, init_file,
                                                   tmp_path):
    adam = {"learning_rate": 0.01, "wd": 1e-3}
    batches = _batches(4, seed=1)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def make(params_file):
        net = _net_on(ctxs, params_file)
        trainer = gluon.Trainer(net.collect_params(), "adam", dict(adam), kvstore="device",
                                update_on_kvstore=update_on_kvstore)
        return net, trainer

    net, trainer = make(init_file)
    for data, label in batches[:2]:
        _train_step(net, trainer, ctxs, data, label, loss_fn)
    params_file, states_file = str(tmp_path / "p.params"), str(tmp_path / "t.states")
    net.save_parameters(params_file)
    trainer.save_states(states_file)
    for data, label in batches[2:]:
        _train_step(net, trainer, ctxs, data, label, loss_fn)
    expected = _values(net, ctxs[-1])

    net2, trainer2 = make(params_file)
    trainer2.load_states(states_file)
    assert trainer2.optimizer.num_update == 2 and trainer2.learning_rate == 0.01
    for data, label in batches[2:]:
        _train_step(net2, trainer2, ctxs, data, label, loss_fn)
    got = _values(net2, ctxs[-1])
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


# ---- learning rate and per-parameter settings ---------------------------------------------
def _tiny(ctxs, **dense_kwargs):
    net = nn.Dense(1, in_units=2, use_bias=False, **dense_kwargs)
    net.initialize(mx.init.Constant(1.0), ctx=ctxs)
    return net


def _tiny_step(net, trainer, ctxs, x):
    xs = gluon.utils.split_and_load(x, ctxs)
    with autograd.record():
        losses = [net(a).sum() for a in xs]
    autograd.backward(losses)
    trainer.step(x.shape[0])


@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_set_learning_rate_takes_effect(update_on_kvstore):
    net = _tiny(CPUS)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1},
                            kvstore="local", update_on_kvstore=update_on_kvstore)
    assert trainer.learning_rate == 0.1
    x = np.array([[1, 2], [3, 4]], dtype=np.float32)
    mean_grad = x.mean(axis=0)
    _tiny_step(net, trainer, CPUS, x)
    trainer.set_learning_rate(0.5)
    assert trainer.learning_rate == 0.5 and trainer.optimizer.lr == 0.5
    _tiny_step(net, trainer, CPUS, x)
    expected = 1.0 - 0.1 * mean_grad - 0.5 * mean_grad
    for ctx in CPUS:
        np.testing.assert_allclose(net.weight.data(ctx).asnumpy()[0], expected, rtol=1e-6)


def test_the_kvstore_optimizer_is_the_trainers_and_gets_the_rate(tmp_path):
    net = _tiny(CPUS)
    kv = mx.kv.create("local")
    with pytest.raises(MXNetError, match="has no optimizer; call set_optimizer"):
        kv.set_learning_rate(0.5)
    assert kv.optimizer is None
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
    _tiny_step(net, trainer, CPUS, np.ones((2, 2), np.float32))
    assert kv.optimizer is trainer.optimizer
    trainer.save_states(str(tmp_path / "t.states"))
    trainer.set_learning_rate(0.5)
    assert kv.optimizer.learning_rate == 0.5
    trainer.load_states(str(tmp_path / "t.states"))
    assert trainer.optimizer is kv.optimizer and trainer.learning_rate == 0.1


def test_optimizer_instance_lr_mult_and_grad_req_null():
    frozen, scaled = _tiny(CPUS), _tiny(CPUS)
    frozen.weight.lr_mult = 0.0
    fixed = _tiny(CPUS)
    fixed.weight.grad_req = "null"
    params = {**frozen.collect_params(), **scaled.collect_params(),
              **fixed.collect_params()}
    sgd = mx.optimizer.SGD(learning_rate=0.1)
    trainer = gluon.Trainer(params, sgd, kvstore="device")
    assert trainer.optimizer is sgd
    x = np.ones((2, 2), dtype=np.float32)
    xs = gluon.utils.split_and_load(x, CPUS)
    with autograd.record():
        losses = [frozen(a).sum() + scaled(a).sum() + fixed(a).sum() for a in xs]
    autograd.backward(losses)
    trainer.step(2)
    assert frozen.weight.data(mx.cpu(1)).asnumpy().tolist() == [[1.0, 1.0]]
    assert fixed.weight.data(mx.cpu(1)).asnumpy().tolist() == [[1.0, 1.0]]
    np.testing.assert_allclose(scaled.weight.data(mx.cpu(1)).asnumpy(), [[0.9, 0.9]],
                               rtol=1e-6)


# ---- errors -------------------------------------------------------------------------------
def test_parameters_must_be_initialized():
    net = nn.Dense(3, in_units=2)
    with pytest.raises(MXNetError, match=r"Parameter 'dense\d+_bias' has not been "
                                         r"initialized; call initialize\(\).*before creating "
                                         "the Trainer"):
        gluon.Trainer(net.collect_params(), "sgd")


def test_deferred_parameters_need_a_forward_pass_before_step():
    net = nn.Dense(3)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd")
    with pytest.raises(MXNetError, match=r"still waiting for deferred initialization at "
                                         r"trainer.step\(\).*run a forward pass"):
        trainer.step(1)


def test_bad_arguments():
    net = _tiny([mx.cpu(0)])
    with pytest.raises(MXNetError, match="optimizer_params must be None when optimizer is an "
                                         "Optimizer instance"):
        gluon.Trainer(net.collect_params(), mx.optimizer.SGD(), {"learning_rate": 0.1})
    with pytest.raises(MXNetError, match="params must be a ParameterDict"):
        gluon.Trainer(net, "sgd")
    with pytest.raises(MXNetError, match="params must hold Parameters, got a int"):
        gluon.Trainer([1, 2], "sgd")
    with pytest.raises(MXNetError, match="listed twice"):
        gluon.Trainer([net.weight, net.weight], "sgd")
    with pytest.raises(MXNetError, match="kvstore must be a str"):
        gluon.Trainer(net.collect_params(), "sgd", kvstore=3)


def test_update_and_allreduce_refuse_update_on_kvstore():
    net = _tiny(CPUS)
    trainer = gluon.Trainer(net.collect_params(), "sgd", kvstore="device",
                            update_on_kvstore=True)
    with pytest.raises(MXNetError, match=r"update\(\) is not supported.*"
                                         "update_on_kvstore=False"):
        trainer.update(2)
    with pytest.raises(MXNetError, match=r"allreduce_grads\(\) is not supported"):
        trainer.allreduce_grads()
    with pytest.raises(AssertionError):              # MXNet raises an AssertionError
        trainer.update(2)


def test_compression_error_at_first_step_of_a_local_store():
    # dist_* stores are tested on real clusters in tests/kvstore/test_dist_*.py
    net = _tiny(CPUS)
    x = np.ones((2, 2), dtype=np.float32)
    trainer = gluon.Trainer(net.collect_params(), "sgd", kvstore="local",
                            compression_params={"type": "2bit", "threshold": 0.5})
    with pytest.raises(KVStoreError, match="'2bit' is not supported by the 'local' kvstore"):
        _tiny_step(net, trainer, CPUS, x)


needs_freshness = pytest.mark.skipif(
    not _TRACKS_FRESHNESS, reason="needs autograd.backward to mark NDArray._fresh_grad")


@needs_freshness
@pytest.mark.parametrize("kvstore, update_on_kvstore", [("device", True), ("local", False),
                                                        (None, None)])
def test_stale_gradient_on_an_unused_context(kvstore, update_on_kvstore):
    net = _tiny(CPUS)
    trainer = gluon.Trainer(net.collect_params(), "sgd", kvstore=kvstore,
                            update_on_kvstore=update_on_kvstore)
    x = nd.ones((2, 2), ctx=mx.cpu(0))      # the data never reaches cpu(1)
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    with pytest.raises(StaleGradientError) as err:
        trainer.step(2)
    msg = str(err.value)
    assert "Parameter 'dense" in msg and "on cpu(1) has not been updated by backward" in msg
    assert "ignore_stale_grad=True" in msg and "split_and_load" in msg
    assert isinstance(err.value, UserWarning)


@needs_freshness
def test_step_twice_without_backward_is_stale_unless_ignored():
    net = _tiny([mx.cpu(0)])
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    _tiny_step(net, trainer, [mx.cpu(0)], np.ones((1, 2), dtype=np.float32))
    after_one = net.weight.data().asnumpy()
    with pytest.raises(StaleGradientError, match="on cpu\\(0\\) has not been updated"):
        trainer.step(1)
    trainer.step(1, ignore_stale_grad=True)          # skipped: the weight keeps its value
    np.testing.assert_array_equal(net.weight.data().asnumpy(), after_one)


# ---- the Trainer and its parameters, kvstore choices --------------------------------------------
def _param(ctxs, **kwargs):
    x = gluon.Parameter("x", shape=(4,), **kwargs)
    x.initialize(ctx=ctxs, init="zeros")
    return x


def _step_plus_one(trainer, x):
    """Every copy gets gradient 1 (d(w + 1)/dw); with sgd at rate lr, each step subtracts
    lr * len(ctxs) (the sum over devices)."""
    with autograd.record():
        for w in x.list_data():
            (w + 1).backward()
    trainer.step(1)


def test_parameters_know_their_trainer():
    x = _param(CPUS)
    assert x._trainer is None
    trainer = gluon.Trainer([x], "sgd")
    assert x._trainer is trainer
    x._set_trainer(None)
    assert x._trainer is None
    other = gluon.Trainer([x], "sgd")             # a dense parameter may change Trainer
    assert x._trainer is other


def test_a_sparse_parameter_takes_one_trainer():
    x = _param(CPUS, stype="row_sparse")
    first = gluon.Trainer([x], "sgd")
    with pytest.raises(RuntimeError, match="'x' .*row_sparse.* already has a Trainer"):
        gluon.Trainer([x], "sgd")
    x._set_trainer(None)
    gluon.Trainer([x], "sgd")
    assert x._trainer is not first


@pytest.mark.parametrize("kvstore", ["local", "device"])
def test_loading_parameters_rebuilds_a_store_that_holds_the_weights(tmp_path, kvstore):
    params = gluon.ParameterDict()
    x = params.get("x", shape=(4,))
    params.initialize(ctx=CPUS, init="zeros")
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.1}, kvstore=kvstore)
    params.save(str(tmp_path / "x.params"))
    _step_plus_one(trainer, x)
    assert trainer._update_on_kvstore is True
    params.load(str(tmp_path / "x.params"))
    assert trainer._kvstore is None and trainer._kv_initialized is False
    _step_plus_one(trainer, x)                    # from the loaded zeros, not from -0.2
    for w in x.list_data():
        np.testing.assert_allclose(w.asnumpy(), np.full(4, -0.2), rtol=1e-6)


def test_loading_keeps_a_store_that_only_sums(tmp_path):
    params = gluon.ParameterDict()
    x = params.get("x", shape=(4,))
    params.initialize(ctx=CPUS, init="zeros")
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.1}, update_on_kvstore=False)
    params.save(str(tmp_path / "x.params"))
    _step_plus_one(trainer, x)
    store = trainer._kvstore
    params.load(str(tmp_path / "x.params"))
    assert trainer._kvstore is store
    _step_plus_one(trainer, x)
    np.testing.assert_allclose(x.data(mx.cpu(1)).asnumpy(), np.full(4, -0.2), rtol=1e-6)


def test_a_distributed_store_cannot_be_reset():
    @mx.kv.KVStoreBase.register
    class DistSummer(mx.kv.KVStoreBase):      # 'dist' in its type: read as distributed
        type = "dist_summer"

        def broadcast(self, key, value, out, priority=0):
            for arr in out:
                arr[...] = value

        def is_capable(self, capability):
            return False

    try:
        x = _param(CPUS)
        trainer = gluon.Trainer([x], "sgd", kvstore=mx.kv.create("distsummer"))
        trainer._init_kvstore()
        trainer._init_params()
        with pytest.raises(MXNetError, match="cannot reset the distributed 'dist_summer'"):
            trainer._reset_kvstore()
    finally:
        del mx.kv.KVStoreBase.kv_registry["distsummer"]


def test_a_store_without_optimizer_updates_on_the_devices():
    x = _param(CPUS)
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1.0, "momentum": 0.5},
                            kvstore=mx.kv.create("teststore"))
    _step_plus_one(trainer, x)
    assert trainer._update_on_kvstore is False
    for w in x.list_data():                       # summed gradient 2 on every copy
        np.testing.assert_array_equal(w.asnumpy(), np.full(4, -2.0))
    refused = gluon.Trainer([x], "sgd", kvstore=mx.kv.create("teststore"),
                            update_on_kvstore=True)
    with pytest.raises(ValueError, match="update_on_kvstore=True needs a kvstore that can "
                                         "run the optimizer, but TestStore"):
        refused._init_kvstore()


@pytest.mark.parametrize("kwargs, env, expected", [
    ({}, None, True),
    ({}, "0", False),                              # MXNET_UPDATE_ON_KVSTORE
    ({"grad_stype": "row_sparse"}, None, False),   # sparse gradients: only dist stores
    ({"stype": "row_sparse"}, "0", True),          # sparse weights: always in the store
])
def test_update_on_kvstore_defaults(monkeypatch, kwargs, env, expected):
    if env is not None:
        monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", env)
    x = _param(CPUS, **kwargs)
    trainer = gluon.Trainer([x], "sgd", kvstore="device")
    trainer._init_kvstore()
    assert trainer._update_on_kvstore is expected


def test_sparse_weights_refuse_updates_on_devices_and_need_a_store():
    x = _param(CPUS, stype="row_sparse")
    trainer = gluon.Trainer([x], "sgd", update_on_kvstore=False)
    with pytest.raises(ValueError, match="update_on_kvstore=False does not work here: "
                                         "row_sparse weights"):
        trainer._init_kvstore()
    one = gluon.Trainer([_param([mx.cpu(0)], stype="row_sparse")], "sgd")
    one._init_kvstore()
    assert one._kvstore is not None and one._update_on_kvstore is True
    dense = gluon.Trainer([_param([mx.cpu(0)])], "sgd")
    dense._init_kvstore()
    assert dense._kvstore is None and dense._update_on_kvstore is None


def test_bad_update_on_kvstore_environment(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "maybe")
    trainer = gluon.Trainer([_param(CPUS)], "sgd")
    with pytest.raises(MXNetError, match="MXNET_UPDATE_ON_KVSTORE must be 0 or 1, got 'maybe'"):
        trainer._init_kvstore()
