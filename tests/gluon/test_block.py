"""Block / HybridBlock / Parameter core: naming, deferred init, hybridize, save/load, export."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon, nd
from minigluon.base import ShapeError


class Affine(gluon.HybridBlock):
    """A small dense layer written only against the Block API (not gluon.nn)."""

    def __init__(self, units, in_units=0, **kwargs):
        super().__init__(**kwargs)
        self._units = units
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(units, in_units),
                                          allow_deferred_init=True)
            self.bias = self.params.get("bias", shape=(units,), init="zeros")

    def infer_shape(self, x):
        self.weight.shape = (self._units, x.shape[1])

    def hybrid_forward(self, F, x, weight, bias):
        return F.FullyConnected(x, weight, bias, num_hidden=self._units)


class TwoLayer(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.first = Affine(6)
            self.second = Affine(3)

    def hybrid_forward(self, F, x):
        h = F.tanh(self.first(x))
        return F.log_softmax(self.second(h)), h


def _net(seed=0):
    mx.random.seed(seed)
    net = TwoLayer(prefix="net_")
    net.initialize(mx.init.Xavier())
    return net


def test_prefixes_and_collect_params():
    net = TwoLayer(prefix="model_")
    names = list(net.collect_params().keys())
    assert names == ["model_affine0_weight", "model_affine0_bias",
                     "model_affine1_weight", "model_affine1_bias"]
    assert list(net.collect_params(".*bias").keys()) == names[1::2]
    assert "(first): Affine()" in repr(net)


def test_deferred_init_infers_shape_on_first_forward():
    net = _net()
    with pytest.raises(gluon.DeferredInitializationError, match="deferred"):
        net.first.weight.data()
    net(nd.ones((2, 5)))
    assert net.first.weight.shape == (6, 5)
    assert net.second.weight.shape == (3, 6)


def test_using_a_parameter_before_initialize_says_what_to_do():
    net = TwoLayer()
    with pytest.raises(mx.MXNetError, match="call net.initialize"):
        net.second.bias.data()


@pytest.mark.parametrize("training", [False, True])
def test_hybridized_outputs_and_gradients_are_identical(training):
    x = nd.random.uniform(shape=(4, 5))
    results = []
    for hybrid in (False, True):
        net = _net(seed=3)
        net.hybridize(hybrid)
        net(x)  # first call: deferred init (and the trace when hybridized)
        params = net.collect_params()
        with autograd.record(train_mode=training):
            out, hidden = net(x)
            loss = out.sum() + (hidden * hidden).sum()
        loss.backward()
        results.append([out.asnumpy(), hidden.asnumpy()] +
                       [p.grad().asnumpy() for p in params.values()])
    for plain, hybrid in zip(*results):
        np.testing.assert_array_equal(plain, hybrid)


def test_save_load_round_trip_and_errors(tmp_path):
    net = _net()
    x = nd.random.uniform(shape=(2, 5))
    ref = net(x)[0].asnumpy()
    path = str(tmp_path / "net.params")
    net.save_parameters(path)
    other = TwoLayer(prefix="elsewhere_")
    other.load_parameters(path)
    np.testing.assert_array_equal(other(x)[0].asnumpy(), ref)

    class Bigger(TwoLayer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.third = Affine(2)

    with pytest.raises(mx.MXNetError, match="missing from .*allow_missing=True"):
        Bigger().load_parameters(path)
    Bigger().load_parameters(path, allow_missing=True)

    class Smaller(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.first = Affine(6)

    with pytest.raises(mx.MXNetError, match="ignore_extra=True"):
        Smaller().load_parameters(path)
    Smaller().load_parameters(path, ignore_extra=True)

    class Wider(TwoLayer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.first = Affine(7, in_units=5)

    with pytest.raises(ShapeError, match=r"has shape \(6, 5\) but the block expects \(7, 5\)"):
        Wider().load_parameters(path)


def test_export_and_symbolblock_imports(tmp_path):
    net = _net()
    x = nd.random.uniform(shape=(3, 5))
    with pytest.raises(mx.MXNetError, match="hybridize"):
        net.export(str(tmp_path / "m"))
    net.hybridize()
    ref = net(x)
    sym_file, param_file = net.export(str(tmp_path / "m"), epoch=2)
    assert param_file.endswith("m-0002.params")
    block = gluon.SymbolBlock.imports(sym_file, ["data"], param_file)
    out = block(x)
    np.testing.assert_array_equal(out[0].asnumpy(), ref[0].asnumpy())
    np.testing.assert_array_equal(out[1].asnumpy(), ref[1].asnumpy())


def test_parameter_on_two_contexts_stays_in_sync():
    p = gluon.Parameter("w", shape=(2, 3), init=mx.init.Normal(1.0))
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    a, b = p.list_data()
    np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    assert a.context == mx.cpu(0) and b.context == mx.cpu(1)
    p.set_data(nd.ones((2, 3)))
    assert all((d.asnumpy() == 1).all() for d in p.list_data())
    with pytest.raises(mx.MXNetError, match=r"not initialized on cpu\(2\)"):
        p.data(mx.cpu(2))
    p.reset_ctx(mx.cpu(3))
    assert p.list_ctx() == [mx.cpu(3)]


def test_summary_and_hooks(capsys):
    net = _net()
    seen = []
    handle = net.first.register_forward_hook(lambda blk, inp, out: seen.append(out.shape))
    net.summary(nd.ones((2, 5)))
    printed = capsys.readouterr().out
    assert "Affine-1" in printed and "(2, 6)" in printed
    assert "Parameters in forward computation graph: 57" in printed
    assert seen == [(2, 6)]
    handle.detach()
    net(nd.ones((2, 5)))
    assert seen == [(2, 6)]


def test_summary_refuses_a_hybridized_block_before_running_it(capsys):
    net = _net()
    net(nd.ones((2, 5)))
    net.hybridize()
    calls = []
    net.first.register_forward_hook(lambda blk, inp, out: calls.append(1))
    with pytest.raises(AssertionError, match=r"must not be hybridized.*hybridize\(False\)"):
        net.summary(nd.ones((2, 5)))
    assert calls == [] and capsys.readouterr().out == ""   # nothing ran, nothing printed
    net.hybridize(False)
    net.summary(nd.ones((2, 5)))
    assert "Parameters in forward computation graph: 57" in capsys.readouterr().out


def test_hybridized_block_takes_nested_lists_of_inputs():
    class Mix(gluon.HybridBlock):
        def hybrid_forward(self, F, x, pair, last=None):
            out = x * pair[0] + pair[1]
            return out if last is None else (out, [out - last])

    block = Mix()
    x, a, b, c = (mx.nd.array(np.full((2, 3), v)) for v in (1.0, 2.0, 3.0, 4.0))
    plain = block(x, [a, b]).asnumpy(), block(x, [a, b], c)
    block.hybridize()
    for _ in range(2):                                     # trace, then replay
        np.testing.assert_array_equal(block(x, [a, b]).asnumpy(), plain[0])
        np.testing.assert_array_equal(block(x, [a, b], None).asnumpy(), plain[0])
    # the graph's inputs are fixed, as in MXNet: another layout is refused, not retraced
    with pytest.raises(ValueError, match=r"layout \(array, array, array, array\) differs "
                                         r"from .* \(array, array, array\).*hybridize\(\)"):
        block(x, [a, b], c)
    block.hybridize()                                      # traces anew
    for _ in range(2):
        out, rest = block(x, [a, b], c)
        np.testing.assert_array_equal(out.asnumpy(), plain[1][0].asnumpy())
        np.testing.assert_array_equal(rest[0].asnumpy(), plain[1][1][0].asnumpy())
    assert len(block._cached) == 1


def test_a_hybridized_net_holding_a_recurrent_layer_retraces_per_sequence_length():
    class Net(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.lstm = gluon.rnn.LSTM(4)
                self.dense = gluon.nn.Dense(2, flatten=False)

        def hybrid_forward(self, F, x):
            return self.dense(self.lstm(x))

    net = Net()
    net.initialize()
    inputs = [mx.nd.array(np.random.default_rng(t).standard_normal((t, 2, 3))) for t in (3, 5)]
    plain = [net(x).asnumpy() for x in inputs]
    net.hybridize()
    for _ in range(2):
        for x, want in zip(inputs, plain):
            np.testing.assert_array_equal(net(x).asnumpy(), want)
    assert len(net._cached) == 2


class _TwoDense(gluon.Block):
    def __init__(self, in_units=0, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense0 = gluon.nn.Dense(5, in_units=in_units)
            self.dense1 = gluon.nn.Dense(5, in_units=in_units)

    def forward(self, x):
        return self.dense1(self.dense0(x))


def test_a_net_built_on_another_nets_params_shares_its_children_weights():
    net1 = _TwoDense(prefix="sh1_", in_units=5)
    net2 = _TwoDense(prefix="sh2_", params=net1.collect_params())
    net1.initialize()
    assert net2.dense0.weight is net1.dense0.weight
    assert net2.dense1.bias is net1.dense1.bias
    x = nd.array(np.random.rand(3, 5))
    np.testing.assert_allclose(net2(x).asnumpy(), net1(x).asnumpy())
    assert net2.prefix == "sh2_" and net2.dense0.prefix == "sh2_dense0_"


def test_blocks_kept_in_a_plain_list_warn_when_params_are_collected():
    class Listed(gluon.Block):
        def __init__(self):
            super().__init__()
            self.layers = [gluon.nn.Dense(2), gluon.nn.Dense(3)]

    class Sequenced(gluon.Block):
        def __init__(self):
            super().__init__()
            self.layers = gluon.nn.Sequential()
            self.layers.add(gluon.nn.Dense(2))
            self.config = {"a": 1}

    with pytest.warns(UserWarning, match="layers is a list holding Blocks"):
        Listed().collect_params()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Sequenced().collect_params()


def test_replacing_a_child_block_by_a_non_block_is_a_type_error():
    b = gluon.Block()
    b.child = gluon.Block()
    with pytest.raises(TypeError, match="'child'.*from Block to tuple"):
        b.child = (2,)


def test_an_unknown_storage_type_is_refused_naming_it():
    with pytest.raises(AssertionError, match="stype must be one of.*got 'dense'"):
        gluon.Parameter("w", shape=(2,), stype="dense")
    with pytest.raises(mx.base.MXNetError, match="grad_stype.*got 'bad'"):
        gluon.Parameter("w", shape=(2,), grad_stype="bad")


class _Chain(gluon.Block):
    """Children keyed by their (counter-dependent) names, as MXNet's test_gluon_save does."""

    def add(self, block):
        self._children[block.name + str(len(self._children))] = block

    def forward(self, x):
        for block in self._children.values():
            x = block(x)
        return x


def _chain():
    inner = _Chain()
    inner.add(gluon.nn.Dense(4))
    net = _Chain()
    net.add(inner)
    net.add(gluon.nn.Dense(3))
    return net


def test_block_save_and_load_restore_child_keys_hybridization_and_values(tmp_path):
    net1 = _chain()
    net1.initialize()
    net1.hybridize()
    x = nd.array(np.random.rand(2, 5))
    out1 = net1(x)
    net1.save(str(tmp_path / "m"))
    net2 = _chain()              # other automatic names, so other child keys
    assert list(net2._children) != list(net1._children)
    net2.load(str(tmp_path / "m"))
    assert list(net2._children) == list(net1._children)
    dense = list(net2._children.values())[1]
    assert dense._active and dense.name == list(net1._children.values())[1].name
    np.testing.assert_allclose(net2(x).asnumpy(), out1.asnumpy(), rtol=1e-6)


def test_block_load_into_a_differently_built_model_says_what_differs(tmp_path):
    net = _chain()
    net.initialize()
    net(nd.ones((1, 5)))
    net.save(str(tmp_path / "m"))
    other = _Chain()
    other.add(gluon.nn.Dense(3))
    with pytest.raises(mx.base.MXNetError, match="saved as a _Chain with 2 children.*with 1"):
        other.load(str(tmp_path / "m"))


def test_adding_or_replacing_a_child_drops_the_traced_graph():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(4, flatten=False))
    net.hybridize()
    net.initialize()
    assert net(nd.ones((2, 3, 5))).shape == (2, 3, 4)
    net.add(gluon.nn.Flatten())
    assert net(nd.ones((2, 3, 5))).shape == (2, 12)


def test_top_level_np_shape_scope_and_deferred_init_inside_it():
    assert mx.np_shape is mx.util.np_shape and mx.use_np is mx.util.use_np
    net = gluon.nn.Dense(16)
    with mx.np_shape(True):
        assert mx.is_np_shape()
        net.initialize()
        assert net(nd.zeros((2, 7))).shape == (2, 16)
    assert not mx.is_np_shape()
    assert net.weight.shape == (16, 7)


def test_legacy_save_params_writes_full_names_that_a_symbolblock_loads(tmp_path):
    net = gluon.nn.HybridSequential(prefix="")
    with net.name_scope():
        net.add(gluon.nn.Dense(3, in_units=4))
        net.add(gluon.nn.Dense(2, in_units=3))
    net.initialize()
    x = nd.array(np.random.rand(5, 4))
    out = net(x)
    with pytest.warns(DeprecationWarning, match="use save_parameters"):
        net.save_params(str(tmp_path / "n.params"))
    assert sorted(nd.load(str(tmp_path / "n.params"))) == \
        sorted(net.collect_params().keys())
    model = gluon.SymbolBlock(net(mx.sym.var("data")), mx.sym.var("data"))
    with pytest.warns(DeprecationWarning):
        model.load_params(str(tmp_path / "n.params"), ctx=mx.cpu())
    np.testing.assert_allclose(model(x).asnumpy(), out.asnumpy(), rtol=1e-6)
    other = gluon.nn.HybridSequential(prefix="")
    with other.name_scope():
        other.add(gluon.nn.Dense(3, in_units=4))
    with pytest.raises(mx.base.MXNetError, match="holds parameters.*dense1_weight"):
        other.load_parameters(str(tmp_path / "n.params"))


class _AddAll(gluon.HybridBlock):
    def hybrid_forward(self, F, a, b=None):
        parts = [p for p in (a, b) if p is not None]
        parts = [sum(p) if isinstance(p, (list, tuple)) else p for p in parts]
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]


def test_hybrid_block_takes_none_lists_and_scalars_like_a_block_until_hybridized():
    ones = nd.ones((3,))
    f = _AddAll()
    np.testing.assert_allclose(f(None, ones).asnumpy(), np.ones(3))
    np.testing.assert_allclose(f([ones, ones], 2).asnumpy(), np.full(3, 4.0))
    f.hybridize()
    np.testing.assert_allclose(f(None, ones).asnumpy(), np.ones(3))
    np.testing.assert_allclose(f(None, ones).asnumpy(), np.ones(3))   # replayed graph
    with pytest.raises(ValueError, match=r"layout \(array, array, array\) differs"):
        f([ones, ones], ones)                    # the graph's inputs are fixed, as in MXNet
    f.hybridize()                                # ... until it is traced anew
    np.testing.assert_allclose(f([ones, ones], ones).asnumpy(), np.full(3, 3.0))
    with pytest.raises(ValueError, match="hybridized: its inputs must be NDArrays or None, "
                                         "got int 1"):
        f(ones, 1)
    with pytest.raises(ValueError, match=r"inputs on cpu\(1\) and cpu\(2\)"):
        f(nd.ones((3,), ctx=mx.cpu(1)), nd.ones((3,), ctx=mx.cpu(2)))


def test_hybrid_block_needs_an_array_and_refuses_mixed_arrays_and_symbols():
    f = _AddAll()
    with pytest.raises(ValueError, match="needs at least one NDArray or Symbol input, got "
                                         r"\['NoneType', 'NoneType'\]"):
        f(None, None)
    with pytest.raises(ValueError, match="mix NDArrays and Symbols"):
        f(nd.ones((3,)), mx.sym.var("a"))


def test_a_deduplicated_file_loads_back_into_every_name_of_a_shared_parameter(tmp_path):
    def build():
        net = gluon.nn.Sequential()
        first = gluon.nn.Dense(3, in_units=3)
        net.add(first, gluon.nn.Dense(3, in_units=3, params=first.collect_params()))
        return net
    net = build()
    net.initialize()
    assert net[1].weight is net[0].weight
    net.save_parameters(str(tmp_path / "d.params"), deduplicate=True)
    assert sorted(nd.load(str(tmp_path / "d.params"))) == ["0.bias", "0.weight"]
    other = build()
    other.load_parameters(str(tmp_path / "d.params"))
    np.testing.assert_array_equal(other[1].weight.data().asnumpy(),
                                  net[0].weight.data().asnumpy())
