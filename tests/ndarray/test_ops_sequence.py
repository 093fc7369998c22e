"""SequenceMask, SequenceLast and SequenceReverse against NumPy loops over the batch,
gradients against finite differences, both time axes, and the bad-length errors."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import MXNetError, ShapeError

from gradcheck import check_close, check_grad, rand

LENGTHS = np.array([2, 4, 1])


def np_mask(x, lengths, value=0.0):
    out = x.copy()
    for n, k in enumerate(lengths):
        out[k:, n] = value
    return out


def np_last(x, lengths):
    return np.stack([x[k - 1, n] for n, k in enumerate(lengths)])


def np_reverse(x, lengths):
    out = x.copy()
    for n, k in enumerate(lengths):
        out[:k, n] = x[:k, n][::-1]
    return out


def test_sequence_mask_zeroes_the_padding_and_its_gradient():
    x = rand(4, 3, 2)
    lengths = nd.array(LENGTHS)
    check_close(nd.SequenceMask(nd.array(x), lengths, use_sequence_length=True),
                np_mask(x, LENGTHS))
    check_close(nd.SequenceMask(nd.array(x), lengths, use_sequence_length=True, value=-1),
                np_mask(x, LENGTHS, -1))
    check_close(nd.SequenceMask(nd.array(x)), x)           # no lengths: nothing masked
    check_grad(lambda a: nd.SequenceMask(a, lengths, use_sequence_length=True), x)


def test_sequence_mask_and_last_with_batch_first():
    x = rand(3, 4, 2)                                        # (N, T, C), axis=1
    lengths = nd.array(LENGTHS)
    t_first = np.swapaxes(x, 0, 1)
    check_close(nd.SequenceMask(nd.array(x), lengths, use_sequence_length=True, axis=1),
                np.swapaxes(np_mask(t_first, LENGTHS), 0, 1))
    check_close(nd.SequenceLast(nd.array(x), lengths, use_sequence_length=True, axis=1),
                np_last(t_first, LENGTHS))
    check_grad(lambda a: nd.SequenceLast(a, lengths, use_sequence_length=True, axis=1), x)


def test_sequence_last_picks_each_last_valid_step():
    x = rand(4, 3, 2)
    lengths = nd.array(LENGTHS)
    check_close(nd.SequenceLast(nd.array(x), lengths, use_sequence_length=True),
                np_last(x, LENGTHS))
    check_close(nd.SequenceLast(nd.array(x)), x[-1])
    check_grad(lambda a: nd.SequenceLast(a, lengths, use_sequence_length=True), x)


def test_sequence_reverse_keeps_the_padding_in_place():
    x = rand(4, 3, 2)
    lengths = nd.array(LENGTHS)
    check_close(nd.SequenceReverse(nd.array(x), lengths, use_sequence_length=True),
                np_reverse(x, LENGTHS))
    check_close(nd.SequenceReverse(nd.array(x)), x[::-1])
    check_grad(lambda a: nd.SequenceReverse(a, lengths, use_sequence_length=True), x)


def test_sequence_ops_in_a_symbol_graph():
    data, length = mx.sym.var("data"), mx.sym.var("length")
    out = mx.sym.SequenceMask(data, sequence_length=length, use_sequence_length=True)
    x = rand(4, 3, 2)
    got = out.eval(data=nd.array(x), length=nd.array(LENGTHS))[0]
    check_close(got, np_mask(x, LENGTHS))


def test_bad_lengths_are_named():
    x = nd.ones((4, 3, 2))
    with pytest.raises(MXNetError, match=r"values must lie in \[0, 4\].*got \[2, 5, 1\]"):
        nd.SequenceMask(x, nd.array([2, 5, 1]), use_sequence_length=True)
    with pytest.raises(ShapeError, match=r"sequence_length has shape \(2,\).*batch of 3"):
        nd.SequenceLast(x, nd.array([1, 2]), use_sequence_length=True)
    with pytest.raises(MXNetError, match="at least one step"):
        nd.SequenceLast(x, nd.array([1, 0, 2]), use_sequence_length=True)
    with pytest.raises(MXNetError, match="needs sequence_length"):
        nd.SequenceMask(x, use_sequence_length=True)
    with pytest.raises(MXNetError, match="only axis=0"):
        nd.SequenceReverse(x, axis=1)
