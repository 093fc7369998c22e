"""Vision datasets: MNIST, FashionMNIST, CIFAR10/100, image folders, RecordIO image files,
and SyntheticDigits (procedural MNIST-shaped digits for offline smoke tests).

Samples are `(image, label)`: an HWC uint8 NDArray and an int32 label, as in MXNet, passed
through `transform(image, label)` when one is given.

Where the files live: the `root` argument, by default `$MINIGLUON_DATA/<name>` when that
variable is set, else the repository's `datasets/<name>` folder (`~/.minigluon/datasets/<name>`
for an installed package). Files already there are used as they are. Missing files are
downloaded from their canonical locations and checked against known SHA-1/MD5 digests; with
no network the error names the files and the folder to put them in.

Example::

    train = gluon.data.vision.MNIST(train=True).transform_first(transforms.ToTensor())
"""
import gzip
import hashlib
import logging
import os
import pickle
import struct
import tarfile
import warnings
import zlib

import numpy as np

from .... import config, image, recordio
from ....base import MXNetError
from ....context import cpu
from ....ndarray import array as nd_array
from ....ndarray.ndarray import NDArray
from ...utils import download
from ..dataset import Dataset, RecordFileDataset

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "CIFAR100", "ImageRecordDataset",
           "ImageFolderDataset", "SyntheticDigits", "DatasetNotFoundError",
           "DatasetFormatError"]

_log = logging.getLogger(__name__)
_MXNET_S3 = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/gluon/dataset/"


class DatasetNotFoundError(MXNetError, FileNotFoundError):
    """The data files are not on disk and could not be downloaded."""


class DatasetFormatError(MXNetError, ValueError):
    """A data file that is corrupt, truncated or not in the expected format."""


def default_root(name):
    """Where dataset `name` is looked for when no root is given (see the module doc)."""
    env = config.data_dir()
    if env:
        return os.path.join(env, name)
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
    if os.path.isdir(os.path.join(repo, "datasets")):
        return os.path.join(repo, "datasets", name)
    return os.path.join(os.path.expanduser("~"), ".minigluon", "datasets", name)


# ---- fetching files -----------------------------------------------------------------------
def _digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as fin:
        for chunk in iter(lambda: fin.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fetch(sources, dest):
    """Download `dest` from the first of `sources` ((url, sha1, md5) tuples) that works and
    whose content matches its digest; a mismatching file is deleted."""
    errors = []
    for url, sha1, md5 in sources:
        try:
            download(url, path=dest, overwrite=True, retries=1)
            for algo, want in (("sha1", sha1), ("md5", md5)):
                if want and _digest(dest, algo) != want:
                    os.remove(dest)
                    raise MXNetError(f"{algo} of the download is not {want}")
            return dest
        except (MXNetError, OSError) as err:
            errors.append(f"{url}: {err}")
    raise MXNetError("; ".join(errors))


class _DownloadedDataset(Dataset):
    """Arrays loaded once into `_data` (NDArray, N x H x W x C uint8) and `_label`
    (NumPy int32)."""

    _name = None         # folder name under the default root

    def __init__(self, root, transform):
        self._root = os.path.expanduser(root if root is not None else default_root(self._name))
        self._transform = transform
        self._data = None
        self._label = None
        self._get_data()

    def __getitem__(self, idx):
        # index the NumPy buffer directly: an NDArray view per sample without op dispatch
        data = NDArray(self._data._data[idx], self._data.context)
        if self._transform is not None:
            return self._transform(data, self._label[idx])
        return data, self._label[idx]

    def __len__(self):
        return len(self._label)

    def _set(self, data, label, source):
        if len(data) != len(label):
            raise DatasetFormatError(f"{source}: {len(data)} images but {len(label)} labels")
        self._data = nd_array(data, ctx=cpu(), dtype=np.uint8)
        self._label = np.asarray(label, dtype=np.int32)

    def _missing(self, names, reason, url_hint):
        cls = type(self).__name__
        return DatasetNotFoundError(
            f"{cls}: {', '.join(names)} not found in {self._root!r}, and downloading failed "
            f"({reason}). help: get the files (for example from {url_hint}) and put them in "
            f"{self._root!r} under exactly these names, or pass root='<folder>' to {cls}(), or "
            f"set MINIGLUON_DATA to a folder that holds a '{self._name}' sub-folder")

    def _ensure(self, names, sources):
        """Paths of `names` in root, downloading the missing ones."""
        paths = [os.path.join(self._root, n) for n in names]
        missing = [n for n, p in zip(names, paths) if not os.path.exists(p)]
        created = self._make_root()
        for name in missing:
            _log.info("%s: downloading %s into %s", type(self).__name__, name, self._root)
            try:
                _fetch(sources[name], os.path.join(self._root, name))
            except (MXNetError, OSError) as err:
                self._drop_root_if_empty(created)
                raise self._missing(missing, err, sources[name][0][0]) from None
        return paths

    def _make_root(self):
        """Create the root folder; True if it did not exist."""
        created = not os.path.isdir(self._root)
        os.makedirs(self._root, exist_ok=True)
        return created

    def _drop_root_if_empty(self, created):
        # a failed download should not leave an empty folder behind (e.g. in datasets/)
        if created and os.path.isdir(self._root) and not os.listdir(self._root):
            os.rmdir(self._root)


# ---- MNIST and Fashion-MNIST --------------------------------------------------------------
def _read_idx(path, ndim):
    """An IDX file of unsigned bytes (gzip-compressed when its name ends in .gz)."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as fin:
            raw = fin.read()
    except (OSError, EOFError, zlib.error) as err:
        raise DatasetFormatError(f"{path}: unreadable ({err}); the file is corrupt or "
                                 "truncated: delete it and download it again") from None
    header = 4 + 4 * ndim
    if len(raw) < header or raw[:4] != bytes([0, 0, 0x08, ndim]):
        raise DatasetFormatError(f"{path}: not an IDX file of unsigned bytes with {ndim} "
                                 f"dimension(s) (starts with {raw[:4].hex() or 'nothing'})")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    count = int(np.prod(dims))
    if len(raw) - header != count:
        raise DatasetFormatError(f"{path}: the header announces shape {dims} ({count} bytes) "
                                 f"but {len(raw) - header} bytes follow; the file is truncated "
                                 "or corrupt")
    return np.frombuffer(raw, np.uint8, count, header).reshape(dims)


class MNIST(_DownloadedDataset):
    """MNIST handwritten digits: (28, 28, 1) uint8 images, labels 0-9.

    Reads `train-images-idx3-ubyte.gz`, `train-labels-idx1-ubyte.gz` (train=True) or
    `t10k-images-idx3-ubyte.gz`, `t10k-labels-idx1-ubyte.gz` (train=False) from `root`.

    Parameters
    ----------
    root : str, optional
        Folder of the files; see the module doc for the default.
    train : bool
        Training or test set.
    transform : callable, optional
        Called as `transform(data, label)` on each sample.
    """

    _name = "mnist"
    _mirrors = (("https://ossci-datasets.s3.amazonaws.com/mnist/", "md5"),
                (_MXNET_S3 + "mnist/", "sha1"))
    _digests = {
        "train-images-idx3-ubyte.gz": ("6c95f4b05d2bf285e1bfb0e7960c31bd3b3f8a7d",
                                       "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        "train-labels-idx1-ubyte.gz": ("2a80914081dc54586dbdf242f9805a6b8d2a15fc",
                                       "d53e105ee54ea40749a09fcbcd1e9432"),
        "t10k-images-idx3-ubyte.gz": ("c3a25af1f52dad7f726cce8cacb138654b760d48",
                                      "9fb629c4189551a2d022fa330f9573f3"),
        "t10k-labels-idx1-ubyte.gz": ("763e7fa3757d93b0cdec073cef058b2004252c17",
                                      "ec29112dd5afa0611ce80d1b7f02629c"),
    }

    def __init__(self, root=None, train=True, transform=None):
        self._train = train
        super().__init__(root, transform)

    def _sources(self, name):
        sha1, md5 = self._digests[name]
        return [(base + name, sha1 if kind == "sha1" else None, md5 if kind == "md5" else None)
                for base, kind in self._mirrors]

    def _get_data(self):
        prefix = "train" if self._train else "t10k"
        names = [f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-labels-idx1-ubyte.gz"]
        paths = [os.path.join(self._root, n) for n in names]
        # an uncompressed copy (same name without .gz) is used when it is all there is
        paths = [p if os.path.exists(p) or not os.path.exists(p[:-3]) else p[:-3]
                 for p in paths]
        if not all(os.path.exists(p) for p in paths):
            paths = self._ensure(names, {n: self._sources(n) for n in names})
        images = _read_idx(paths[0], 3)
        labels = _read_idx(paths[1], 1)
        self._set(images[:, :, :, None], labels, paths[0])


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: (28, 28, 1) uint8 clothing images, labels 0-9, in the same
    files and layout as MNIST (see MNIST for the parameters)."""

    _name = "fashion-mnist"
    _mirrors = (("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", "md5"),
                (_MXNET_S3 + "fashion-mnist/", "sha1"))
    _digests = {
        "train-images-idx3-ubyte.gz": ("0cf37b0d40ed5169c6b3aba31069a9770ac9043d",
                                       "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        "train-labels-idx1-ubyte.gz": ("236021d52f1e40852b06a4c3008d8de8aef1e40b",
                                       "25c81989df183df01b3e8a0aad5dffbe"),
        "t10k-images-idx3-ubyte.gz": ("626ed6a7c06dd17c0eec72fa3be1740f146a2863",
                                      "bef4ecab320f06d8554ea6380940ec79"),
        "t10k-labels-idx1-ubyte.gz": ("17f9ab60e7257a1620f4ad76bbbaf857c3920701",
                                      "bb300cfdad3c16e7a12a480ee83cd310"),
    }


# ---- CIFAR --------------------------------------------------------------------------------
class _BatchUnpickler(pickle.Unpickler):
    """Loads CIFAR's pickled batches (dicts of lists and NumPy arrays) and refuses any other
    global, so a doctored file cannot run code."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"),
                ("numpy._core.multiarray", "_reconstruct"),
                ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
                ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
                ("numpy", "ndarray"), ("numpy", "dtype"), ("copy_reg", "_reconstructor"),
                ("copyreg", "_reconstructor"), ("__builtin__", "object"),
                ("builtins", "object"), ("_codecs", "encode")}   # protocol-2 bytes

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a CIFAR batch "
                                         "holds only dicts, lists and NumPy arrays")
        return super().find_class(module, name)


def _read_pickle_batch(path, label_key):
    try:
        with open(path, "rb") as fin:
            batch = _BatchUnpickler(fin, encoding="latin1").load()
        data = np.asarray(batch["data"], dtype=np.uint8)
        labels = np.asarray(batch[label_key], dtype=np.int32)
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError,
            AttributeError, IndexError) as err:
        raise DatasetFormatError(f"{path}: not a readable CIFAR python batch "
                                 f"({type(err).__name__}: {err}); the file is corrupt or "
                                 "truncated") from None
    if data.ndim != 2 or data.shape[1] != 3072 or len(labels) != len(data):
        raise DatasetFormatError(f"{path}: expected 'data' of shape (N, 3072) and N labels, got "
                                 f"{data.shape} and {len(labels)}")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


def _read_binary_batch(path, label_bytes, label_index):
    with open(path, "rb") as fin:
        raw = fin.read()
    size = 3072 + label_bytes
    if len(raw) == 0 or len(raw) % size:
        raise DatasetFormatError(f"{path}: {len(raw)} bytes is not a whole number of "
                                 f"{size}-byte CIFAR records; the file is truncated or corrupt")
    records = np.frombuffer(raw, np.uint8).reshape(-1, size)
    data = records[:, label_bytes:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return data, records[:, label_index].astype(np.int32)


def _safe_extract(archive, dest):
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            target = os.path.realpath(os.path.join(dest, member.name))
            if not target.startswith(os.path.realpath(dest) + os.sep) or \
                    not (member.isfile() or member.isdir()):
                raise DatasetFormatError(f"{archive}: refusing to extract {member.name!r}")
        tar.extractall(dest)


class CIFAR10(_DownloadedDataset):
    """CIFAR-10: (32, 32, 3) uint8 images in 10 classes.

    Reads either format of the original distribution from `root`: the python version
    (`cifar-10-batches-py/data_batch_1..5`, `test_batch`) or the binary version
    (`cifar-10-batches-bin/data_batch_1..5.bin`, `test_batch.bin`, also accepted directly in
    `root` as MXNet lays them out). When neither is there, `cifar-10-python.tar.gz` is
    downloaded from www.cs.toronto.edu, checked and unpacked.

    Parameters
    ----------
    root : str, optional
    train : bool
    transform : callable, optional
        Called as `transform(data, label)`.
    """

    _name = "cifar10"
    _py_folder, _bin_folder = "cifar-10-batches-py", "cifar-10-batches-bin"
    _train_files = [f"data_batch_{i}" for i in range(1, 6)]
    _test_files = ["test_batch"]
    _label_key, _label_bytes, _label_index = "labels", 1, 0
    _archives = [("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", None,
                  "c58f30108f718f92721af3b95e74349a"),
                 (_MXNET_S3 + "cifar10/cifar-10-binary.tar.gz",
                  "fab780a1e191a7eda0f345501ccd62d20f7ed891", None)]

    def __init__(self, root=None, train=True, transform=None):
        self._train = train
        super().__init__(root, transform)

    def _layouts(self):
        """(reader, paths) for each place the files may be, python format first."""
        names = self._train_files if self._train else self._test_files
        yield "py", [os.path.join(self._root, self._py_folder, n) for n in names]
        for folder in (os.path.join(self._root, self._bin_folder), self._root):
            yield "bin", [os.path.join(folder, n + ".bin") for n in names]

    def _find(self):
        for kind, paths in self._layouts():
            if all(os.path.exists(p) for p in paths):
                return kind, paths
        return None

    def _download(self):
        url, sha1, md5 = self._archives[0]
        archive = os.path.join(self._root, os.path.basename(url))
        created = self._make_root()
        try:
            if not os.path.exists(archive):
                archive = self._fetch_archive()
            _safe_extract(archive, self._root)
        except (MXNetError, OSError, tarfile.TarError) as err:
            self._drop_root_if_empty(created)
            raise self._missing(self._expected_names(), err, url) from None

    def _expected_names(self):
        """The files looked for, in words, for error messages."""
        (_, py), (_, binary) = list(self._layouts())[:2]
        rel = [os.path.relpath(p, self._root) for p in py + binary]
        return [f"{', '.join(rel[:len(py)])} (or, in the binary format, "
                f"{', '.join(rel[len(py):])})"]

    def _fetch_archive(self):
        errors = []
        for url, sha1, md5 in self._archives:
            dest = os.path.join(self._root, os.path.basename(url))
            try:
                return _fetch([(url, sha1, md5)], dest)
            except MXNetError as err:
                errors.append(str(err))
        raise MXNetError("; ".join(errors))

    def _get_data(self):
        found = self._find()
        if found is None:
            self._download()
            found = self._find()
            if found is None:
                raise self._missing(self._expected_names(), "the archive did not hold them",
                                    self._archives[0][0])
        kind, paths = found
        if kind == "py":
            batches = [_read_pickle_batch(p, self._label_key) for p in paths]
        else:
            batches = [_read_binary_batch(p, self._label_bytes, self._label_index)
                       for p in paths]
        data = np.concatenate([b[0] for b in batches])
        label = np.concatenate([b[1] for b in batches])
        self._set(data, label, paths[0])


class CIFAR100(CIFAR10):
    """CIFAR-100: (32, 32, 3) uint8 images; 20 coarse classes, or 100 fine ones with
    `fine_label=True`.

    Reads `cifar-100-python/train`, `test` (python format) or `cifar-100-binary/train.bin`,
    `test.bin` (binary format, also accepted directly in `root`).

    Parameters
    ----------
    root : str, optional
    fine_label : bool
        Fine (100 classes) or coarse (20 super-classes) labels.
    train : bool
    transform : callable, optional
    """

    _name = "cifar100"
    _py_folder, _bin_folder = "cifar-100-python", "cifar-100-binary"
    _train_files, _test_files = ["train"], ["test"]
    _label_bytes = 2
    _archives = [("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz", None,
                  "eb9058c3a382ffc7106e4002c42a8d85"),
                 (_MXNET_S3 + "cifar100/cifar-100-binary.tar.gz",
                  "a0bb982c76b83111308126cc779a992fa506b90b", None)]

    def __init__(self, root=None, fine_label=False, train=True, transform=None):
        self._fine_label = fine_label
        self._label_key = "fine_labels" if fine_label else "coarse_labels"
        self._label_index = 1 if fine_label else 0
        super().__init__(root, train, transform)


# ---- image files and RecordIO -------------------------------------------------------------
class ImageRecordDataset(RecordFileDataset):
    """Images packed in a RecordIO file (e.g. by im2rec), with their `.idx` index.

    Samples are `(image NDArray HxWxC uint8, label)` where the label is the record header's
    (a float, or a float32 array for multi-label records).

    Parameters
    ----------
    filename : str
        Path of the `.rec` file; the index is the same path with `.idx`.
    flag : int
        1 colour (3 channels), 0 gray (1 channel).
    transform : callable, optional
        Called as `transform(data, label)`.
    """

    def __init__(self, filename, flag=1, transform=None):
        super().__init__(filename)
        self._flag = flag
        self._transform = transform

    def __getitem__(self, idx):
        header, payload = recordio.unpack(super().__getitem__(idx))
        img = image.imdecode(payload, self._flag)
        if self._transform is not None:
            return self._transform(img, header.label)
        return img, header.label


class ImageFolderDataset(Dataset):
    """Images stored one folder per class: `root/<class>/<image>`.

    Class folders are sorted by name; their index is the label. Files with other
    extensions are skipped with a warning.

    Attributes
    ----------
    synsets : list of str
        The class folder names; label i is `synsets[i]`.
    items : list of (str, int)
        Every image path with its label.

    Parameters
    ----------
    root : str
    flag : int
        1 colour (3 channels), 0 gray.
    transform : callable, optional
        Called as `transform(data, label)`.
    """

    _exts = (".jpg", ".jpeg", ".png", ".ppm", ".pgm", ".npy")

    def __init__(self, root, flag=1, transform=None):
        self._root = os.path.expanduser(root)
        self._flag = flag
        self._transform = transform
        if not os.path.isdir(self._root):
            raise DatasetNotFoundError(f"ImageFolderDataset: {self._root!r} is not a folder; "
                                       "help: pass a folder holding one sub-folder per class")
        self._list_images(self._root)

    def _list_images(self, root):
        self.synsets, self.items = [], []
        for folder in sorted(os.listdir(root)):
            path = os.path.join(root, folder)
            if not os.path.isdir(path):
                warnings.warn(f"ImageFolderDataset: ignoring {path}, which is not a folder",
                              stacklevel=3)
                continue
            label = len(self.synsets)
            self.synsets.append(folder)
            for filename in sorted(os.listdir(path)):
                full = os.path.join(path, filename)
                ext = os.path.splitext(filename)[1].lower()
                if ext not in self._exts:
                    warnings.warn(f"ImageFolderDataset: ignoring {full} of type {ext!r}; "
                                  f"supported: {', '.join(self._exts)}", stacklevel=3)
                    continue
                self.items.append((full, label))

    def __getitem__(self, idx):
        filename, label = self.items[idx]
        img = image.imread(filename, self._flag)
        if self._transform is not None:
            return self._transform(img, label)
        return img, label

    def __len__(self):
        return len(self.items)


# ---- synthetic digits ---------------------------------------------------------------------
def _arc(cx, cy, rx, ry, start, stop, n):
    """Points along an elliptic arc; angles in degrees, 0 = right, 90 = down."""
    t = np.radians(np.linspace(start, stop, n + 1))
    return list(zip(cx + rx * np.cos(t), cy + ry * np.sin(t)))


# Each digit: strokes (polylines) in a unit box, x to the right and y downwards.
_GLYPHS = {
    0: [_arc(0.5, 0.5, 0.42, 0.5, 0, 360, 12)],
    1: [[(0.3, 0.2), (0.55, 0.0), (0.55, 1.0)]],
    2: [_arc(0.5, 0.3, 0.42, 0.3, 180, 380, 6) + [(0.0, 1.0), (1.0, 1.0)]],
    3: [_arc(0.5, 0.27, 0.38, 0.27, 200, 450, 6), _arc(0.5, 0.73, 0.45, 0.27, 270, 520, 6)],
    4: [[(0.7, 1.0), (0.7, 0.0), (0.0, 0.68), (1.0, 0.68)]],
    5: [[(0.9, 0.0), (0.15, 0.0), (0.13, 0.5)] + _arc(0.5, 0.68, 0.45, 0.32, 215, 530, 7)],
    6: [_arc(0.58, 0.62, 0.45, 0.62, 290, 160, 6), _arc(0.5, 0.72, 0.42, 0.28, 0, 360, 10)],
    7: [[(0.0, 0.0), (1.0, 0.0), (0.35, 1.0)]],
    8: [_arc(0.5, 0.26, 0.36, 0.26, 0, 360, 10), _arc(0.5, 0.73, 0.44, 0.27, 0, 360, 10)],
    9: [_arc(0.5, 0.3, 0.42, 0.3, 0, 360, 10), [(0.92, 0.3), (0.85, 0.7), (0.6, 1.0)]],
}


def _glyph_segments():
    """(10, S, 2, 2) segment end points per digit, padded by repeating the first segment."""
    per_digit = []
    for digit in range(10):
        segs = [(a, b) for stroke in _GLYPHS[digit] for a, b in zip(stroke[:-1], stroke[1:])]
        per_digit.append(segs)
    longest = max(len(s) for s in per_digit)
    return np.array([s + [s[0]] * (longest - len(s)) for s in per_digit], np.float32)


def _render_digits(labels, rng):
    """Draw (N, 28, 28) uint8 digits: glyph strokes under a random affine map, with random
    stroke width, end-point jitter, brightness and noise."""
    n = len(labels)
    segs = _glyph_segments()[labels] + rng.normal(0, 0.025, (n, 1, 2, 2)).astype(np.float32)
    segs = segs + rng.normal(0, 0.015, segs.shape).astype(np.float32)
    angle = rng.uniform(-0.25, 0.25, n)
    shear = rng.uniform(-0.3, 0.3, n)
    scale = rng.uniform(0.8, 1.1, n)
    aspect = rng.uniform(0.75, 1.25, n)
    mats = np.empty((n, 2, 2))
    cos, sin = np.cos(angle), np.sin(angle)
    mats[:, 0, 0], mats[:, 0, 1] = cos * scale * aspect * 12, (-sin + shear * cos) * scale * 19
    mats[:, 1, 0], mats[:, 1, 1] = sin * scale * aspect * 12, (cos + shear * sin) * scale * 19
    shift = 13.5 + rng.uniform(-2, 2, (n, 1, 1, 2))
    pts = np.einsum("nij,nsej->nsei", mats, segs - 0.5).astype(np.float32) + shift
    half_width = rng.uniform(0.9, 1.9, (n, 1)).astype(np.float32)
    peak = rng.uniform(0.7, 1.0, (n, 1)).astype(np.float32)
    yy, xx = np.mgrid[0:28, 0:28].astype(np.float32)
    grid = np.stack([xx.ravel(), yy.ravel()], axis=1)               # (784, 2) as (x, y)
    out = np.empty((n, 784), np.uint8)
    for lo in range(0, n, 128):
        dist = _segment_distance(grid, pts[lo:lo + 128])
        ink = np.clip(half_width[lo:lo + 128] + 0.5 - dist, 0, 1) * peak[lo:lo + 128]
        noisy = ink * 255 + rng.normal(0, 6, ink.shape)
        out[lo:lo + 128] = np.clip(noisy, 0, 255).astype(np.uint8)
    return out.reshape(n, 28, 28)


def _segment_distance(grid, pts):
    """Distance (n, P) from each grid point to the nearest of the n x S segments."""
    a, b = pts[:, :, 0, None, :], pts[:, :, 1, None, :]              # (n, S, 1, 2)
    ab = b - a
    px, py = grid[:, 0] - a[..., 0], grid[:, 1] - a[..., 1]          # (n, S, P)
    inv = 1.0 / np.maximum((ab ** 2).sum(-1), 1e-6)
    t = np.clip((px * ab[..., 0] + py * ab[..., 1]) * inv, 0, 1)
    dx, dy = px - t * ab[..., 0], py - t * ab[..., 1]
    return np.sqrt((dx * dx + dy * dy).min(axis=1))


class SyntheticDigits(_DownloadedDataset):
    """Procedurally drawn digits shaped like MNIST: (28, 28, 1) uint8 images, labels 0-9.

    SYNTHETIC DATA, NOT MNIST: each digit is a hand-made stroke glyph under a random affine
    distortion with random stroke width and noise. Use it for smoke tests and examples on
    machines without the real files; a LeNet learns it well (> 90 %), but numbers measured
    on it say nothing about MNIST. Creating one logs a WARNING saying so.

    Parameters
    ----------
    num_samples : int, optional
        Number of samples (default 10000 for train, 2000 for test).
    train : bool
        Train and test sets come from different random streams.
    seed : int
        Same seed and `train`, same data.
    transform : callable, optional
        Called as `transform(data, label)`.
    """

    _name = "synthetic-digits"

    def __init__(self, num_samples=None, train=True, seed=0, transform=None):
        if num_samples is None:
            num_samples = 10000 if train else 2000
        if not isinstance(num_samples, (int, np.integer)) or num_samples <= 0:
            raise MXNetError(f"SyntheticDigits: num_samples must be a positive int, got "
                             f"{num_samples!r}")
        self._num_samples, self._train, self._seed = int(num_samples), train, seed
        _log.warning("*** SyntheticDigits: this data is SYNTHETIC (procedurally drawn digits), "
                     "NOT MNIST. Accuracies measured on it say nothing about MNIST. ***")
        super().__init__("", transform)

    def _get_data(self):
        rng = np.random.default_rng([int(self._seed), 1 if self._train else 2])
        labels = rng.integers(0, 10, self._num_samples)
        images = _render_digits(labels, rng)
        self._set(images[:, :, :, None], labels, "SyntheticDigits")
