"""Where dataset files live and how missing ones are fetched: the default folder, downloads
checked against their SHA-1/MD5 digests, archives unpacked without escaping their folder,
and `DownloadedDataset`, the base of the datasets held in memory after loading such files.
"""
import hashlib
import logging
import os

import numpy as np

from ..... import config
from .....base import MXNetError
from .....context import cpu
from .....io.format_error import DatasetFormatError
from .....ndarray import array as nd_array
from .....ndarray.ndarray import NDArray
from ....utils import download
from ...dataset import Dataset

__all__ = ["MXNET_S3", "DatasetNotFoundError", "default_root", "fetch", "safe_extract",
           "DownloadedDataset"]

_log = logging.getLogger(__name__)
MXNET_S3 = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/gluon/dataset/"


class DatasetNotFoundError(MXNetError, FileNotFoundError):
    """The data files are not on disk and could not be downloaded."""


def default_root(name):
    """Where dataset `name` is looked for when no root is given (see the module doc)."""
    env = config.data_dir()
    if env:
        return os.path.join(env, name)
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))
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


def fetch(sources, dest):
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


def safe_extract(archive, dest):
    import tarfile   # here, not at the top: most processes never open an archive
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            target = os.path.realpath(os.path.join(dest, member.name))
            if not target.startswith(os.path.realpath(dest) + os.sep) or \
                    not (member.isfile() or member.isdir()):
                raise DatasetFormatError(f"{archive}: refusing to extract {member.name!r}")
        tar.extractall(dest)


class DownloadedDataset(Dataset):
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
                fetch(sources[name], os.path.join(self._root, name))
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
