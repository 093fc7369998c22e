"""The argument checks' fast paths (pairs of plain ints for windows, plain floats for the
SGD step's numbers) give what the general path gives, and refuse what it refuses (bools,
numbers under the minimum, what is not a real number)."""
import numpy as np
import pytest

from minigluon_ext import _checks


@pytest.mark.parametrize("spelling", [
    ((3, 3), (1, 2), (0, 1), (1, 1)),                   # the operators' tuples: fast path
    ([3, 3], [1, 2], [0, 1], [1, 1]),
    ((np.int64(3), 3), (1, np.int32(2)), (0, 1), 1),
], ids=["tuples", "lists", "numpy_ints"])
def test_every_spelling_of_a_window_gives_plain_int_tuples(spelling):
    got = _checks.window2d("f", *spelling)
    assert got == (3, 3, 1, 2, 0, 1, 1, 1)
    assert all(type(v) is int for v in got)


@pytest.mark.parametrize("kernel,stride,pad,message", [
    ((True, 3), (1, 1), (0, 0), "kernel must be an int >= 1"),
    ((3, 3), (1, 0), (0, 0), "stride must be an int >= 1"),
    ((3, 3), (1, 1), (0, -1), "pad must be an int >= 0"),
    ((3, 3, 3), (1, 1), (0, 0), "kernel must be an int >= 1"),
])
def test_bad_pairs_are_refused_with_the_value(kernel, stride, pad, message):
    with pytest.raises(ValueError, match=message):
        _checks.window2d("f", kernel, stride, pad)


@pytest.mark.parametrize("lr", [0.5, 1, np.float32(0.5), np.float64(0.5)],
                         ids=["float", "int", "np_float32", "np_float64"])
def test_sgd_numbers_become_plain_floats(lr):
    w = np.zeros(4, np.float32)
    values, _ = _checks.sgd_update(w, np.ones(4, np.float32), None, lr, 0.0, 0.9, 0.25,
                                   None, 1)
    assert values == (float(lr), 0.0, 0.9, 0.25, 0.0)
    assert all(type(v) is float for v in values)


@pytest.mark.parametrize("name,bad", [("lr", True), ("wd", "0.1"), ("momentum", None),
                                      ("rescale_grad", np.bool_(True))])
def test_sgd_numbers_that_are_not_real_are_refused_by_name(name, bad):
    args = dict(lr=0.1, wd=0.0, momentum=0.9, rescale_grad=1.0)
    args[name] = bad
    w = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=f"sgd_update: {name} must be a real number"):
        _checks.sgd_update(w, np.ones(4, np.float32), None, args["lr"], args["wd"],
                           args["momentum"], args["rescale_grad"], None, 1)
