"""CIFAR-10 and CIFAR-100: (32, 32, 3) uint8 images read from either the python (pickled)
or the binary format of the original distribution; the pickles are read by an unpickler
that refuses every global but NumPy's array reconstruction, so a doctored file cannot run
code."""
import os
import pickle

import numpy as np

from .....base import MXNetError
from .....io.format_error import DatasetFormatError
from .downloads import MXNET_S3, DownloadedDataset, fetch, safe_extract

__all__ = ["CIFAR10", "CIFAR100"]


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


class CIFAR10(DownloadedDataset):
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
                 (MXNET_S3 + "cifar10/cifar-10-binary.tar.gz",
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
        import tarfile   # here, not at the top: most processes never open an archive
        url, sha1, md5 = self._archives[0]
        archive = os.path.join(self._root, os.path.basename(url))
        created = self._make_root()
        try:
            if not os.path.exists(archive):
                archive = self._fetch_archive()
            safe_extract(archive, self._root)
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
                return fetch([(url, sha1, md5)], dest)
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
                 (MXNET_S3 + "cifar100/cifar-100-binary.tar.gz",
                  "a0bb982c76b83111308126cc779a992fa506b90b", None)]

    def __init__(self, root=None, fine_label=False, train=True, transform=None):
        self._fine_label = fine_label
        self._label_key = "fine_labels" if fine_label else "coarse_labels"
        self._label_index = 1 if fine_label else 0
        super().__init__(root, train, transform)
