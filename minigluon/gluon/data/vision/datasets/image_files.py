"""Datasets of encoded image files: a RecordIO file of packed images (`ImageRecordDataset`)
and a folder per class (`ImageFolderDataset`), decoded with `mx.image` as they are read."""
import os
import warnings

from ..... import image, recordio
from ...dataset import Dataset, RecordFileDataset
from .downloads import DatasetNotFoundError

__all__ = ["ImageRecordDataset", "ImageFolderDataset"]


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

    _exts = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm",
             ".pgm", ".pbm", ".pnm")

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
