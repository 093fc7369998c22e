"""Layer operators on Symbols create their left-out parameters as variables, as MXNet's do,
with the op's lr/wd multipliers and shapes inferred from the data."""
import numpy as np
import pytest

import minigluon as mx


def test_fully_connected_creates_weight_and_bias():
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc1")
    assert fc.list_arguments() == ["data", "fc1_weight", "fc1_bias"]
    no_bias = mx.sym.FullyConnected(data, num_hidden=3, no_bias=True, name="fc2")
    assert no_bias.list_arguments() == ["data", "fc2_weight"]


def test_a_left_out_required_input_becomes_a_variable_too():
    conv = mx.sym.Convolution(kernel=(3, 3), num_filter=4, name="c")
    assert conv.list_arguments() == ["c_data", "c_weight", "c_bias"]
    assert mx.sym.relu(name="r").list_arguments() == ["r_data"]
    # an optional input stays absent: SequenceMask's sequence_length
    assert mx.sym.SequenceMask(name="m").list_arguments() == ["m_data"]
    with mx.name.Prefix("net_"):
        assert mx.sym.relu(name="act").list_arguments() == ["net_act_data"]


def test_given_parameters_are_kept_and_only_missing_ones_created():
    data, bias = mx.sym.Variable("data"), mx.sym.Variable("b", lr_mult=2.0)
    fc = mx.sym.FullyConnected(data=data, bias=bias, num_hidden=3, name="fc", wd_mult=0.5)
    assert set(fc.list_arguments()) == {"data", "b", "fc_weight"}
    assert fc.attr_dict() == {"b": {"__lr_mult__": "2.0"}, "fc_weight": {"__wd_mult__": "0.5"}}


@pytest.mark.parametrize("build, data_shape, want", [
    (lambda d: mx.sym.FullyConnected(d, num_hidden=5, name="l"), (2, 3, 4),
     {"l_weight": (5, 12), "l_bias": (5,)}),
    (lambda d: mx.sym.FullyConnected(d, num_hidden=5, flatten=False, name="l"), (2, 3, 4),
     {"l_weight": (5, 4), "l_bias": (5,)}),
    (lambda d: mx.sym.Convolution(d, kernel=(3, 3), num_filter=6, num_group=2, name="l"),
     (1, 4, 8, 8), {"l_weight": (6, 2, 3, 3), "l_bias": (6,)}),
    (lambda d: mx.sym.BatchNorm(d, name="l"), (2, 3, 4, 4),
     {"l_gamma": (3,), "l_beta": (3,), "l_moving_mean": (3,), "l_moving_var": (3,)}),
    (lambda d: mx.sym.Embedding(d, input_dim=10, output_dim=4, name="l"), (2, 5),
     {"l_weight": (10, 4)}),
    (lambda d: mx.sym.LeakyReLU(d, act_type="prelu", name="l"), (2, 7), {"l_gamma": (7,)})])
def test_infer_shape_deduces_parameter_shapes(build, data_shape, want):
    sym = build(mx.sym.Variable("data"))
    arg_shapes, out_shapes, _ = sym.infer_shape(data=data_shape)
    shapes = dict(zip(sym.list_arguments(), arg_shapes))
    assert shapes == {"data": data_shape, **want}
    feed = {n: mx.nd.ones(s) for n, s in shapes.items()}
    assert [o.shape for o in sym.eval(**feed)] == out_shapes


def test_prelu_gamma_starts_at_a_quarter():
    sym = mx.sym.LeakyReLU(mx.sym.Variable("data"), act_type="prelu", name="act")
    attrs = sym.attr_dict()["act_gamma"]
    arr = mx.nd.zeros((4,))
    mx.init.Uniform()(mx.init.InitDesc("act_gamma", attrs), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.full(4, 0.25, np.float32))


def test_infer_shape_without_the_data_shape_gives_nones():
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2)
    assert sym.infer_shape() == (None, None, None)


def test_a_variable_without_any_shape_leaves_the_shapes_unknown():
    data = mx.sym.Variable("data")
    sym = mx.sym.FullyConnected(data, num_hidden=2, name="fc") + mx.sym.Variable("other")
    assert sym.infer_shape(data=(1, 3)) == (None, None, None)
