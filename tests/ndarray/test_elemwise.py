"""Oracle tests for ops_elemwise: forward against NumPy formulas, backward against float64
finite differences, broadcasting, scalar operands on either side, and dtype rules."""
import math

import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.base import DTypeError, MXNetError, ShapeError

from gradcheck import check_close, check_grad, pos, rand

_erf = np.vectorize(math.erf)

# name -> (NumPy formula, input sampler)
UNARY = {
    "negative": (lambda x: -x, rand),
    "reciprocal": (lambda x: 1 / x, rand),
    "abs": (np.abs, rand),
    "sign": (np.sign, rand),
    "exp": (np.exp, rand),
    "expm1": (np.expm1, rand),
    "log": (np.log, pos),
    "log1p": (np.log1p, pos),
    "log2": (np.log2, pos),
    "log10": (np.log10, pos),
    "sqrt": (np.sqrt, pos),
    "rsqrt": (lambda x: 1 / np.sqrt(x), pos),
    "cbrt": (np.cbrt, rand),
    "square": (np.square, rand),
    "relu": (lambda x: np.maximum(x, 0), rand),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), rand),
    "tanh": (np.tanh, rand),
    "softrelu": (lambda x: np.log(1 + np.exp(x)), rand),
    "softplus": (lambda x: np.log(1 + np.exp(x)), rand),
    "softsign": (lambda x: x / (1 + np.abs(x)), rand),
    "erf": (_erf, rand),
    "sin": (np.sin, rand),
    "cos": (np.cos, rand),
    "tan": (np.tan, rand),
    "arctan": (np.arctan, rand),
    "sinh": (np.sinh, rand),
    "cosh": (np.cosh, rand),
    "floor": (np.floor, rand),
    "ceil": (np.ceil, rand),
    "rint": (np.rint, rand),
    "trunc": (np.trunc, rand),
    "fix": (np.fix, rand),
    "round": (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), rand),
    "identity": (lambda x: x, rand),
    "_copy": (lambda x: x, rand),
    "copy": (lambda x: x, rand),
}
SHAPES = [(5,), (2, 3), (1, 3, 1), ()]


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward(name):
    formula, sample = UNARY[name]
    for shape in SHAPES:
        x = sample(*shape, seed=len(shape)).astype(np.float32)
        out = getattr(nd, name)(nd.array(x))
        assert out.dtype == np.float32
        check_close(out, formula(x.astype(np.float64)), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_backward(name):
    formula, sample = UNARY[name]
    check_grad(getattr(nd, name), sample(2, 3, seed=4), rtol=1e-5, atol=1e-6)


def test_unary_methods_match_functions():
    x = nd.array(pos(2, 3))
    for name in ("exp", "log", "sqrt", "relu", "sigmoid", "tanh", "abs", "floor", "round"):
        check_close(getattr(x, name)(), getattr(nd, name)(x).asnumpy())


def test_round_halves_away_from_zero():
    x = nd.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5])
    check_close(nd.round(x), [-3, -2, -1, 1, 2, 3])
    check_close(nd.rint(x), np.rint(x.asnumpy()))
    check_close(nd.fix(x), [-2, -1, 0, 0, 1, 2])


def test_unary_keeps_integer_and_half_dtypes():
    xi = nd.array([-2, 0, 3], dtype="int32")
    assert nd.abs(xi).dtype == np.int32
    check_close(nd.abs(xi), [2, 0, 3])
    check_close(nd.square(xi), [4, 0, 9])
    xh = nd.array([0.5, 1.0], dtype="float16")
    assert nd.exp(xh).dtype == np.float16
    check_close(nd.exp(xh), np.exp([0.5, 1.0]), rtol=1e-3)


def test_logical_not_zeros_like_ones_like():
    x = nd.array([[0, 2], [-1, 0]])
    check_close(nd.logical_not(x), [[1, 0], [0, 1]])
    assert nd.logical_not(x).dtype == np.float32
    check_close(nd.zeros_like(x), np.zeros((2, 2)))
    check_close(nd.ones_like(x), np.ones((2, 2)))
    assert nd.zeros_like(nd.ones((3,), dtype="int32")).dtype == np.int32
    check_close(x.zeros_like(), np.zeros((2, 2)))
    check_close(x.ones_like(), np.ones((2, 2)))


def test_block_grad_stops_the_gradient():
    x = nd.array([1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = nd.BlockGrad(x) * x + nd.stop_gradient(x)
    y.backward()
    check_close(x.grad, [1, 2, 3])
    check_close(nd.BlockGrad(x), [1, 2, 3])


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32", "uint8", "int64"])
def test_cast_forward_and_gradient_dtype(dtype):
    x = nd.array([[1.7, 2.2], [0.0, 3.9]])
    x.attach_grad()
    with autograd.record():
        y = nd.cast(x, dtype=dtype)
        z = x.astype(dtype)
    assert y.dtype == np.dtype(dtype).type and z.dtype == y.dtype
    check_close(y, x.asnumpy().astype(dtype))
    if np.dtype(dtype).kind == "f":
        with autograd.record():
            w = nd.Cast(x, dtype=dtype) * 3
        w.backward()
        assert x.grad.dtype == np.float32
        check_close(x.grad, np.full((2, 2), 3.0))


def test_astype_copy_false_returns_self():
    x = nd.ones((2,))
    assert x.astype("float32", copy=False) is x
    assert x.astype("float32") is not x


# ---- binary -------------------------------------------------------------------------
BINARY = {
    "add": (np.add, rand, rand),
    "subtract": (np.subtract, rand, rand),
    "multiply": (np.multiply, rand, rand),
    "divide": (np.divide, rand, rand),
    "modulo": (np.mod, rand, rand),
    "power": (np.power, pos, rand),
    "maximum": (np.maximum, rand, rand),
    "minimum": (np.minimum, rand, rand),
    "hypot": (np.hypot, rand, rand),
}
ALIASES = {
    "add": ["broadcast_add", "broadcast_plus", "elemwise_add", "_plus", "plus"],
    "subtract": ["broadcast_sub", "broadcast_minus", "elemwise_sub", "_minus", "minus"],
    "multiply": ["broadcast_mul", "elemwise_mul", "_mul"],
    "divide": ["broadcast_div", "elemwise_div", "_div", "true_divide"],
    "modulo": ["broadcast_mod", "mod"],
    "power": ["broadcast_power", "pow"],
    "maximum": ["broadcast_maximum"],
    "minimum": ["broadcast_minimum"],
    "hypot": ["broadcast_hypot"],
}
PAIRS = [((2, 3), (2, 3)), ((2, 1, 3), (4, 1)), ((3,), (2, 1)), ((1,), (2, 3)), ((), (2,)),
         ((2, 3), ())]


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_forward_broadcasts(name):
    formula, sample_l, sample_r = BINARY[name]
    for ls, rs in PAIRS:
        l = sample_l(*ls, seed=1).astype(np.float32)
        r = sample_r(*rs, seed=2).astype(np.float32)
        for fn in [getattr(nd, name)] + [getattr(nd, a) for a in ALIASES[name]]:
            out = fn(nd.array(l), nd.array(r))
            assert out.dtype == np.float32
            check_close(out, formula(l.astype(np.float64), r.astype(np.float64)),
                        rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 1, 3), (4, 1)), ((), (3,))])
def test_binary_backward(name, shapes):
    _, sample_l, sample_r = BINARY[name]
    l, r = sample_l(*shapes[0], seed=5), sample_r(*shapes[1], seed=6)
    if name == "modulo":   # stay away from the jumps of mod
        l, r = np.full(shapes[0], 2.3) + l * 0.1, np.full(shapes[1], 0.9) + r * 0.1
    check_grad(getattr(nd, name), l, r)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_scalar_on_either_side(name):
    formula, sample_l, _ = BINARY[name]
    x = sample_l(2, 3, seed=3).astype(np.float32)
    xd = x.astype(np.float64)
    for s in (2, 0.5):
        right = getattr(nd, name)(nd.array(x), s)
        left = getattr(nd, name)(s, nd.array(x))
        assert right.dtype == left.dtype == np.float32
        check_close(right, formula(xd, s), rtol=1e-5, atol=1e-5)
        check_close(left, formula(s, xd), rtol=1e-5, atol=1e-5)
    check_grad(lambda a: getattr(nd, name)(a, 1.7), sample_l(2, 3, seed=7))
    check_grad(lambda a: getattr(nd, name)(3.1, a), pos(2, 3, seed=7))


def test_reflected_python_operators():
    x = pos(2, 3)
    a = nd.array(x)
    xd = x.astype(np.float32).astype(np.float64)
    for got, want in [(a + 2, xd + 2), (2 + a, 2 + xd), (a - 2, xd - 2), (2 - a, 2 - xd),
                      (a * 2, xd * 2), (2 * a, 2 * xd), (a / 2, xd / 2), (2 / a, 2 / xd),
                      (a ** 2, xd ** 2), (2 ** a, 2 ** xd), (a % 0.7, np.mod(xd, 0.7)),
                      (3 % a, np.mod(3, xd)), (-a, -xd), (abs(-a), xd), (+a, xd),
                      (np.float32(2) - a, 2 - xd), (a + a, 2 * xd)]:
        assert got.dtype == np.float32
        check_close(got, want, rtol=1e-5, atol=1e-5)
    check_grad(lambda t: 2 - t, rand(3))
    check_grad(lambda t: 2 / t, rand(3))
    check_grad(lambda t: 2 ** t, rand(3))
    check_grad(lambda t: t ** 3, rand(3))
    check_grad(lambda t: 1 - t / 2 + 3 * t, rand(3))


def test_scalar_operands_keep_the_array_dtype():
    xi = nd.array([1, 2, 3], dtype="int32")
    for out in (xi + 2, 2 + xi, xi * 3, xi - 1, 10 - xi, xi ** 2, xi % 2):
        assert out.dtype == np.int32
    check_close(10 - xi, [9, 8, 7])
    xh = nd.array([1, 2], dtype="float16")
    assert (xh * 2.5).dtype == np.float16 and (2.5 / xh).dtype == np.float16
    xd = nd.array([1, 2], dtype="float64")
    assert (xd + 1).dtype == np.float64


COMPARISONS = {
    "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "lesser": np.less, "lesser_equal": np.less_equal,
    "logical_and": lambda l, r: (l != 0) & (r != 0),
    "logical_or": lambda l, r: (l != 0) | (r != 0),
    "logical_xor": lambda l, r: (l != 0) ^ (r != 0),
}


@pytest.mark.parametrize("name", sorted(COMPARISONS))
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_comparisons_return_input_dtype(name, dtype):
    l = np.array([[0, 1, 2], [3, 0, 1]])
    r = np.array([[1], [0]])
    for fn in (getattr(nd, name), getattr(nd, "broadcast_" + name)):
        out = fn(nd.array(l, dtype=dtype), nd.array(r, dtype=dtype))
        assert out.dtype == np.dtype(dtype).type
        check_close(out, COMPARISONS[name](l, r).astype(dtype))
        out = fn(nd.array(l, dtype=dtype), 1)
        check_close(out, COMPARISONS[name](l, 1).astype(dtype))
        out = fn(1, nd.array(l, dtype=dtype))
        check_close(out, COMPARISONS[name](1, l).astype(dtype))


def test_comparison_operators_and_no_gradient():
    x = nd.array([-1.0, 0.5, 2.0])
    y = nd.array([0.0, 0.5, 1.0])
    check_close(x == y, [0, 1, 0])
    check_close(x != y, [1, 0, 1])
    check_close(x > y, [0, 0, 1])
    check_close(x >= y, [0, 1, 1])
    check_close(x < y, [1, 0, 0])
    check_close(x <= y, [1, 1, 0])
    check_close(x > 0, [0, 1, 1])
    check_close(0 < x, [0, 1, 1])
    assert (x == None) is False and (x != None) is True  # noqa: E711
    x.attach_grad()
    with autograd.record():
        z = (x > 0) * x
    z.backward()
    check_close(x.grad, [0, 1, 1])


def test_binary_mixed_dtypes_raise():
    a, b = nd.ones((2, 3)), nd.ones((2, 3), dtype="float64")
    for fn in (nd.add, nd.multiply, nd.greater, nd.maximum, lambda p, q: p - q):
        with pytest.raises(DTypeError) as err:
            fn(a, b)
        assert "float32" in str(err.value) and "float64" in str(err.value)
    with pytest.raises(MXNetError, match="add"):
        a + b


def test_binary_incompatible_broadcast_raises():
    with pytest.raises(ShapeError) as err:
        nd.add(nd.ones((2, 3)), nd.ones((4,)))
    msg = str(err.value)
    assert "add" in msg and "(2, 3)" in msg and "(4,)" in msg
    with pytest.raises(MXNetError, match="multiply"):
        nd.ones((2, 1, 3)) * nd.ones((4, 2))


# ---- add_n, clip, where -------------------------------------------------------------
def test_broadcast_names_drop_attributes_they_do_not_take_as_mxnet():
    """MXNet's broadcast_* operators have no attribute parser, so its own test_cosine_loss
    calls nd.broadcast_maximum(zero, x, axis=1) and the axis is ignored. The plain names
    (nd.maximum, ...) are MXNet Python functions with a fixed signature and still refuse."""
    a, b = nd.array([[1.0, -2.0], [3.0, 0.5]]), nd.array([0.0])
    a.attach_grad()
    with autograd.record():
        out = nd.broadcast_maximum(b, a, axis=1)
    out.backward()
    np.testing.assert_array_equal(out.asnumpy(), [[1.0, 0.0], [3.0, 0.5]])
    np.testing.assert_array_equal(a.grad.asnumpy(), [[1.0, 0.0], [1.0, 1.0]])
    assert out._node.op_name == "maximum"       # the same op as nd.maximum on the tape
    assert out._node.call[3] == {}              # the dropped axis is not recorded
    np.testing.assert_array_equal(nd.broadcast_add(a, b, axis=0, foo="x").asnumpy(),
                                  a.asnumpy())
    with pytest.raises(MXNetError, match=r"maximum: bad arguments .*'axis'"):
        nd.maximum(b, a, axis=1)
    with pytest.raises(MXNetError, match=r"add: bad arguments .*'axis'"):
        nd.elemwise_add(a, a, axis=1)
    with pytest.raises(MXNetError, match="too many positional"):
        __import__("minigluon").sym.broadcast_add(a, b, 1)


def test_add_n():
    xs = [rand(2, 3, seed=i) for i in range(3)]
    check_close(nd.add_n(*[nd.array(x) for x in xs]), sum(xs), rtol=1e-5)
    check_close(nd.ElementWiseSum(*[nd.array(x) for x in xs]), sum(xs), rtol=1e-5)
    check_grad(lambda a, b, c: nd.add_n(a, b, c), *xs)
    check_grad(lambda a: nd.add_n(a, a), xs[0])
    with pytest.raises(ShapeError, match="add_n"):
        nd.add_n(nd.ones((2,)), nd.ones((3,)))


def test_add_n_mixed_dtypes_raise():
    with pytest.raises(DTypeError, match="add_n"):
        nd.add_n(nd.ones((2,)), nd.ones((2,), dtype="float64"))


def test_clip():
    x = rand(3, 4)
    check_close(nd.clip(nd.array(x), -0.5, 0.8), np.clip(x, -0.5, 0.8))
    check_close(nd.array(x).clip(-0.5, 0.8), np.clip(x, -0.5, 0.8))
    check_grad(lambda a: nd.clip(a, -0.5, 0.8), x)
    xi = nd.array([-5, 0, 5], dtype="int32")
    assert nd.clip(xi, -1, 2).dtype == np.int32
    check_close(nd.clip(xi, -1, 2), [-1, 0, 2])
    with pytest.raises(MXNetError, match="clip"):
        nd.clip(nd.array(x), 1, 0)


def test_where():
    cond = np.array([[1, 0, 1], [0, 0, 2]], dtype=np.float32)
    x, y = rand(2, 3, seed=1), rand(2, 3, seed=2)
    check_close(nd.where(nd.array(cond), nd.array(x), nd.array(y)), np.where(cond != 0, x, y))
    check_grad(lambda a, b: nd.where(nd.array(cond, dtype="float64"), a, b), x, y)
    row = np.array([0, 3], dtype=np.float32)   # 1-D condition selects whole rows
    check_close(nd.where(nd.array(row), nd.array(x), nd.array(y)),
                np.where(row[:, None] != 0, x, y))
    check_grad(lambda a, b: nd.where(nd.array(row, dtype="float64"), a, b), x, y)
    with pytest.raises(ShapeError, match="where"):
        nd.where(nd.ones((3,)), nd.ones((2, 3)), nd.ones((2, 3)))
    with pytest.raises(ShapeError, match="where"):
        nd.where(nd.ones((2, 3)), nd.ones((2, 3)), nd.ones((3, 2)))
    with pytest.raises(DTypeError, match="where"):
        nd.where(nd.ones((2,)), nd.ones((2,)), nd.ones((2,), dtype="float64"))


# ---- activations --------------------------------------------------------------------
_SELU = (1.6732632423543772, 1.0507009873554805)
LEAKY = {
    "leaky": lambda x, s: np.where(x > 0, x, s * x),
    "elu": lambda x, s: np.where(x > 0, x, s * (np.exp(x) - 1)),
    "selu": lambda x, s: _SELU[1] * np.where(x > 0, x, _SELU[0] * (np.exp(x) - 1)),
    "gelu": lambda x, s: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
}


@pytest.mark.parametrize("act", sorted(LEAKY))
def test_leaky_relu_family(act):
    x = rand(2, 3, 4)
    for slope in (0.25, 0.1):
        out = nd.LeakyReLU(nd.array(x), act_type=act, slope=slope)
        check_close(out, LEAKY[act](x, slope), rtol=1e-5, atol=1e-6)
        check_grad(lambda a: nd.LeakyReLU(a, act_type=act, slope=slope), x, rtol=1e-4,
                   atol=1e-6)


def test_prelu_per_channel_and_shared_gamma():
    x = rand(2, 3, 4)
    gamma = np.array([0.1, 0.3, 0.7])
    out = nd.LeakyReLU(nd.array(x), nd.array(gamma), act_type="prelu")
    check_close(out, np.where(x > 0, x, x * gamma[None, :, None]))
    check_grad(lambda a, g: nd.LeakyReLU(a, g, act_type="prelu"), x, gamma)
    shared = np.array([0.2])
    check_close(nd.LeakyReLU(nd.array(x), nd.array(shared), act_type="prelu"),
                np.where(x > 0, x, 0.2 * x))
    check_grad(lambda a, g: nd.LeakyReLU(a, g, act_type="prelu"), x, shared)
    with pytest.raises(MXNetError, match="prelu"):
        nd.LeakyReLU(nd.array(x), act_type="prelu")
    with pytest.raises(MXNetError, match="act_type"):
        nd.LeakyReLU(nd.array(x), act_type="nope")


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softrelu", "softsign"])
def test_activation_matches_unary(act):
    x = rand(3, 4)
    check_close(nd.Activation(nd.array(x), act_type=act), UNARY[act][0](x), rtol=1e-5)
    check_grad(lambda a: nd.Activation(a, act_type=act), x)


def test_activation_unknown_type():
    with pytest.raises(MXNetError, match="Activation"):
        nd.Activation(nd.ones((2,)), act_type="swish9")


@pytest.mark.parametrize("scalar", [1.0, 2.0, 0.7])
def test_smooth_l1(scalar):
    s2 = scalar ** 2
    x = rand(4, 5, low=0.05, high=3.0)
    x = x[np.abs(np.abs(x) - 1 / s2) > 1e-3].reshape(-1)   # avoid the seam
    want = np.where(np.abs(x) < 1 / s2, 0.5 * s2 * x ** 2, np.abs(x) - 0.5 / s2)
    check_close(nd.smooth_l1(nd.array(x), scalar=scalar), want, rtol=1e-5)
    check_grad(lambda a: nd.smooth_l1(a, scalar=scalar), x)
