"""Vision datasets: MNIST on the real files beside the checkout, CIFAR on files written here
in the real formats, downloads (faked, no network), image folders, RecordIO images and
SyntheticDigits."""
import gzip
import logging
import os
import pickle
import struct
import tarfile

import numpy as np
import pytest

import minigluon as mx
from minigluon import image, recordio
from minigluon import gluon
from minigluon.gluon.data import vision
from minigluon.gluon.data.vision import transforms
from minigluon.gluon.data.vision.datasets import downloads as ds   # download, digests, errors

MNIST_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data",
                         "mnist-split")
RNG = np.random.default_rng(0)


def parse_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    shape = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    return np.frombuffer(raw[4 + 4 * ndim:], np.uint8).reshape(shape)


def write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


@pytest.mark.skipif(not os.path.isdir(MNIST_DIR), reason="../shared/data/mnist-split is absent")
@pytest.mark.parametrize("train,prefix,count", [(True, "train", 8000), (False, "t10k", 2000)])
def test_mnist_matches_a_direct_parse_of_the_idx_files(train, prefix, count):
    data = vision.MNIST(root=MNIST_DIR, train=train)
    images = parse_idx(os.path.join(MNIST_DIR, f"{prefix}-images-idx3-ubyte.gz"))
    labels = parse_idx(os.path.join(MNIST_DIR, f"{prefix}-labels-idx1-ubyte.gz"))
    assert len(data) == count == len(images)
    np.testing.assert_array_equal(data._data.asnumpy()[:, :, :, 0], images)
    np.testing.assert_array_equal(data._label, labels)
    x, y = data[17]
    assert isinstance(x, mx.nd.NDArray) and x.shape == (28, 28, 1) and x.dtype == np.uint8
    assert isinstance(y, np.int32) and y == labels[17]
    seen = vision.MNIST(root=MNIST_DIR, train=train, transform=lambda d, l: (d.shape, l + 1))
    assert seen[17] == ((28, 28, 1), labels[17] + 1)


def no_network(url, path=None, **kwargs):
    raise mx.gluon.utils.DownloadError(f"could not download {url}: network unreachable")


def test_missing_files_without_network_name_files_and_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(ds, "download", no_network)
    with pytest.raises(ds.DatasetNotFoundError) as err:
        vision.FashionMNIST(root=str(tmp_path / "fm"), train=False)
    msg = str(err.value)
    assert "t10k-images-idx3-ubyte.gz" in msg and "t10k-labels-idx1-ubyte.gz" in msg
    assert str(tmp_path / "fm") in msg and "unreachable" in msg
    assert not (tmp_path / "fm").exists()          # no empty folder left behind
    monkeypatch.setenv("MINIGLUON_DATA", str(tmp_path / "store"))
    with pytest.raises(ds.DatasetNotFoundError, match="cifar-10-batches-py/test_batch") as err:
        vision.CIFAR10(train=False)
    assert os.path.join(str(tmp_path / "store"), "cifar10") in str(err.value)


def test_downloads_are_checked_against_their_digest(tmp_path, monkeypatch):
    images = RNG.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    src = tmp_path / "src"
    src.mkdir()
    write_idx(str(src / "t10k-images-idx3-ubyte.gz"), images)
    write_idx(str(src / "t10k-labels-idx1-ubyte.gz"), np.array([1, 2, 3]))
    fetched = []

    def fake_download(url, path=None, **kwargs):
        fetched.append(url)
        with open(src / os.path.basename(url), "rb") as fin, open(path, "wb") as fout:
            fout.write(fin.read())
        return path
    monkeypatch.setattr(ds, "download", fake_download)
    with pytest.raises(ds.DatasetNotFoundError, match="md5 of the download"):
        vision.MNIST(root=str(tmp_path / "m"), train=False)
    assert not os.path.exists(tmp_path / "m" / "t10k-images-idx3-ubyte.gz")  # bad file removed
    digests = {n: (None, ds._digest(str(src / n), "md5")) for n in os.listdir(src)}
    monkeypatch.setattr(vision.MNIST, "_digests", digests)
    data = vision.MNIST(root=str(tmp_path / "m"), train=False)
    np.testing.assert_array_equal(data._data.asnumpy()[:, :, :, 0], images)
    assert fetched[0].startswith("https://ossci-datasets.s3.amazonaws.com/mnist/")


def test_truncated_or_foreign_idx_files_name_the_file(tmp_path):
    write_idx(str(tmp_path / "train-images-idx3-ubyte.gz"), np.zeros((4, 28, 28)))
    write_idx(str(tmp_path / "train-labels-idx1-ubyte.gz"), np.zeros(4))
    good = (tmp_path / "train-images-idx3-ubyte.gz").read_bytes()
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(good[:len(good) // 2])
    with pytest.raises(ds.DatasetFormatError, match="train-images-idx3-ubyte.gz.*truncated"):
        vision.MNIST(root=str(tmp_path))
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write(bytes([0, 0, 8, 3]) + struct.pack(">3I", 5, 28, 28) + bytes(100))
    with pytest.raises(ds.DatasetFormatError, match=r"announces shape \(5, 28, 28\)"):
        vision.MNIST(root=str(tmp_path))
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write(b"not an idx file at all")
    with pytest.raises(ds.DatasetFormatError, match="not an IDX file"):
        vision.MNIST(root=str(tmp_path))


# ---- CIFAR in the real formats -------------------------------------------------------------
def cifar_arrays(n, fine=False):
    images = RNG.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    coarse = RNG.integers(0, 20 if fine else 10, n)
    return images, coarse, RNG.integers(0, 100, n)


def write_pickle_batch(path, images, labels, keys):
    batch = {"batch_label": "testing batch 1 of 1",
             "data": images.transpose(0, 3, 1, 2).reshape(len(images), 3072),
             "filenames": [f"img_{i}.png" for i in range(len(images))]}
    batch.update({k: list(map(int, v)) for k, v in zip(keys, labels)})
    with open(path, "wb") as f:
        pickle.dump(batch, f, protocol=2)


def write_bin_batch(path, images, labels):
    chw = images.transpose(0, 3, 1, 2).reshape(len(images), 3072)
    cols = [np.asarray(l, np.uint8)[:, None] for l in labels]
    with open(path, "wb") as f:
        f.write(np.concatenate(cols + [chw], axis=1).tobytes())


def make_cifar10(root, fmt, n=4):
    folder = root / ("cifar-10-batches-py" if fmt == "py" else "cifar-10-batches-bin")
    folder.mkdir(parents=True)
    parts = []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        images, labels, _ = cifar_arrays(n)
        if fmt == "py":
            write_pickle_batch(folder / name, images, [labels], ["labels"])
        else:
            write_bin_batch(folder / f"{name}.bin", images, [labels])
        parts.append((images, labels))
    return parts


@pytest.mark.parametrize("fmt", ["py", "bin"])
def test_cifar10_reads_both_formats(tmp_path, fmt):
    parts = make_cifar10(tmp_path, fmt)
    train = vision.CIFAR10(root=str(tmp_path), train=True)
    test = vision.CIFAR10(root=str(tmp_path), train=False)
    assert len(train) == 20 and len(test) == 4
    np.testing.assert_array_equal(train._data.asnumpy(),
                                  np.concatenate([p[0] for p in parts[:5]]))
    np.testing.assert_array_equal(train._label, np.concatenate([p[1] for p in parts[:5]]))
    x, y = test[3]
    assert x.shape == (32, 32, 3) and x.dtype == np.uint8 and isinstance(y, np.int32)
    np.testing.assert_array_equal(x.asnumpy(), parts[5][0][3])
    assert y == parts[5][1][3]


@pytest.mark.parametrize("fmt", ["py", "bin"])
@pytest.mark.parametrize("fine", [False, True])
def test_cifar100_coarse_and_fine_labels(tmp_path, fmt, fine):
    images, coarse, fine_labels = cifar_arrays(6, fine=True)
    if fmt == "py":
        (tmp_path / "cifar-100-python").mkdir()
        write_pickle_batch(tmp_path / "cifar-100-python" / "test", images,
                           [coarse, fine_labels], ["coarse_labels", "fine_labels"])
    else:
        write_bin_batch(tmp_path / "test.bin", images, [coarse, fine_labels])   # MXNet layout
    data = vision.CIFAR100(root=str(tmp_path), fine_label=fine, train=False)
    np.testing.assert_array_equal(data._label, fine_labels if fine else coarse)
    np.testing.assert_array_equal(data[5][0].asnumpy(), images[5])


def test_cifar_corrupt_files_are_named(tmp_path):
    make_cifar10(tmp_path / "a", "bin")
    test_bin = tmp_path / "a" / "cifar-10-batches-bin" / "test_batch.bin"
    test_bin.write_bytes(test_bin.read_bytes()[:-100])
    with pytest.raises(ds.DatasetFormatError, match=r"test_batch\.bin.*3073-byte"):
        vision.CIFAR10(root=str(tmp_path / "a"), train=False)
    make_cifar10(tmp_path / "b", "py")
    test_py = tmp_path / "b" / "cifar-10-batches-py" / "test_batch"
    test_py.write_bytes(test_py.read_bytes()[:500])
    with pytest.raises(ds.DatasetFormatError, match="test_batch.*corrupt or truncated"):
        vision.CIFAR10(root=str(tmp_path / "b"), train=False)


class Evil:
    def __reduce__(self):
        return (os.system, ("echo should-not-run",))


def test_cifar_pickles_cannot_run_code(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    with open(folder / "test_batch", "wb") as f:
        pickle.dump({"data": Evil(), "labels": []}, f)
    with pytest.raises(ds.DatasetFormatError, match="refusing to load"):
        vision.CIFAR10(root=str(tmp_path), train=False)


def test_cifar_download_unpacks_the_python_archive(tmp_path, monkeypatch):
    make_cifar10(tmp_path / "src", "py")
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "src" / "cifar-10-batches-py", arcname="cifar-10-batches-py")

    def fake_download(url, path=None, **kwargs):
        assert url == "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
        with open(path, "wb") as f:
            f.write(archive.read_bytes())
        return path
    monkeypatch.setattr(ds, "download", fake_download)
    md5 = ds._digest(str(archive), "md5")
    monkeypatch.setattr(vision.CIFAR10, "_archives", [(vision.CIFAR10._archives[0][0], None, md5)])
    data = vision.CIFAR10(root=str(tmp_path / "root"), train=False)
    assert len(data) == 4


# ---- image folders, RecordIO images, synthetic digits ---------------------------------------
def test_image_folder_dataset(tmp_path):
    pictures = {}
    for cls, n in (("cat", 2), ("dog", 1)):
        (tmp_path / cls).mkdir()
        for i in range(n):
            img = RNG.integers(0, 256, (5, 6, 3), dtype=np.uint8)
            (tmp_path / cls / f"{i}.png").write_bytes(image.imencode(img))
            pictures[(cls, i)] = img
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    (tmp_path / "README").write_text("not a class")
    with pytest.warns(UserWarning, match="notes.txt|README"):
        data = vision.ImageFolderDataset(str(tmp_path))
    assert data.synsets == ["cat", "dog"] and len(data) == 3
    assert [label for _, label in data.items] == [0, 0, 1]
    img, label = data[2]
    assert label == 1 and img.shape == (5, 6, 3)
    np.testing.assert_array_equal(img.asnumpy(), pictures[("dog", 0)])
    with pytest.warns(UserWarning):
        gray = vision.ImageFolderDataset(str(tmp_path), flag=0, transform=lambda d, l: d)[0]
    assert gray.shape == (5, 6, 1)


def test_image_folder_of_jpeg_files_through_transforms_and_workers(tmp_path):
    yy, xx = np.mgrid[0:40, 0:50]
    smooth = {}
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(3):
            img = np.stack([xx * 5, yy * 6, (xx + yy + 40 * i) % 256], axis=2).astype(np.uint8)
            (tmp_path / cls / f"{i}.jpg").write_bytes(image.imencode(img, ".jpg", quality=95))
            smooth[(cls, i)] = img
    data = vision.ImageFolderDataset(str(tmp_path))
    assert len(data) == 6 and data.synsets == ["a", "b"]
    img, label = data[4]
    assert label == 1 and img.shape == (40, 50, 3)
    assert np.abs(img.asnumpy().astype(int) - smooth[("b", 1)]).mean() < 2
    pipeline = transforms.Compose([transforms.RandomResizedCrop(16),
                                   transforms.RandomFlipLeftRight(), transforms.ToTensor()])
    loader = gluon.data.DataLoader(data.transform_first(pipeline), batch_size=3,
                                   num_workers=2)
    batches = list(loader)
    assert [b[0].shape for b in batches] == [(3, 3, 16, 16)] * 2
    labels = np.concatenate([b[1].asnumpy() for b in batches])
    assert sorted(labels.tolist()) == [0] * 3 + [1] * 3


def test_image_record_dataset(tmp_path):
    rec, idx = str(tmp_path / "imgs.rec"), str(tmp_path / "imgs.idx")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    rgb = [RNG.integers(0, 256, (4, 4, 3), dtype=np.uint8) for _ in range(3)]
    for i, img in enumerate(rgb):
        header = recordio.IRHeader(0, float(i), i, 0)
        writer.write_idx(i, recordio.pack_img(header, img[:, :, ::-1], img_fmt=".png"))
    writer.close()
    data = vision.ImageRecordDataset(rec)
    assert len(data) == 3
    img, label = data[1]
    assert label == 1.0
    np.testing.assert_array_equal(img.asnumpy(), rgb[1])


def test_synthetic_digits_are_deterministic_and_announce_themselves(caplog):
    with caplog.at_level(logging.WARNING):
        a = vision.SyntheticDigits(num_samples=64, seed=1)
    assert any("SYNTHETIC" in r.message and "NOT MNIST" in r.message and
               r.levelno == logging.WARNING for r in caplog.records)
    b = vision.SyntheticDigits(num_samples=64, seed=1)
    other = vision.SyntheticDigits(num_samples=64, seed=2)
    test = vision.SyntheticDigits(num_samples=64, seed=1, train=False)
    np.testing.assert_array_equal(a._data.asnumpy(), b._data.asnumpy())
    assert not np.array_equal(a._data.asnumpy(), other._data.asnumpy())
    assert not np.array_equal(a._data.asnumpy(), test._data.asnumpy())
    x, y = a[0]
    assert x.shape == (28, 28, 1) and x.dtype == np.uint8 and 0 <= y <= 9
    assert set(a._label.tolist()) <= set(range(10)) and len(set(a._label.tolist())) >= 8
    ink = a._data.asnumpy().reshape(64, -1)
    assert ((ink > 128).mean(axis=1) > 0.03).all()          # every image holds a digit


def test_synthetic_digits_are_learnable_by_a_linear_model():
    """A weak model separates the classes, so a LeNet on it has a clear signal."""
    train = vision.SyntheticDigits(num_samples=2000, seed=0)
    test = vision.SyntheticDigits(num_samples=400, seed=0, train=False)
    x = train._data.asnumpy().reshape(len(train), -1).astype(np.float32) / 255
    xt = test._data.asnumpy().reshape(len(test), -1).astype(np.float32) / 255
    w, b = np.zeros((784, 10), np.float32), np.zeros(10, np.float32)
    for _ in range(15):
        for i in range(0, len(x), 100):
            z = x[i:i + 100] @ w + b
            p = np.exp(z - z.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            p[np.arange(len(p)), train._label[i:i + 100]] -= 1
            w -= 0.1 * x[i:i + 100].T @ p / len(p)
            b -= 0.1 * p.mean(0)
    assert ((xt @ w + b).argmax(1) == test._label).mean() > 0.8
