"""Tests of mx.io: iterators against hand-computed batches and direct NumPy parses."""
import gc
import gzip
import os
import threading
import time

import numpy as np
import pytest

import minigluon as mx
from minigluon import recordio

MNIST_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                         "shared", "data", "mnist-split")


def _epoch(it, what="data"):
    """[(values of the first data (or label) array as lists, pad)] for one epoch."""
    out = []
    for batch in it:
        arrays = batch.data if what == "data" else batch.label
        out.append((arrays[0].asnumpy().tolist(), batch.pad))
    return out


# ---- DataDesc / DataBatch -------------------------------------------------------------------
def test_data_desc_is_a_name_shape_pair():
    desc = mx.io.DataDesc("data", (4, 3), np.int32, "NC")
    name, shape = desc
    assert (name, shape, desc.dtype, desc.layout) == ("data", (4, 3), np.int32, "NC")
    assert mx.io.DataDesc.get_batch_axis("TNC") == 1
    assert mx.io.DataDesc.get_batch_axis(None) == 0
    descs = mx.io.DataDesc.get_list([("a", (2,)), ("b", (3,))], [("a", np.int32),
                                                                  ("b", np.float16)])
    assert [(d.name, d.shape, d.dtype) for d in descs] == [("a", (2,), np.int32),
                                                          ("b", (3,), np.float16)]


def test_data_batch_wants_lists():
    with pytest.raises(TypeError, match="list of NDArrays"):
        mx.io.DataBatch(mx.nd.zeros((2,)))
    assert "data shapes: [(2,)]" in str(mx.io.DataBatch([mx.nd.zeros((2,))]))


# ---- NDArrayIter ----------------------------------------------------------------------------
def test_ndarray_iter_pad_wraps_and_sets_pad():
    x, y = np.arange(10), np.arange(10) * 10
    it = mx.io.NDArrayIter(x, y, batch_size=4)      # 'pad' is the default
    expected = [([0, 1, 2, 3], 0), ([4, 5, 6, 7], 0), ([8, 9, 0, 1], 2)]
    assert _epoch(it) == expected
    it.reset()
    assert _epoch(it, "label") == [([v * 10 for v in b], p) for b, p in expected]
    assert it.provide_data[0].shape == (4,) and it.provide_data[0].dtype == np.float32
    assert it.provide_label[0].name == "softmax_label"


def test_ndarray_iter_pad_tiles_data_smaller_than_a_batch():
    it = mx.io.NDArrayIter(np.arange(3), batch_size=8)
    assert _epoch(it) == [([0, 1, 2, 0, 1, 2, 0, 1], 5)]


def test_ndarray_iter_discard_drops_the_short_batch():
    it = mx.io.NDArrayIter(np.arange(10), batch_size=4, last_batch_handle="discard")
    for _ in range(2):
        assert _epoch(it) == [([0, 1, 2, 3], 0), ([4, 5, 6, 7], 0)]
        it.reset()


def test_ndarray_iter_roll_over_carries_the_remainder():
    x, y = np.arange(10), np.arange(10) * 10
    it = mx.io.NDArrayIter(x, y, batch_size=4, last_batch_handle="roll_over")
    epochs = []
    for _ in range(3):
        epochs.append(_epoch(it))
        it.reset()
    assert [[b for b, _ in epoch] for epoch in epochs] == [
        [[0, 1, 2, 3], [4, 5, 6, 7]],
        [[8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]],
        [[0, 1, 2, 3], [4, 5, 6, 7]]]
    it.reset()
    assert _epoch(it, "label")[0][0] == [80, 90, 0, 10]     # labels roll over with the data
    short = mx.io.NDArrayIter(np.arange(3), batch_size=8, last_batch_handle="roll_over")
    for _ in range(2):
        assert _epoch(short) == []
        short.reset()
    assert _epoch(short) == [([0, 1, 2, 0, 1, 2, 0, 1], 0)]


def test_ndarray_iter_hard_reset_forgets_the_carried_samples():
    it = mx.io.NDArrayIter(np.arange(10), batch_size=4, last_batch_handle="roll_over")
    _epoch(it)
    it.hard_reset()
    assert _epoch(it)[0][0] == [0, 1, 2, 3]


def test_ndarray_iter_inputs_names_and_dtypes():
    it = mx.io.NDArrayIter({"b": np.ones((4, 2)), "a": np.zeros((4, 3))}, batch_size=2)
    assert [d.name for d in it.provide_data] == ["a", "b"]
    assert [d.shape for d in it.provide_data] == [(2, 3), (2, 2)]
    it = mx.io.NDArrayIter([np.ones((4, 2)), np.zeros((4, 3))], batch_size=2)
    assert [d.name for d in it.provide_data] == ["_0_data", "_1_data"]
    it = mx.io.NDArrayIter(mx.nd.array(np.arange(4), dtype="int32"), batch_size=2)
    batch = it.next()
    assert batch.data[0].dtype == np.int32 and batch.label == [] and batch.index is None
    assert mx.io.NDArrayIter(np.arange(4.0), batch_size=2).next().data[0].dtype == np.float32


def test_ndarray_iter_low_level_protocol():
    it = mx.io.NDArrayIter(np.arange(6), np.arange(6), batch_size=3, label_name="lbl")
    seen = []
    while it.iter_next():
        seen.append((it.getdata()[0].asnumpy().tolist(), it.getlabel()[0].asnumpy().tolist(),
                     it.getpad(), it.getindex()))
    assert seen == [([0, 1, 2], [0, 1, 2], 0, None), ([3, 4, 5], [3, 4, 5], 0, None)]
    assert it.provide_label[0].name == "lbl"


def test_ndarray_iter_shuffle_follows_numpy_seed_and_keeps_pairs():
    x = np.arange(12).reshape(6, 2)
    np.random.seed(3)
    it = mx.io.NDArrayIter(x, np.arange(6), batch_size=3, shuffle=True)
    first = np.concatenate([b.data[0].asnumpy() for b in it])
    it.reset()
    batches = list(it)
    second = np.concatenate([b.data[0].asnumpy() for b in batches])
    np.random.seed(3)               # replay MXNet: shuffle once at construction, then
    idx = np.arange(6)              # shuffle the shuffled data again at every reset
    np.random.shuffle(idx)
    np.testing.assert_array_equal(first, x[idx])
    np.random.shuffle(idx)
    np.testing.assert_array_equal(second, first[idx])
    labels = np.concatenate([b.label[0].asnumpy() for b in batches])
    np.testing.assert_array_equal(second[:, 0], labels * 2)


def test_ndarray_iter_errors():
    with pytest.raises(ValueError, match="last_batch_handle"):
        mx.io.NDArrayIter(np.arange(4), last_batch_handle="keep")
    with pytest.raises(ValueError, match="at least the first data array's 4 samples"):
        mx.io.NDArrayIter(np.arange(4), np.arange(3))
    with pytest.raises(ValueError, match="batch_size"):
        mx.io.NDArrayIter(np.arange(4), batch_size=0)
    with pytest.raises(TypeError, match="NDArray"):
        mx.io.NDArrayIter("not an array")


# ---- MNISTIter ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mnist():
    """(images uint8 (N, 28, 28), labels uint8, image path, label path) parsed with NumPy."""
    if not os.path.isdir(MNIST_DIR):
        pytest.skip(f"MNIST test data not found at {MNIST_DIR}")
    paths = [os.path.join(MNIST_DIR, f"train-{k}-idx{n}-ubyte.gz")
             for k, n in (("images", 3), ("labels", 1))]
    with gzip.open(paths[0]) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(paths[1]) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return images, labels, paths[0], paths[1]


def _mnist_iter(mnist, **kwargs):
    kwargs.setdefault("shuffle", False)
    return mx.io.MNISTIter(image=mnist[2], label=mnist[3], **kwargs)


def _collect(it):
    data, label, index = [], [], []
    for batch in it:
        assert batch.pad == 0
        data.append(batch.data[0].asnumpy())
        label.append(batch.label[0].asnumpy())
        index.append(batch.index)
    return np.concatenate(data), np.concatenate(label), np.concatenate(index).astype(np.int64)


def test_mnist_iter_matches_numpy_parse(mnist):
    images, labels = mnist[0], mnist[1]
    it = _mnist_iter(mnist, batch_size=300)
    assert it.provide_data[0].shape == (300, 1, 28, 28)
    assert it.provide_label[0].shape == (300,)
    data, label, index = _collect(it)
    n = len(images) // 300 * 300            # the short last batch is dropped, as in MXNet
    assert data.shape == (n, 1, 28, 28) and data.dtype == np.float32
    np.testing.assert_array_equal(index, np.arange(n))
    np.testing.assert_array_equal(data[:, 0], images[:n] / np.float32(256))
    np.testing.assert_array_equal(label, labels[:n])
    assert 0.0 <= data.min() and data.max() < 1.0


def test_mnist_iter_flat_and_plain_path(mnist):
    it = mx.io.MNISTIter(image=mnist[2][:-3], label=mnist[3][:-3], batch_size=50, flat=True,
                         shuffle=False, input_shape=(784,))   # .gz sibling; extra arg ignored
    batch = it.next()
    assert batch.data[0].shape == (50, 784)
    np.testing.assert_array_equal(batch.data[0].asnumpy(),
                                  mnist[0][:50].reshape(50, -1) / np.float32(256))


def test_mnist_iter_parts_are_disjoint_and_equal(mnist):
    images, labels = mnist[0], mnist[1]
    parts = [_collect(_mnist_iter(mnist, batch_size=100, num_parts=3, part_index=i,
                                  shuffle=True, seed=7)) for i in range(3)]
    indices = [set(index.tolist()) for _, _, index in parts]
    assert len({len(s) for s in indices}) == 1 and len(indices[0]) == len(images) // 3 // 100 * 100
    assert not (indices[0] & indices[1] or indices[0] & indices[2] or indices[1] & indices[2])
    for data, label, index in parts:
        np.testing.assert_array_equal(data[:, 0], images[index] / np.float32(256))
        np.testing.assert_array_equal(label, labels[index])
    with pytest.raises(ValueError, match="part_index"):
        _mnist_iter(mnist, num_parts=2, part_index=2)


def test_mnist_iter_shuffle_is_seeded_and_fixed_across_epochs(mnist):
    order = _collect(_mnist_iter(mnist, batch_size=500, shuffle=True, seed=1))[2]
    assert sorted(order.tolist()) != order.tolist()
    it = _mnist_iter(mnist, batch_size=500, shuffle=True, seed=1)
    np.testing.assert_array_equal(_collect(it)[2], order)
    it.reset()
    np.testing.assert_array_equal(_collect(it)[2], order)       # MXNet shuffles once
    other = _collect(_mnist_iter(mnist, batch_size=500, shuffle=True, seed=2))[2]
    assert other.tolist() != order.tolist()
    it.reset()
    assert it.iter_next() and it.getlabel().shape == (500,) and it.getpad() == 0


def test_mnist_iter_truncated_or_missing_file_names_it(mnist, tmp_path):
    bad = tmp_path / "train-images-idx3-ubyte"
    with gzip.open(mnist[2]) as f:
        bad.write_bytes(f.read()[:5000])
    with pytest.raises(mx.MXNetError, match="train-images-idx3-ubyte"):
        mx.io.MNISTIter(image=str(bad), label=mnist[3])
    with pytest.raises(mx.MXNetError, match="nowhere-images"):
        mx.io.MNISTIter(image=str(tmp_path / "nowhere-images"), label=mnist[3])
    with pytest.raises(TypeError, match="unexpected argument 'shufle'"):
        mx.io.MNISTIter(image=mnist[2], label=mnist[3], shufle=True)


# ---- ImageRecordIter ------------------------------------------------------------------------
N_IMAGES = 10


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """A .rec/.idx of N_IMAGES 12x16 BGR PNG images with label i and id 100 + i; returns
    (rec path, idx path, RGB images)."""
    folder = tmp_path_factory.mktemp("rec")
    rec, idx = str(folder / "img.rec"), str(folder / "img.idx")
    bgr = np.random.RandomState(0).randint(0, 256, (N_IMAGES, 12, 16, 3)).astype(np.uint8)
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    for i, img in enumerate(bgr):
        header = recordio.IRHeader(0, float(i), 100 + i, 0)
        writer.write_idx(i, recordio.pack_img(header, img, img_fmt=".png"))
    writer.close()
    return rec, idx, bgr[..., ::-1]


def _rec_iter(records, **kwargs):
    kwargs.setdefault("batch_size", 4)
    kwargs.setdefault("data_shape", (3, 12, 16))
    return mx.io.ImageRecordIter(path_imgrec=records[0], **kwargs)


def test_image_record_iter_shapes_labels_and_pixels(records):
    it = _rec_iter(records, path_imgidx=records[1])
    assert it.provide_data[0].shape == (4, 3, 12, 16)
    assert it.provide_label[0].shape == (4,)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 2]
    labels = np.concatenate([b.label[0].asnumpy() for b in batches])
    np.testing.assert_array_equal(labels, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1])
    np.testing.assert_array_equal(batches[0].index, [100, 101, 102, 103])
    data = batches[0].data[0].asnumpy()
    assert data.dtype == np.float32
    np.testing.assert_array_equal(data, records[2][:4].transpose(0, 3, 1, 2))


def test_image_record_iter_mean_std_scale_and_center_crop(records):
    mean, std = np.array([10.0, 20.0, 30.0]), np.array([2.0, 4.0, 8.0])
    it = _rec_iter(records, data_shape=(3, 8, 10), mean_r=10, mean_g=20, mean_b=30,
                   std_r=2, std_g=4, std_b=8, scale=0.5)
    crop = records[2][:4, 2:10, 3:13].transpose(0, 3, 1, 2).astype(np.float32)
    expected = (crop - mean[:, None, None]) * 0.5 / std[:, None, None]
    np.testing.assert_allclose(it.next().data[0].asnumpy(), expected, rtol=1e-6)


def test_image_record_iter_resize_and_gray(records):
    it = _rec_iter(records, data_shape=(3, 6, 8), resize=6)
    expected = mx.image.resize_np(np.ascontiguousarray(records[2][0]), 8, 6, 1)
    np.testing.assert_array_equal(it.next().data[0].asnumpy()[0], expected.transpose(2, 0, 1))
    gray = _rec_iter(records, data_shape=(1, 12, 16)).next().data[0]
    assert gray.shape == (4, 1, 12, 16)


def _is_window(out, img, mirrored):
    """Whether CHW `out` is a crop of HWC `img` (mirrored left-right if asked)."""
    h, w = out.shape[1:]
    src = img[:, ::-1] if mirrored else img
    return any(np.array_equal(out, src[y:y + h, x:x + w].transpose(2, 0, 1))
               for y in range(img.shape[0] - h + 1) for x in range(img.shape[1] - w + 1))


def test_image_record_iter_random_crop_mirror_follow_the_seed(records):
    def run(seed, threads):
        it = _rec_iter(records, data_shape=(3, 8, 8), rand_crop=True, rand_mirror=True,
                       seed=seed, preprocess_threads=threads, round_batch=False)
        return np.concatenate([b.data[0].asnumpy() for b in it])
    first = run(seed=5, threads=1)
    np.testing.assert_array_equal(first, run(seed=5, threads=2))
    assert not np.array_equal(first, run(seed=6, threads=1))
    mirrored = [_is_window(out, records[2][i], True) for i, out in enumerate(first[:N_IMAGES])]
    plain = [_is_window(out, records[2][i], False) for i, out in enumerate(first[:N_IMAGES])]
    assert all(m or p for m, p in zip(mirrored, plain))
    assert any(mirrored) and any(plain)


def test_image_record_iter_parts_equal_and_disjoint_with_or_without_index(records):
    labels = []
    for i in range(3):
        with_idx = _rec_iter(records, path_imgidx=records[1], batch_size=3, num_parts=3,
                             part_index=i)
        without = _rec_iter(records, batch_size=3, num_parts=3, part_index=i)
        a, b = _epoch(with_idx, "label"), _epoch(without, "label")
        assert a == b and len(a) == 1 and a[0][1] == 0
        labels.append(set(a[0][0]))
    assert labels == [{0, 1, 2}, {3, 4, 5}, {6, 7, 8}]


def test_image_record_iter_round_batch_continues_next_epoch(records):
    it = _rec_iter(records)
    epochs = []
    for _ in range(3):
        epochs.append([b for b, _ in _epoch(it, "label")])
        it.reset()
    assert epochs[1] == [[2, 3, 4, 5], [6, 7, 8, 9]]       # 0 and 1 padded epoch 0
    assert epochs[2] == epochs[0]
    it = _rec_iter(records, round_batch=False)
    assert _epoch(it, "label")[-1] == ([8, 9, 0, 1], 2)
    it.reset()
    assert _epoch(it, "label")[0] == ([0, 1, 2, 3], 0)


def test_image_record_iter_shuffle_reorders_each_epoch(records):
    it = _rec_iter(records, batch_size=5, shuffle=True, seed=3)
    first = [v for b, _ in _epoch(it, "label") for v in b]
    it.reset()
    second = [v for b, _ in _epoch(it, "label") for v in b]
    assert sorted(first) == sorted(second) == list(range(N_IMAGES))
    assert first != second


def test_image_record_iter_label_width(tmp_path):
    rec = str(tmp_path / "multi.rec")
    writer = recordio.MXRecordIO(rec, "w")
    img = np.zeros((4, 4, 3), np.uint8)
    for i in range(2):
        writer.write(recordio.pack_img(recordio.IRHeader(0, [i, i + 0.5], i, 0), img,
                                       img_fmt=".png"))
    writer.close()
    it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 4, 4), batch_size=2,
                               label_width=2)
    np.testing.assert_array_equal(it.next().label[0].asnumpy(), [[0, 0.5], [1, 1.5]])
    with pytest.raises(mx.MXNetError, match="label_width is 1"):
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 4, 4), batch_size=2).next()


def test_image_record_iter_errors_name_the_file(records, tmp_path):
    truncated = tmp_path / "cut.rec"
    truncated.write_bytes(open(records[0], "rb").read()[:-50])
    with pytest.raises(mx.MXNetError, match="cut.rec"):
        mx.io.ImageRecordIter(path_imgrec=str(truncated), data_shape=(3, 12, 16),
                              batch_size=4)
    with pytest.raises(mx.MXNetError, match="cut.rec"):
        list(mx.io.ImageRecordIter(path_imgrec=str(truncated), path_imgidx=records[1],
                                   data_shape=(3, 12, 16), batch_size=4))
    with pytest.raises(mx.MXNetError, match="smaller than data_shape"):
        _rec_iter(records, data_shape=(3, 20, 20)).next()
    with pytest.raises(NotImplementedError, match="max_rotate_angle"):
        _rec_iter(records, max_rotate_angle=10)
    _rec_iter(records, max_rotate_angle=0, prefetch_buffer=2, ctx="cpu")   # defaults are fine
    with pytest.raises(TypeError, match="rand_crp"):
        _rec_iter(records, rand_crp=True)


# ---- PrefetchingIter and ResizeIter ---------------------------------------------------------
def _prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "PrefetchingIter"]


def test_prefetching_iter_yields_the_same_batches():
    def make():
        return mx.io.NDArrayIter(np.arange(10), np.arange(10) * 2, batch_size=4)
    direct, prefetched = make(), mx.io.PrefetchingIter(make())
    assert prefetched.batch_size == 4
    for _ in range(2):
        expected = [(b.data[0].asnumpy().tolist(), b.label[0].asnumpy().tolist(), b.pad)
                    for b in direct]
        got = [(b.data[0].asnumpy().tolist(), b.label[0].asnumpy().tolist(), b.pad)
               for b in prefetched]
        assert got == expected and len(got) == 3
        assert not prefetched.iter_next()       # stays at the end without blocking
        direct.reset()
        prefetched.reset()


def test_prefetching_iter_combines_and_renames():
    a = mx.io.NDArrayIter(np.arange(6), np.arange(6), batch_size=3)
    b = mx.io.NDArrayIter(np.arange(6) + 100, batch_size=3, data_name="other")
    it = mx.io.PrefetchingIter([a, b], rename_data=[{"data": "a_data"}, {"other": "b_data"}])
    assert [d.name for d in it.provide_data] == ["a_data", "b_data"]
    batch = it.next()
    assert [d.asnumpy().tolist() for d in batch.data] == [[0, 1, 2], [100, 101, 102]]
    assert len(batch.label) == 1 and batch.provide_data[1].name == "b_data"


def test_prefetching_iter_reraises_inner_errors():
    class Broken(mx.io.NDArrayIter):
        def next(self):
            raise KeyError("broken inner iterator")
    it = mx.io.PrefetchingIter(Broken(np.arange(4), batch_size=2))
    with pytest.raises(KeyError, match="broken inner"):
        it.next()
    mismatched = mx.io.PrefetchingIter([mx.io.NDArrayIter(np.arange(4), batch_size=2),
                                        mx.io.NDArrayIter(np.arange(2), batch_size=2)])
    mismatched.next()
    with pytest.raises(mx.MXNetError, match="same number of batches"):
        mismatched.next()


def test_prefetching_iter_thread_ends_on_reset_and_collection():
    # count this iterator's threads only: an earlier test's thread may still be ending
    before = set(_prefetch_threads())

    def ours():
        return [t for t in _prefetch_threads() if t not in before]
    it = mx.io.PrefetchingIter(mx.io.NDArrayIter(np.arange(100), batch_size=2))
    it.next()                                   # the thread now waits on a full queue
    first = ours()
    assert len(first) == 1
    it.reset()
    first[0].join(5.0)
    assert not first[0].is_alive() and len(ours()) == 1   # the old thread stopped, a new one runs
    del it
    gc.collect()
    end = time.monotonic() + 5.0
    while ours() and time.monotonic() < end:
        time.sleep(0.02)
    assert ours() == []


def test_resize_iter_fixes_the_epoch_length():
    it = mx.io.ResizeIter(mx.io.NDArrayIter(np.arange(4), batch_size=2), size=3)
    assert [b for b, _ in _epoch(it)] == [[0, 1], [2, 3], [0, 1]]
    it.reset()
    assert len(list(it)) == 3


def test_ndarray_iter_counts_samples_by_the_first_data_array():
    # MXNet reads a longer label only as far as the data goes
    it = mx.io.NDArrayIter(np.arange(4.0), np.arange(10.0, 16.0), batch_size=2)
    batches = [(b.data[0].asnumpy().tolist(), b.label[0].asnumpy().tolist()) for b in it]
    assert batches == [([0.0, 1.0], [10.0, 11.0]), ([2.0, 3.0], [12.0, 13.0])]
