"""nd's binary functions given two plain numbers return a plain number, as MXNet's do;
given an array they still run the operator."""
import math

import numpy as np
import pytest

from minigluon import nd

CASES = [("add", 2.5, 3, 5.5), ("subtract", 2, 3, -1), ("multiply", 2, 3.5, 7.0),
         ("divide", 3, 2, 1.5), ("modulo", 7, 3, 1), ("power", 0.9, 2, 0.81),
         ("maximum", 2, 3, 3), ("minimum", 2, 3, 2), ("hypot", 3, 4, 5.0),
         ("equal", 2, 2, 1), ("not_equal", 2, 2, 0), ("greater", 3, 2, 1),
         ("greater_equal", 2, 3, 0), ("lesser", 2, 3, 1), ("lesser_equal", 3, 3, 1),
         ("logical_and", 1, 0, 0), ("logical_or", 1, 0, 1), ("logical_xor", 1, 0, 1)]


@pytest.mark.parametrize("name,lhs,rhs,expected", CASES)
def test_two_numbers_give_a_number(name, lhs, rhs, expected):
    result = getattr(nd, name)(lhs, rhs)
    assert not isinstance(result, nd.NDArray)
    assert math.isclose(result, expected)


def test_an_array_operand_still_runs_the_operator():
    out = nd.power(nd.array([2.0, 3.0]), 2)
    assert isinstance(out, nd.NDArray)
    np.testing.assert_array_equal(out.asnumpy(), [4.0, 9.0])
    np.testing.assert_array_equal(nd.maximum(1, nd.array([0.0, 2.0])).asnumpy(), [1.0, 2.0])
    assert nd.add.__name__ == "add"
