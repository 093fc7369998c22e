"""The window checks' fast path for pairs of plain ints gives what the general path gives,
and refuses what it refuses (bools, numbers under the minimum)."""
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
