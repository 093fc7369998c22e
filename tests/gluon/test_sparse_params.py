"""Sparse parameters in Gluon: row_sparse weights read through the Trainer's kvstore,
Embedding's row_sparse gradients, and training with them against the dense oracle."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon
from minigluon.base import MXNetError
from minigluon.ndarray import sparse_storage

VOCAB, DIM = 12, 3
BATCHES = [[1, 3, 3, 7], [0, 3, 9, 9], [7, 7, 2, 1]]


class RowSparseEmbedding(gluon.Block):
    """An embedding whose table is a row_sparse weight: each forward pulls the rows of
    its batch from the Trainer, as MXNet's sparse models do."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(VOCAB, DIM), stype="row_sparse",
                                          grad_stype="row_sparse")

    def forward(self, x):
        weight = self.weight.row_sparse_data(x)
        return mx.nd.Embedding(x, weight, input_dim=VOCAB, output_dim=DIM, sparse_grad=True)


def _table():
    return 1 + np.arange(VOCAB * DIM, dtype=np.float32).reshape(VOCAB, DIM) / 10


def _train(net, weight_of, ctxs, optimizer_params, kvstore="device"):
    """A few steps of sum-of-squares loss on BATCHES; returns the final table."""
    net.initialize(mx.init.Constant(mx.nd.array(_table())), ctx=ctxs)
    trainer = gluon.Trainer(net.collect_params(), "sgd", optimizer_params, kvstore=kvstore)
    for batch in BATCHES:
        xs = gluon.utils.split_and_load(mx.nd.array(batch), ctxs)
        with autograd.record():
            losses = [(net(x) ** 2).sum() for x in xs]
        for loss in losses:
            loss.backward()
        trainer.step(len(batch))
    return weight_of(net)


def _dense_table(net):
    return net.weight.data(net.weight.list_ctx()[0]).asnumpy()


def _pulled_table(net):
    return net.weight.row_sparse_data(mx.nd.arange(0, VOCAB)).asnumpy()


@pytest.mark.parametrize("ctxs", [[mx.cpu(0)], [mx.cpu(0), mx.cpu(1)]])
def test_sparse_grad_training_matches_dense(ctxs):
    sgd = {"learning_rate": 0.05}
    dense = _train(gluon.nn.Embedding(VOCAB, DIM), _dense_table, ctxs, sgd)
    sparse = _train(gluon.nn.Embedding(VOCAB, DIM, sparse_grad=True), _dense_table, ctxs, sgd)
    rsp_weight = _train(RowSparseEmbedding(), _pulled_table, ctxs, sgd)
    np.testing.assert_allclose(sparse, dense, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rsp_weight, dense, rtol=1e-6, atol=1e-6)
    assert not np.allclose(dense, _table())            # training did move the table


@pytest.mark.parametrize("kvstore", ["local", None])
def test_sparse_grads_summed_over_devices_without_device_store(kvstore):
    # 'local' sums in the store; None makes the Trainer sum the devices' gradients itself
    ctxs, sgd = [mx.cpu(0), mx.cpu(1)], {"learning_rate": 0.05}
    dense = _train(gluon.nn.Embedding(VOCAB, DIM), _dense_table, ctxs, sgd, kvstore)
    sparse = _train(gluon.nn.Embedding(VOCAB, DIM, sparse_grad=True), _dense_table, ctxs,
                    sgd, kvstore)
    np.testing.assert_allclose(sparse, dense, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("make", [lambda: gluon.nn.Embedding(VOCAB, DIM, sparse_grad=True),
                                  RowSparseEmbedding])
@pytest.mark.parametrize("ctxs", [[mx.cpu(0)], [mx.cpu(0), mx.cpu(1)]])
def test_untouched_rows_keep_their_values(make, ctxs):
    # momentum and weight decay would move every row of a dense update
    net = make()
    weight_of = _pulled_table if isinstance(net, RowSparseEmbedding) else _dense_table
    params = {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.1}
    final = _train(net, weight_of, ctxs, params)
    touched = sorted({i for batch in BATCHES for i in batch})
    untouched = [i for i in range(VOCAB) if i not in touched]
    np.testing.assert_array_equal(final[untouched], _table()[untouched])
    assert (final[touched] != _table()[touched]).all()


def test_embedding_backward_never_densifies(monkeypatch):
    layer = gluon.nn.Embedding(1000, 4, sparse_grad=True)
    layer.initialize()
    x = mx.nd.array([[5, 7], [7, 999]])

    def refuse(*args, **kwargs):
        raise AssertionError("a dense copy of the row_sparse gradient was made")
    with autograd.record():
        y = layer(x)
    monkeypatch.setattr(sparse_storage, "from_dense", refuse)
    monkeypatch.setattr(sparse_storage.RowSparseStorage, "to_dense", refuse)
    y.backward()
    grad = layer.weight.grad()._data
    assert grad.stype == "row_sparse"
    assert grad.indices.tolist() == [5, 7, 999]
    np.testing.assert_array_equal(grad.data, [[1] * 4, [2] * 4, [1] * 4])


@pytest.mark.parametrize("hybridize", [False, True])
def test_embedding_sparse_grads_sum_over_calls(hybridize):
    layer = gluon.nn.Embedding(10, 2, sparse_grad=True)
    layer.initialize()
    if hybridize:
        layer.hybridize()
    for _ in range(2):        # the second pass of a hybridized block replays its graph
        with autograd.record():
            loss = layer(mx.nd.array([1, 2])).sum() + 3 * layer(mx.nd.array([2, 4])).sum()
        loss.backward()
        grad = layer.weight.grad()
        assert grad.stype == "row_sparse"
        assert grad.indices.asnumpy().tolist() == [1, 2, 4]
        np.testing.assert_array_equal(grad.asnumpy()[[1, 2, 4], 0], [1, 4, 3])


def test_sparse_gradient_into_a_computed_weight_is_dense():
    # the table is a recorded result (w * 2), so the gradient flows on into `mul`'s backward
    w = mx.nd.ones((5, 2))
    w.attach_grad()
    with autograd.record():
        out = mx.nd.Embedding(mx.nd.array([0, 3, 3]), w * 2, input_dim=5, output_dim=2,
                              sparse_grad=True)
    out.backward()
    assert w.grad.stype == "default"
    np.testing.assert_array_equal(w.grad.asnumpy()[:, 0], [2, 0, 0, 4, 0])
    with autograd.record():
        out = mx.nd.Embedding(mx.nd.array([1]), w, input_dim=5, output_dim=2,
                              sparse_grad=True)
    (dw,) = autograd.grad(out, [w])
    np.testing.assert_array_equal(dw.asnumpy()[:, 0], [0, 1, 0, 0, 0])


def test_row_sparse_data_returns_exactly_the_rows_asked():
    ctxs = [mx.cpu(0), mx.cpu(1)]
    w = gluon.Parameter("w", shape=(6, 2), stype="row_sparse")
    w.initialize(mx.init.Constant(mx.nd.array(_table()[:6, :2])), ctx=ctxs)
    gluon.Trainer([w], "sgd")
    got = w.row_sparse_data(mx.nd.array([4, 1, 4], ctx=mx.cpu(1)))
    assert got.stype == "row_sparse" and got.context == mx.cpu(1)
    assert got.indices.asnumpy().tolist() == [1, 4]
    np.testing.assert_array_equal(got.data.asnumpy(), _table()[:6, :2][[1, 4]])
    both = w.list_row_sparse_data(mx.nd.array([2]))
    assert [a.context for a in both] == ctxs
    assert all(a.indices.asnumpy().tolist() == [2] for a in both)


def test_sparse_parameter_misuse_is_refused():
    w = gluon.Parameter("w", shape=(4, 2), stype="row_sparse")
    w.initialize()
    rows = mx.nd.array([0, 1])
    with pytest.raises(MXNetError, match="no.*Trainer|none has been created"):
        w.row_sparse_data(rows)
    for read in (w.data, w.list_data):
        with pytest.raises(MXNetError, match="row_sparse_data"):
            read()
    with pytest.raises(TypeError, match="row_id must be an NDArray"):
        w.row_sparse_data([0, 1])
    dense = gluon.Parameter("d", shape=(4, 2))
    dense.initialize()
    with pytest.raises(MXNetError, match="only for row_sparse"):
        dense.row_sparse_data(rows)
    with pytest.raises(MXNetError, match="kvstore=None"):
        gluon.Trainer([w], "sgd", kvstore=None).step(1)
    w._set_trainer(None)
    with pytest.raises(ValueError, match="update_on_kvstore=False"):
        gluon.Trainer([w], "sgd", update_on_kvstore=False).step(1)


def test_one_trainer_per_sparse_parameter():
    w = gluon.Parameter("w", shape=(4, 2), stype="row_sparse")
    w.initialize()
    gluon.Trainer([w], "sgd")
    with pytest.raises(RuntimeError, match="one Trainer"):
        gluon.Trainer([w], "sgd")


def test_symbol_block_refuses_sparse_parameters():
    data = mx.sym.var("data")
    weight = mx.sym.var("weight", stype="row_sparse")
    assert weight.attr("__storage_type__") == "1"
    with pytest.raises(AssertionError, match="'weight'.*dense parameters only"):
        gluon.SymbolBlock(mx.sym.dot(data, weight), data)


def test_save_and_load_keep_the_kvstore_rows(tmp_path):
    params = gluon.ParameterDict("net_")
    params.get("w", shape=(5, 2), stype="row_sparse", grad_stype="row_sparse")
    params.initialize(mx.init.Constant(mx.nd.array(_table()[:5, :2])))
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 1.0})
    w = params["net_w"]
    row = mx.nd.array([2])
    with autograd.record():        # the local copy now holds row 2 only
        y = mx.nd.Embedding(row, w.row_sparse_data(row), input_dim=5, output_dim=2,
                            sparse_grad=True)
    y.backward()
    trainer.step(1)
    expected = _table()[:5, :2].copy()
    expected[2] -= 1
    fname = str(tmp_path / "w.params")
    params.save(fname)                      # every row, from the kvstore
    dense = gluon.ParameterDict("net_")
    dense.get("w", shape=(5, 2))
    dense.load(fname)
    np.testing.assert_allclose(dense["net_w"].data().asnumpy(), expected)
    params.load(fname)                      # rebuilds the store from the loaded rows
    np.testing.assert_allclose(w.row_sparse_data(mx.nd.arange(0, 5)).asnumpy(), expected)


def test_repr_shows_sparse_storage():
    params = gluon.ParameterDict("p_")
    params.get("w", shape=(3, 2), stype="row_sparse", grad_stype="row_sparse")
    params.get("b", shape=(2,))
    lines = str(params).splitlines()
    assert "stype=row_sparse, grad_stype=row_sparse" in lines[1]
    assert "stype" not in lines[2]


def test_grad_buffers_take_grad_stype_and_zero_grad_empties_them():
    p = gluon.Parameter("p", shape=(4, 3), grad_stype="row_sparse")
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    assert [g.stype for g in p.list_grad()] == ["row_sparse"] * 2
    with autograd.record():
        (p.data(mx.cpu(0))[1] * 2).sum().backward()
    assert p.grad(mx.cpu(0)).indices.asnumpy().tolist() == [1]
    p.zero_grad()
    assert p.grad(mx.cpu(0))._data.nnz == 0


def test_clip_global_norm_of_row_sparse_arrays():
    x = mx.nd.array([[0, 0], [3, 0], [0, 4]]).tostype("row_sparse")
    norm = gluon.utils.clip_global_norm([x], 1.0)
    assert norm == pytest.approx(5.0)
    assert x.stype == "row_sparse" and x.indices.asnumpy().tolist() == [1, 2]
    np.testing.assert_allclose(x.asnumpy(), [[0, 0], [0.6, 0], [0, 0.8]], rtol=1e-6)


def test_split_and_load_keeps_csr_rows():
    dense = np.zeros((6, 4), np.float32)
    dense[[0, 3, 5], [1, 2, 0]] = [1, 2, 3]
    parts = gluon.utils.split_and_load(mx.nd.array(dense).tostype("csr"),
                                       [mx.cpu(0), mx.cpu(1)])
    assert [p.stype for p in parts] == ["csr", "csr"]
    assert [p.context for p in parts] == [mx.cpu(0), mx.cpu(1)]
    np.testing.assert_array_equal(np.vstack([p.asnumpy() for p in parts]), dense)
    with pytest.raises(ValueError, match="axis 0"):
        gluon.utils.split_data(mx.nd.array(dense).tostype("csr"), 2, batch_axis=1)


def test_hybridized_block_takes_csr_input():
    net = gluon.nn.Dense(2, in_units=3, use_bias=False)
    net.initialize(mx.init.One())
    net.hybridize()
    x = mx.nd.array([[1, 0, 2], [0, 0, 0]]).tostype("csr")
    for _ in range(2):
        with autograd.record():
            y = net(x)
        y.backward()
        np.testing.assert_array_equal(y.asnumpy(), [[3, 3], [0, 0]])
        np.testing.assert_array_equal(net.weight.grad().asnumpy(), [[1, 0, 2], [1, 0, 2]])


def test_set_data_reaches_the_kvstore():
    w = gluon.Parameter("w", shape=(3, 2), stype="row_sparse")
    w.initialize(mx.init.Zero())
    gluon.Trainer([w], "sgd")
    w.row_sparse_data(mx.nd.array([0]))       # the store now holds the weight
    w.set_data(mx.nd.ones((3, 2)))
    got = w.row_sparse_data(mx.nd.arange(0, 3))
    assert got.stype == "row_sparse"
    np.testing.assert_array_equal(got.asnumpy(), np.ones((3, 2)))


def test_grad_req_add_accumulates_sparse_rows():
    layer = gluon.nn.Embedding(10, 2, sparse_grad=True)
    layer.initialize()
    layer.weight.grad_req = "add"
    for rows in ([1, 2], [2, 6]):
        with autograd.record():
            layer(mx.nd.array(rows)).sum().backward()
    grad = layer.weight.grad()
    assert grad.stype == "row_sparse"
    assert grad.indices.asnumpy().tolist() == [1, 2, 6]
    np.testing.assert_array_equal(grad.asnumpy()[[1, 2, 6], 0], [1, 2, 1])
