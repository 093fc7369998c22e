"""Initializers: each scheme's values or statistics against its formula, suffix dispatch,
Mixed, creation by name, and reproducibility under mx.random.seed."""
import json

import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import MXNetError, ShapeError, UnknownNameError
from minigluon.initializer import InitDesc, InitializerError


def _filled(init, shape, name="fc_weight", dtype="float32"):
    arr = nd.zeros(shape, dtype=dtype)
    init(name, arr)
    return arr.asnumpy()


def test_init_desc_is_a_str_with_attrs():
    desc = InitDesc("conv0_weight", {"lr_mult": "2"})
    assert isinstance(desc, str) and desc == "conv0_weight"
    assert desc.attrs == {"lr_mult": "2"} and desc.global_init is None
    assert InitDesc("x").attrs == {}


@pytest.mark.parametrize("name, expected", [
    ("fc_bias", 0.0), ("bn_gamma", 1.0), ("bn_beta", 0.0), ("bn_moving_mean", 0.0),
    ("bn_moving_var", 1.0), ("bn_running_mean", 0.0), ("bn_running_var", 1.0),
    ("bn_moving_inv_var", 0.0), ("q_min", 0.0), ("q_max", 1.0)])
def test_suffix_dispatch_uses_neutral_values(name, expected):
    out = _filled(mx.init.Uniform(5.0), (7,), name)
    np.testing.assert_array_equal(out, np.full(7, expected, np.float32))


def test_weight_suffix_uses_the_scheme():
    out = _filled(mx.init.Constant(3.5), (2, 3), "dense0_weight")
    np.testing.assert_array_equal(out, np.full((2, 3), 3.5))


def test_unknown_suffix_names_the_parameter():
    with pytest.raises(InitializerError, match="'lstm_state'") as err:
        _filled(mx.init.Uniform(), (3,), "lstm_state")
    assert isinstance(err.value, MXNetError) and isinstance(err.value, ValueError)


def test_explicit_init_attr_overrides_the_suffix():
    arr = nd.zeros((4,))
    mx.init.Uniform()(InitDesc("fc_bias", {"__init__": "ones"}), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.ones(4))
    mx.init.Uniform()(InitDesc("fc_bias", {"__init__": mx.init.Constant(2.0)}), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.full(4, 2.0))
    desc = InitDesc("fc_weight")
    init = mx.init.Zero()
    init(desc, nd.ones((2, 2)))
    assert desc.global_init is init


def test_uniform_range_and_variance():
    out = _filled(mx.init.Uniform(0.5), (200, 250))
    assert out.min() >= -0.5 and out.max() <= 0.5
    assert abs(out.var() - 0.5 ** 2 / 3) < 0.003
    assert abs(out.mean()) < 0.005


def test_normal_std():
    out = _filled(mx.init.Normal(0.2), (200, 250))
    assert abs(out.std() - 0.2) < 0.003 and abs(out.mean()) < 0.003


@pytest.mark.parametrize("factor_type", ["avg", "in", "out"])
def test_xavier_uniform_bounds_and_variance_for_conv_weights(factor_type):
    shape = (64, 32, 3, 3)              # fan_in = 32*9, fan_out = 64*9
    fan = {"avg": (288 + 576) / 2, "in": 288, "out": 576}[factor_type]
    bound = np.sqrt(3 / fan)
    out = _filled(mx.init.Xavier(factor_type=factor_type, magnitude=3), shape, "conv_weight")
    assert out.min() >= -bound and out.max() <= bound
    assert out.max() > 0.99 * bound
    assert abs(out.var() / (bound ** 2 / 3) - 1) < 0.03


def test_xavier_gaussian_std():
    out = _filled(mx.init.Xavier("gaussian", "in", 2), (300, 400))
    assert abs(out.std() / np.sqrt(2 / 400) - 1) < 0.02


def test_xavier_rejects_vectors_and_bad_options():
    with pytest.raises(ShapeError, match="'fc_weight'.*at least 2"):
        _filled(mx.init.Xavier(), (5,))
    with pytest.raises(ValueError, match="rnd_type"):
        mx.init.Xavier(rnd_type="bogus")
    with pytest.raises(ValueError, match="factor_type"):
        mx.init.Xavier(factor_type="both")


def test_msraprelu_is_gaussian_xavier_with_prelu_magnitude():
    init = mx.init.MSRAPrelu(factor_type="in", slope=0.5)
    assert init.magnitude == pytest.approx(2 / 1.25)
    out = _filled(init, (300, 500))
    assert abs(out.std() / np.sqrt(1.6 / 500) - 1) < 0.02
    assert json.loads(init.dumps()) == ["msraprelu", {"factor_type": "in", "slope": 0.5}]


@pytest.mark.parametrize("shape, rand_type", [((4, 9), "uniform"), ((6, 2, 3), "normal"),
                                              ((9, 4), "uniform")])
def test_orthogonal_rows_or_columns_are_orthonormal(shape, rand_type):
    out = _filled(mx.init.Orthogonal(scale=2.0, rand_type=rand_type), shape)
    flat = out.reshape(shape[0], -1).astype(np.float64) / 2.0
    gram = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
    np.testing.assert_allclose(gram, np.eye(len(gram)), atol=1e-5)


def test_constant_zero_one_and_arrays():
    np.testing.assert_array_equal(_filled(mx.init.Zero(), (2, 2)), np.zeros((2, 2)))
    np.testing.assert_array_equal(_filled(mx.init.One(), (2, 2)), np.ones((2, 2)))
    row = nd.array([1, 2, 3])
    np.testing.assert_array_equal(_filled(mx.init.Constant(row), (2, 3)), [[1, 2, 3]] * 2)
    assert json.loads(mx.init.Constant(row).dumps()) == ["constant", {"value": [1, 2, 3]}]


def test_lstm_bias_sets_the_forget_gate_block():
    out = _filled(mx.init.LSTMBias(forget_bias=2.0), (8,), "lstm_i2h_bias")
    np.testing.assert_array_equal(out, [0, 0, 2, 2, 0, 0, 0, 0])


def test_bilinear_kernel_matches_formula():
    out = _filled(mx.init.Bilinear(), (1, 1, 4, 4), "up_weight")
    f, c = 2.0, (2 * 2.0 - 1 - 2.0 % 2) / (2 * 2.0)
    ramp = 1 - np.abs(np.arange(4) / f - c)
    np.testing.assert_allclose(out[0, 0], np.outer(ramp, ramp), rtol=1e-6)


def test_mixed_first_matching_pattern_wins():
    init = mx.init.Mixed(["conv.*", "fc.*", ".*"],
                         [mx.init.Constant(1.0), "zeros", mx.init.Constant(7.0)])
    assert _filled(init, (2, 2), "conv_weight")[0, 0] == 1.0
    assert _filled(init, (2, 2), "fc_conv_weight")[0, 0] == 0.0   # match() is anchored
    assert _filled(init, (2, 2), "out_weight")[0, 0] == 7.0
    assert _filled(init, (2,), "conv_bias")[0] == 0.0   # the chosen one still uses suffixes


def test_mixed_without_a_match_names_parameter_and_patterns():
    init = mx.init.Mixed(["conv.*"], [mx.init.Zero()])
    with pytest.raises(InitializerError, match=r"'fc_weight'.*\['conv\.\*'\]"):
        _filled(init, (2, 2), "fc_weight")
    with pytest.raises(ValueError, match="one initializer per pattern"):
        mx.init.Mixed(["a", "b"], [mx.init.Zero()])


def test_load_copies_by_name_and_falls_back(tmp_path):
    saved = {"arg:fc_weight": nd.array([[1, 2], [3, 4]])}
    nd.save(str(tmp_path / "p.params"), saved)
    init = mx.init.Load(str(tmp_path / "p.params"), default_init=mx.init.One())
    np.testing.assert_array_equal(_filled(init, (2, 2)), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(_filled(init, (3,), "fc_bias"), np.zeros(3))
    with pytest.raises(ShapeError, match="'fc_weight'"):
        _filled(init, (3, 2))
    with pytest.raises(InitializerError, match="'other_weight'"):
        _filled(mx.init.Load(saved), (2,), "other_weight")


def test_create_by_name_alias_instance_and_dumps():
    assert isinstance(mx.init.create("Xavier", magnitude=2), mx.init.Xavier)
    assert isinstance(mx.init.create("zeros"), mx.init.Zero)
    assert isinstance(mx.initializer.create("ones"), mx.init.One)
    init = mx.init.Normal(0.3)
    assert mx.init.create(init) is init
    again = mx.init.create(init.dumps())
    assert isinstance(again, mx.init.Normal) and again.sigma == 0.3
    with pytest.raises(UnknownNameError, match="unknown initializer 'glorot'.*xavier"):
        mx.init.create("glorot")


def test_register_makes_a_custom_initializer_creatable():
    @mx.init.register
    class Twos(mx.init.Initializer):
        def _init_weight(self, _, arr):
            arr[:] = 2.0

    np.testing.assert_array_equal(_filled(mx.init.create("twos"), (2,)), [2, 2])


def test_seed_makes_initialization_repeatable():
    def draw():
        mx.random.seed(7)
        return [_filled(mx.init.Xavier(), (5, 6)), _filled(mx.init.Orthogonal(), (4, 4)),
                _filled(mx.init.Normal(), (3,), "w_weight")]

    first, second = draw(), draw()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], _filled(mx.init.Xavier(), (5, 6)))


def test_initializes_in_place_keeping_dtype_and_identity():
    arr = nd.zeros((10, 10), dtype="float16")
    buffer = arr._data
    mx.init.Uniform(1.0)("w_weight", arr)
    assert arr._data is buffer and arr.dtype == np.float16
    assert np.abs(arr.asnumpy()).max() > 0


def test_constant_of_an_ndarray_dumps_plain_json_and_round_trips():
    value = mx.nd.array([[1.0, 2.0], [3.0, 4.0]])
    init = mx.init.Constant(value)
    assert init._kwargs == {"value": [[1.0, 2.0], [3.0, 4.0]]}
    assert init.dumps() == json.dumps(["constant", init._kwargs])
    again = mx.init.create(init.dumps())
    np.testing.assert_array_equal(_filled(again, (2, 2)), value.asnumpy())
    assert mx.init.Constant(1).dumps() == '["constant", {"value": 1}]'


def test_initializers_are_equal_by_class_and_settings_and_hash_alike():
    assert mx.init.Constant(-10.0) == mx.init.Constant(-10.0)
    assert hash(mx.init.Constant(-10.0)) == hash(mx.init.Constant(-10.0))
    assert mx.init.Constant(-10.0) != mx.init.Constant(3.0)
    assert mx.init.Xavier(magnitude=2) == mx.init.Xavier(magnitude=2)
    assert mx.init.Xavier(magnitude=2) != mx.init.Xavier(magnitude=3)
    # same settings, other class: not equal (Zero and One both have no settings)
    assert mx.init.Zero() != mx.init.One()
    assert mx.init.Constant([[1, 2]]) == mx.init.Constant(mx.nd.array([[1, 2]]))
    assert len({mx.init.Uniform(0.1), mx.init.Uniform(0.1), mx.init.Normal(0.1)}) == 2
    assert mx.init.Zero() != "zeros"
    mixed = mx.init.Mixed([".*"], [mx.init.Zero()])
    assert mixed == mx.init.Mixed([".*"], [mx.init.Zero()])
    assert mixed != mx.init.Mixed([".*"], [mx.init.One()])


def test_load_initializers_equal_only_when_sharing_their_arrays():
    params = {"w": nd.ones((2,))}
    assert mx.init.Load(params) == mx.init.Load(params)
    assert mx.init.Load(params) != mx.init.Load({"w": nd.ones((2,))})


def test_separately_declared_parameters_with_one_initializer_compare_equal():
    class Block(mx.gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.param = self.params.get("param", shape=(1,),
                                             init=mx.init.Constant(-10.0))

    first, second = Block(), Block()
    assert first.param is not second.param
    assert first.param.init == second.param.init
