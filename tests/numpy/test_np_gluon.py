"""Gluon in NumPy mode: parameters, blocks, losses and data loaders speak mx.np after
npx.set_np(), and a HybridBlock using F.np / F.npx gives identical results hybridized."""
import numpy as onp
import pytest

import minigluon as mx
from minigluon import autograd, gluon, nd, np, npx
from minigluon.gluon import nn


class Mixed(gluon.HybridBlock):
    """Uses F.npx, F.np (a graph constant, where, slicing) and NumPy-semantics methods."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv = nn.Conv2D(4, 3, padding=1)
            self.bn = nn.BatchNorm()
            self.dense = nn.Dense(3)

    def hybrid_forward(self, F, x):
        y = F.npx.relu(self.bn(self.conv(x)))
        z = y.mean(axis=(2, 3)) * 2 + F.np.ones((1, 4))
        z = F.np.where(z > 1.1, z, z * 0.5)
        out = self.dense(z) + z.sum(axis=1, keepdims=True)[:, 0:1]
        return F.npx.log_softmax(out), (out ** 2).sum()


def _data(seed=0):
    rng = onp.random.default_rng(seed)
    return np.array(rng.standard_normal((2, 3, 5, 5)).astype("float32"))


def _run(net, x):
    """Outputs and gradients of one recorded training step."""
    with autograd.record():
        logp, total = net(x)
        loss = logp.sum() + total
    loss.backward()
    grads = {name: p.grad().asnumpy() for name, p in net.collect_params().items()
             if p.grad_req != "null"}
    return logp, total, grads


def test_parameters_blocks_and_losses_return_np_arrays():
    npx.set_np()
    net = nn.Dense(3)
    net.initialize()
    x = np.ones((2, 4))
    out = net(x)
    assert isinstance(out, np.ndarray) and out.shape == (2, 3)
    assert isinstance(net.weight.data(), np.ndarray)
    loss = gluon.loss.SoftmaxCrossEntropyLoss()(out, np.array([0, 2], dtype="int64"))
    assert isinstance(loss, np.ndarray) and loss.shape == (2,)
    with autograd.record():
        l2 = gluon.loss.L2Loss()(net(x), np.zeros((2, 3))).sum()
    assert l2.shape == ()
    l2.backward()
    assert isinstance(net.weight.grad(), np.ndarray)


def test_legacy_mode_still_gives_nd_arrays():
    npx.set_np()
    npx.reset_np()
    net = nn.Dense(3)
    net.initialize()
    out = net(nd.ones((2, 4)))
    assert type(out) is nd.NDArray and type(net.weight.data()) is nd.NDArray


def test_f_np_and_f_npx_exist_for_both_f():
    assert mx.nd.np is np and mx.nd.npx is npx and mx.sym.npx is npx
    assert mx.sym.np.sum is np.sum and mx.sym.np.zeros is not np.zeros


def test_hybridized_gives_identical_outputs_and_gradients():
    npx.set_np()
    mx.random.seed(0)
    net = Mixed()
    net.initialize(mx.init.Xavier())
    x = _data()
    logp, total, grads = _run(net, x)
    assert isinstance(logp, np.ndarray) and total.shape == ()
    net.hybridize()
    _run(net, x)                             # traces
    hlogp, htotal, hgrads = _run(net, x)     # replays the cached graph
    assert isinstance(hlogp, np.ndarray) and htotal.shape == ()
    onp.testing.assert_array_equal(hlogp.asnumpy(), logp.asnumpy())
    onp.testing.assert_array_equal(htotal.asnumpy(), total.asnumpy())
    for name in grads:
        onp.testing.assert_array_equal(hgrads[name], grads[name], err_msg=name)
    with autograd.predict_mode():            # running statistics, graph vs imperative
        hybrid = net(x)[0].asnumpy()
        net.hybridize(active=False)
        onp.testing.assert_array_equal(net(x)[0].asnumpy(), hybrid)


def test_traced_np_symbols_refuse_eager_only_creation():
    class Bad(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return x + F.np.linspace(0, 1, 3)

    npx.set_np()
    net = Bad()
    net.hybridize()
    with pytest.raises(AttributeError, match="cannot be used while a HybridBlock is traced"):
        net(np.zeros(3))


def test_export_and_import_in_np_mode(tmp_path):
    npx.set_np()
    net = nn.HybridSequential()
    net.add(nn.Dense(4, activation="relu"), nn.Dense(2))
    net.initialize()
    net.hybridize()
    x = np.ones((3, 5))
    want = net(x)
    sym_file, param_file = net.export(str(tmp_path / "net"))
    loaded = gluon.SymbolBlock.imports(sym_file, ["data"], param_file)
    got = loaded(x)
    assert isinstance(got, np.ndarray)
    onp.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-6)


def test_save_and_load_parameters_in_np_mode(tmp_path):
    npx.set_np()
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.save_parameters(str(tmp_path / "p.params"))
    other = nn.Dense(2, in_units=3)
    other.load_parameters(str(tmp_path / "p.params"))
    assert isinstance(other.weight.data(), np.ndarray)
    onp.testing.assert_array_equal(other.weight.data().asnumpy(), net.weight.data().asnumpy())


def test_trainer_updates_np_parameters():
    npx.set_np()
    net = nn.Dense(1, in_units=2)
    net.initialize(mx.init.Zero())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    x, y = np.array([[1.0, 2.0]]), np.array([[1.0]])
    with autograd.record():
        loss = gluon.loss.L2Loss()(net(x), y)
    loss.backward()
    trainer.step(1)
    onp.testing.assert_allclose(net.weight.data().asnumpy(), [[0.5, 1.0]])
    assert isinstance(net.weight.data(), np.ndarray)


@pytest.mark.parametrize("workers", [dict(), dict(num_workers=2, thread_pool=True)])
def test_dataloader_batches_are_np_arrays_in_np_mode(workers):
    data = onp.arange(12, dtype="float32").reshape(6, 2)
    labels = onp.arange(6)
    dataset = gluon.data.ArrayDataset(data, labels)
    npx.set_np()
    batches = list(gluon.data.DataLoader(dataset, batch_size=4, **workers))
    x, y = batches[0]
    assert isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
    assert x.shape == (4, 2) and y.dtype == onp.int64
    onp.testing.assert_array_equal(y.asnumpy(), [0, 1, 2, 3])
    npx.reset_np()
    x, y = next(iter(gluon.data.DataLoader(dataset, batch_size=4, **workers)))
    assert type(x) is nd.NDArray and type(y) is nd.NDArray


def test_dataloader_process_workers_give_np_arrays():
    npx.set_np()
    dataset = gluon.data.ArrayDataset(onp.ones((4, 2), "float32"), onp.zeros(4))
    x, y = next(iter(gluon.data.DataLoader(dataset, batch_size=2, num_workers=1)))
    assert isinstance(x, np.ndarray) and isinstance(y, np.ndarray)


def test_metric_accepts_np_arrays():
    metric = mx.metric.Accuracy()
    metric.update([np.array([0, 1, 1])], [np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]])])
    assert metric.get()[1] == pytest.approx(2 / 3)


def test_graph_constants_from_f_np_while_tracing():
    class Constants(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            base = F.np.zeros((2, 3)) + F.np.full((1, 3), 2.0) + F.np.arange(3)
            return x * base + F.np.ones(3) - F.np.zeros_like(x) + F.np.ones_like(x, "float32")

    npx.set_np()
    net = Constants()
    x = np.array(onp.arange(6, dtype="float32").reshape(2, 3))
    want = net(x).asnumpy()
    onp.testing.assert_array_equal(want, x.asnumpy() * (2.0 + onp.arange(3)) + 2.0)
    net.hybridize()
    net(x)
    got = net(x)
    assert isinstance(got, np.ndarray)
    onp.testing.assert_array_equal(got.asnumpy(), want)
