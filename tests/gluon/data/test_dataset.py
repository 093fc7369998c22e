"""Dataset, SimpleDataset, ArrayDataset, RecordFileDataset and the lazy views."""
import pickle

import numpy as np
import pytest

import minigluon as mx
from minigluon import nd, recordio
from minigluon.base import MXNetError
from minigluon.gluon.data import ArrayDataset, Dataset, RecordFileDataset, SimpleDataset
from minigluon.gluon.data.sampler import SequentialSampler


def double(x):
    return x * 2


def test_simple_dataset_indexes_its_sequence():
    data = SimpleDataset([5, 6, 7])
    assert len(data) == 3 and data[1] == 6 and data[-1] == 7


def test_base_dataset_asks_for_getitem_and_len():
    with pytest.raises(NotImplementedError, match="__getitem__"):
        Dataset()[0]
    with pytest.raises(NotImplementedError, match="__len__"):
        len(Dataset())


def test_array_dataset_zips_arrays_and_keeps_ndarray_items():
    x = nd.array(np.arange(12).reshape(4, 3))
    y = nd.array([0, 1, 2, 3])
    z = np.arange(4) * 10
    data = ArrayDataset(x, y, z)
    assert len(data) == 4
    xi, yi, zi = data[2]
    assert isinstance(xi, mx.nd.NDArray) and xi.asnumpy().tolist() == [6, 7, 8]
    # a 1-D NDArray is turned into NumPy once, so its items are scalars (as in MXNet)
    assert isinstance(yi, np.floating) and yi == 2
    assert zi == 20
    assert ArrayDataset(z)[3] == 30       # one array: the item itself, not a tuple


def test_array_dataset_names_the_lengths_that_differ():
    with pytest.raises(MXNetError, match=r"array 0: 4, array 1: 3"):
        ArrayDataset(np.zeros(4), np.zeros(3))
    with pytest.raises(MXNetError, match="at least one"):
        ArrayDataset()


def test_transform_is_lazy_or_eager_and_unpacks_tuples():
    calls = []

    def fn(x, y):
        calls.append(x)
        return x + 1, y

    data = ArrayDataset(np.arange(3), np.arange(3) * 10)
    lazy = data.transform(fn)
    assert calls == [] and lazy[2] == (3, 20) and calls == [2]
    eager = data.transform(fn, lazy=False)
    assert isinstance(eager, SimpleDataset) and len(calls) == 4 and eager[0] == (1, 0)
    assert SimpleDataset([1, 2]).transform(double)[1] == 4      # not a tuple: fn(item)


def test_transform_first_changes_only_the_data_and_pickles():
    data = ArrayDataset(np.arange(4), np.arange(4) + 100).transform_first(double)
    assert data[3] == (6, 103)
    assert pickle.loads(pickle.dumps(data))[1] == (2, 101)     # for DataLoader workers
    assert SimpleDataset([3]).transform_first(double)[0] == 6


def test_filter_take_and_sample():
    data = SimpleDataset(list(range(10)))
    evens = data.filter(lambda x: x % 2 == 0)
    assert [evens[i] for i in range(len(evens))] == [0, 2, 4, 6, 8]
    assert len(data.take(3)) == 3 and data.take(3)[2] == 2
    assert len(data.take(None)) == 10 and len(data.take(99)) == 10
    picked = data.sample([9, 1, 1])
    assert [picked[i] for i in range(3)] == [9, 1, 1]
    seq = data.sample(SequentialSampler(4, start=5))
    assert [seq[i] for i in range(len(seq))] == [5, 6, 7, 8]


@pytest.mark.parametrize("length,shards", [(10, 3), (7, 7), (3, 5), (100, 8), (0, 2)])
def test_shard_is_contiguous_and_balanced(length, shards):
    data = SimpleDataset(list(range(length)))
    parts = [data.shard(shards, i) for i in range(shards)]
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    flat = [p[i] for p in parts for i in range(len(p))]
    assert flat == list(range(length))


def test_shard_sizes_match_mxnet_and_bad_arguments_fail():
    data = SimpleDataset(list(range(10)))
    assert [len(data.shard(3, i)) for i in range(3)] == [4, 3, 3]
    with pytest.raises(MXNetError, match="index"):
        data.shard(3, 3)
    with pytest.raises(MXNetError, match="num_shards"):
        data.shard(0, 0)


def test_record_file_dataset_reads_records_by_position(tmp_path):
    rec_path = str(tmp_path / "data.rec")
    writer = recordio.MXIndexedRecordIO(str(tmp_path / "data.idx"), rec_path, "w")
    for key in (10, 20, 30):
        writer.write_idx(key, b"record %d" % key)
    writer.close()
    data = RecordFileDataset(rec_path)
    assert len(data) == 3
    assert data[1] == b"record 20" and data[-1] == b"record 30"
