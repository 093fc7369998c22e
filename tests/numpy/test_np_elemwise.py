"""Oracle tests for mx.np's element-wise functions: values against NumPy over several shapes
and dtypes, minigluon's dtype promotion rule, bool comparisons, and gradients by finite
differences."""
import numpy as onp
import pytest

from minigluon import np
from gradcheck import check_grad, pos, rand
from nphelpers import check_np

SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 1, 4), (3, 1)), ((), (2, 2))]

BINARY = {   # name -> NumPy function
    "add": onp.add, "subtract": onp.subtract, "multiply": onp.multiply,
    "divide": onp.divide, "power": onp.power, "mod": onp.mod,
    "maximum": onp.maximum, "minimum": onp.minimum,
}
COMPARE = {"equal": onp.equal, "not_equal": onp.not_equal, "greater": onp.greater,
           "greater_equal": onp.greater_equal, "less": onp.less, "less_equal": onp.less_equal}


def _operand(shape, dtype, seed):
    rng = onp.random.default_rng(seed)
    if onp.dtype(dtype).kind == "f":
        return rng.uniform(0.5, 2.0, shape).astype(dtype)
    return rng.integers(1, 4, shape).astype(dtype)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary_float32_matches_numpy(name, shapes):
    a, b = _operand(shapes[0], "float32", 0), _operand(shapes[1], "float32", 1)
    check_np(getattr(np, name)(np.array(a), np.array(b)), BINARY[name](a, b), rtol=1e-5)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_int32_keeps_int32_except_divide(name):
    a, b = _operand((2, 3), "int32", 0), _operand((3,), "int32", 1)
    want = BINARY[name](a, b)
    check_np(getattr(np, name)(np.array(a), np.array(b)), want,
             dtype="float32" if name == "divide" else "int32")


@pytest.mark.parametrize("left,right,dtype", [
    ("int32", "float32", "float32"),     # MXNet: the float operand's dtype, not float64
    ("float32", "float64", "float64"),   # NumPy's promotion between floats
    ("int32", "int64", "int64"),
    ("bool", "float32", "float32"),
])
def test_mixed_dtypes_promote(left, right, dtype):
    a, b = _operand((2, 2), left, 0), _operand((2, 2), right, 1)
    check_np(np.array(a) * np.array(b), a.astype(dtype) * b.astype(dtype), dtype=dtype)
    check_np(np.array(b) + np.array(a), b.astype(dtype) + a.astype(dtype), dtype=dtype)


@pytest.mark.parametrize("dtype,scalar,want", [
    ("float32", 2, "float32"), ("float32", 2.5, "float32"), ("int32", 3, "int32"),
    ("int32", 0.5, "float32"), ("bool", 2, "int64"),
])
def test_python_scalars_are_weak(dtype, scalar, want):
    a = _operand((3,), dtype, 0)
    x = np.array(a)
    check_np(x * scalar, a.astype(want) * scalar, dtype=want)
    check_np(scalar - x, scalar - a.astype(want), dtype=want)


def test_two_scalars_give_an_array():
    check_np(np.add(1, 2), onp.float32(3))


@pytest.mark.parametrize("name", sorted(COMPARE))
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int64", "float32")])
def test_comparisons_give_bool(name, dtypes):
    a = onp.array([[1, 2, 3], [3, 2, 1]]).astype(dtypes[0])
    b = onp.array([2, 2, 2]).astype(dtypes[1])
    got = getattr(np, name)(np.array(a), np.array(b))
    check_np(got, COMPARE[name](a, b), dtype="bool")
    op = {"equal": "__eq__", "not_equal": "__ne__", "greater": "__gt__",
          "greater_equal": "__ge__", "less": "__lt__", "less_equal": "__le__"}[name]
    check_np(getattr(np.array(a), op)(2), COMPARE[name](a, 2), dtype="bool")


FLOAT_UNARY = {"exp": onp.exp, "expm1": onp.expm1, "log": onp.log, "log1p": onp.log1p,
               "log2": onp.log2, "log10": onp.log10, "sqrt": onp.sqrt, "cbrt": onp.cbrt,
               "sin": onp.sin, "cos": onp.cos, "tan": onp.tan, "arctan": onp.arctan,
               "sinh": onp.sinh, "cosh": onp.cosh, "tanh": onp.tanh}
SAME_UNARY = {"negative": onp.negative, "abs": onp.abs, "absolute": onp.absolute,
              "sign": onp.sign, "square": onp.square, "floor": onp.floor, "ceil": onp.ceil,
              "trunc": onp.trunc, "fix": onp.fix, "rint": onp.rint}


@pytest.mark.parametrize("name", sorted(FLOAT_UNARY))
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_float_unary_matches_numpy(name, shape):
    a = pos(*shape).astype("float32") if shape else onp.float32(1.25)
    check_np(getattr(np, name)(np.array(a)), FLOAT_UNARY[name](a), rtol=1e-5)


@pytest.mark.parametrize("name", sorted(FLOAT_UNARY))
def test_float_unary_of_integers_is_float32(name):
    a = onp.array([1, 2, 3], dtype="int32")
    check_np(getattr(np, name)(np.array(a)), FLOAT_UNARY[name](a.astype("float64")),
             dtype="float32", rtol=1e-5)


@pytest.mark.parametrize("name", sorted(SAME_UNARY))
def test_same_dtype_unary_matches_numpy(name):
    a = (rand(2, 3) * 3).astype("float32")
    check_np(getattr(np, name)(np.array(a)), SAME_UNARY[name](a))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum",
                                  "minimum"])
def test_binary_gradients(name):
    check_grad(lambda a, b: getattr(np, name)(a, b), rand(2, 3), rand(3, seed=1))


def test_power_gradient():
    check_grad(lambda a, b: np.power(a, b), pos(2, 3), rand(2, 3, seed=1))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sin", "arctan"])
def test_unary_gradients(name):
    check_grad(lambda a: getattr(np, name)(a), pos(2, 3))


def test_where_broadcasts_and_promotes():
    c = onp.array([True, False, True])
    x = onp.arange(6, dtype="float32").reshape(2, 3)
    check_np(np.where(np.array(c), np.array(x), 0), onp.where(c, x, 0).astype("float32"))
    check_np(np.where(np.array(x) > 2, 1.0, -1.0), onp.where(x > 2, 1.0, -1.0),
             dtype="float32")
    y = onp.ones(3, dtype="int32")
    check_np(np.where(np.array(c), np.array(x), np.array(y)), onp.where(c, x, y),
             dtype="float32")


def test_where_gradient_goes_to_the_chosen_side():
    c = np.array(onp.array([1, 0, 1], dtype=bool))
    check_grad(lambda a, b: np.where(c, a, b), rand(2, 3), rand(3, seed=1))


@pytest.mark.parametrize("low,high", [(-0.5, 0.5), (None, 0.2), (-0.1, None)])
def test_clip_matches_numpy(low, high):
    a = rand(3, 4).astype("float32")
    check_np(np.clip(np.array(a), low, high), onp.clip(a, low, high))
    check_np(np.array(a).clip(low, high), onp.clip(a, low, high))


def test_clip_of_integers_with_one_bound():
    a = onp.array([-5, 0, 7], dtype="int32")
    check_np(np.clip(np.array(a), None, 3), onp.clip(a, None, 3))


def test_clip_rejects_array_bounds_with_a_fix():
    with pytest.raises(TypeError, match="np.maximum"):
        np.clip(np.ones(3), np.zeros(3), 1)


def test_clip_gradient():
    check_grad(lambda a: np.clip(a, -0.7, 0.9), rand(3, 4))


@pytest.mark.parametrize("decimals", [0, 1, 2])
def test_round_is_half_to_even(decimals):
    a = onp.array([0.5, 1.5, 2.5, -0.5, 1.234, -2.675], dtype="float32")
    check_np(np.round(np.array(a), decimals), onp.round(a, decimals), atol=1e-6)
    check_np(np.array(a).round(decimals), onp.round(a, decimals), atol=1e-6)


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_functions_give_bool(name):
    a, b = onp.array([0.0, 1.5, -2.0, 0.0]), onp.array([1.0, 0.0, 3.0, 0.0])
    check_np(getattr(np, name)(np.array(a), np.array(b)), getattr(onp, name)(a, b))
    check_np(np.logical_not(np.array(a)), onp.logical_not(a))


@pytest.mark.parametrize("dtype", ["bool", "int32"])
def test_bitwise_operators_match_numpy(dtype):
    a = onp.array([0, 1, 6, 3]).astype(dtype)
    b = onp.array([1, 1, 5, 0]).astype(dtype)
    x, y = np.array(a), np.array(b)
    check_np(x & y, a & b)
    check_np(x | y, a | b)
    check_np(x ^ y, a ^ b)
    check_np(~x, ~a)
    check_np(np.bitwise_and(x, y), onp.bitwise_and(a, b))
    check_np(np.invert(x), onp.invert(a))


def test_masks_combine_with_ampersand():
    x = np.array([0.5, 1.5, 2.5])
    check_np((x > 1) & (x < 2), [False, True, False])
