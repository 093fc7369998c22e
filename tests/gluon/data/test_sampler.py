"""Samplers: MXNet's semantics for the plain ones; for SplitSampler / SplitBatchSampler, the
properties synchronous data-parallel training needs (equal counts per part, disjoint parts
that cover the data when it divides, one seeded permutation per epoch)."""
import itertools
from collections import Counter

import numpy as np
import pytest

from minigluon.gluon import data
from minigluon.gluon.data import (BatchSampler, IntervalSampler, RandomSampler,
                                  SequentialSampler, SplitBatchSampler, SplitSampler)

MODES = ("keep", "discard", "rollover")


def epochs(sampler, n):
    """`n` passes, each with the len() announced before it."""
    out = []
    for _ in range(n):
        expected = len(sampler)
        out.append((expected, list(sampler)))
    return out


def test_sequential_and_random():
    assert list(SequentialSampler(4)) == [0, 1, 2, 3]
    assert list(SequentialSampler(3, start=5)) == [5, 6, 7] and len(SequentialSampler(3, 5)) == 3
    np.random.seed(3)
    first = list(RandomSampler(20))
    np.random.seed(3)
    assert list(RandomSampler(20)) == first and sorted(first) == list(range(20))
    assert len(RandomSampler(20)) == 20 and first != list(range(20))


def test_interval():
    assert list(IntervalSampler(7, 3)) == [0, 3, 6, 1, 4, 2, 5]
    assert list(IntervalSampler(7, 3, rollover=False)) == [0, 3, 6]
    assert len(IntervalSampler(7, 3, rollover=False)) == 3 and len(IntervalSampler(7, 3)) == 7


@pytest.mark.parametrize("mode", MODES)
def test_batch_sampler_matches_a_flat_stream(mode):
    """Oracle: each mode described as slicing of the concatenated index stream."""
    for length, size in itertools.product(range(0, 12), range(1, 6)):
        sampler = BatchSampler(SequentialSampler(length), size, mode)
        carried = []
        for expected, batches in epochs(sampler, 3):
            assert expected == len(batches), (length, size, mode)
            if mode == "rollover":
                flat = carried + list(range(length))
                cut = len(flat) // size * size
                want, carried = flat[:cut], flat[cut:]
            else:
                keep = length if mode == "keep" else length // size * size
                want = list(range(keep))
            assert [i for b in batches for i in b] == want
            assert all(len(b) == size for b in batches[:-1])
            if mode != "keep":
                assert all(len(b) == size for b in batches)


def test_rollover_carries_into_next_epoch():
    s = BatchSampler(SequentialSampler(5), 2, "rollover")
    assert list(s) == [[0, 1], [2, 3]]
    assert len(s) == 3 and list(s) == [[4, 0], [1, 2], [3, 4]]


@pytest.mark.parametrize("shuffle", [False, True])
def test_split_sampler_parts_are_disjoint_and_equal(shuffle):
    for length, parts in itertools.product(range(0, 30), range(1, 6)):
        if 0 < length < parts:
            continue                                # refused: see test_bad_arguments
        samplers = [SplitSampler(length, parts, i, shuffle=shuffle, seed=7)
                    for i in range(parts)]
        seen = set()
        for epoch in range(4):
            got = [list(s) for s in samplers]
            sizes = {len(g) for g in got} | {len(s) for s in samplers}
            assert sizes == {length // parts}, (length, parts, sizes)   # equal, len() right
            flat = [i for g in got for i in g]
            assert len(set(flat)) == len(flat)                  # disjoint: nothing twice
            assert set(flat) <= set(range(length))
            assert len(flat) == length - length % parts         # only the remainder is out
            seen |= set(flat)
        if shuffle and length % parts and length >= 3 * parts:
            assert len(seen) > length - length % parts          # other samples left out


@pytest.mark.parametrize("shuffle", [False, True])
def test_split_sampler_pad_covers_everything(shuffle):
    for length, parts in itertools.product(range(0, 30), range(1, 6)):
        samplers = [SplitSampler(length, parts, i, shuffle=shuffle, seed=7, pad=True)
                    for i in range(parts)]
        for epoch in range(2):
            got = [list(s) for s in samplers]
            sizes = {len(g) for g in got} | {len(s) for s in samplers}
            assert sizes == {-(-length // parts)}, (length, parts, sizes)
            flat = [i for g in got for i in g]
            assert set(flat) == set(range(length))              # everything is read
            extra = Counter(flat) - Counter(range(length))
            assert sum(extra.values()) == len(flat) - length    # only the padding repeats


def test_split_sampler_unshuffled_is_contiguous():
    assert list(SplitSampler(10, 2, 1, shuffle=False)) == [5, 6, 7, 8, 9]
    # the seed tutorial's SplitSampler: part_len = length // parts, remainder dropped
    assert [list(SplitSampler(5, 2, i, shuffle=False)) for i in range(2)] == [[0, 1], [2, 3]]
    assert [list(SplitSampler(5, 2, i, shuffle=False, pad=True)) for i in range(2)] == \
        [[0, 1, 2], [3, 4, 0]]
    assert [list(SplitSampler(2, 3, i, shuffle=False, pad=True)) for i in range(3)] == \
        [[0], [1], [0]]


def test_split_sampler_seeded_per_epoch():
    a, b = SplitSampler(100, 4, 2, seed=1), SplitSampler(100, 4, 2, seed=1)
    first = [list(a) for _ in range(3)]
    assert first == [list(b) for _ in range(3)]                 # same seed: same epochs
    assert first[0] != first[1] != first[2]                      # epochs differ
    b.set_epoch(1)
    assert list(b) == first[1] and list(b) == first[2]           # pinned, then advances
    assert list(SplitSampler(100, 4, 2, seed=2)) != first[0]     # seeds differ
    assert sorted(first[0]) != list(range(50, 75))               # really shuffled


@pytest.mark.parametrize("mode", MODES)
def test_split_batch_sampler_equal_batches_per_part(mode):
    for length, parts, size in itertools.product((0, 4, 7, 12, 30, 31), (1, 2, 3, 4), (1, 3, 5)):
        samplers = [SplitBatchSampler(length, size, parts, i, last_batch=mode, seed=3)
                    for i in range(parts)]
        for epoch in range(3):
            runs = [epochs(s, 1)[0] for s in samplers]
            counts = {len(batches) for _, batches in runs} | {n for n, _ in runs}
            assert len(counts) == 1, (length, parts, size, mode, epoch, counts)
            for _, batches in runs:
                assert all(1 <= len(b) <= size for b in batches)
            if mode == "keep":
                flat = sorted(i for _, batches in runs for b in batches for i in b)
                assert len(set(flat)) == len(flat) == length - length % parts


def test_split_batch_sampler_agrees_with_split_sampler():
    for epoch in range(2):
        batches = SplitBatchSampler(23, 4, 3, 1, seed=5)
        batches.set_epoch(epoch)
        single = SplitSampler(23, 3, 1, seed=5)
        single.set_epoch(epoch)
        assert [i for b in batches for i in b] == list(single)


@pytest.mark.parametrize("make, words", [
    (lambda: SplitSampler(10, 2, 2), ["part_index", "2"]),
    (lambda: SplitSampler(10, 0, 0), ["num_parts", "0"]),
    (lambda: SplitBatchSampler(10, 0), ["batch_size", "0"]),
    (lambda: BatchSampler(SequentialSampler(3), 2, "drop"), ["last_batch", "'drop'"]),
    (lambda: SplitBatchSampler(10, 2, last_batch="pad"), ["last_batch", "'pad'"]),
    (lambda: SequentialSampler(-1), ["length", "-1"]),
    (lambda: SplitSampler(2, 3, 0), ["2 samples", "3 disjoint", "pad=True"]),
    (lambda: SplitSampler(4, 2, 0, pad="yes"), ["pad", "'yes'"]),
])
def test_bad_arguments_name_the_value(make, words):
    with pytest.raises(ValueError) as info:
        make()
    assert all(w in str(info.value) for w in words), str(info.value)


def test_samplers_are_reachable_as_in_mxnet():
    assert data.sampler.Sampler is data.Sampler
    assert issubclass(SplitSampler, data.sampler.Sampler)
