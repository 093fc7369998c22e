"""`ImageRecordIter`: batches of images decoded from a RecordIO file (`.rec`, e.g. by im2rec).

Each sample goes through MXNet's default augmenter: resize of the shorter edge (`resize`),
crop to `data_shape` (random with `rand_crop`, else centred), mirror (`rand_mirror`), then
`(pixel - mean) * scale / std` per channel, as float32 CHW in RGB order.

Out of scope: the other MXNet augmentations (random_resized_crop, rotation, colour jitter,
PCA noise, padding, mean images) and image lists (`path_imglist`); they raise
NotImplementedError unless left at their defaults. Use `gluon.data.vision` and its
transforms for those.
"""
import logging
import weakref

import numpy as np

from .. import config, image, recordio
from ..recordio import RecordIOError
from .base import check_count
from .single_source import PLUMBING_ARGS, SingleSourceIter, check_kwargs, split_part

__all__ = ["ImageRecordIter"]

_log = logging.getLogger(__name__)

# MXNet arguments that only tune how MXNet's shuffle reads chunks: we shuffle whole parts.
_ACCEPTED = PLUMBING_ARGS | {"shuffle_chunk_size", "shuffle_chunk_seed"}

# MXNet's augmentation arguments minigluon does not implement, with MXNet's defaults.
_UNSUPPORTED = {
    "path_imglist": "", "mean_img": "", "aug_seq": "aug_default",
    "random_resized_crop": False, "max_rotate_angle": 0, "rotate": -1,
    "max_aspect_ratio": 0, "min_aspect_ratio": None, "max_shear_ratio": 0,
    "max_crop_size": -1, "min_crop_size": -1, "max_random_scale": 1, "min_random_scale": 1,
    "max_random_area": 1, "min_random_area": 1, "max_img_size": 1e10, "min_img_size": 0,
    "brightness": 0, "contrast": 0, "saturation": 0, "pca_noise": 0, "random_h": 0,
    "random_s": 0, "random_l": 0, "max_random_contrast": 0, "max_random_illumination": 0,
    "pad": 0, "fill_value": 255,
}

_DECODE_FLAG = {1: 0, 3: 1, 4: -1}      # channels -> imdecode flag


class _RecordSource:
    """Random access to the records of a `.rec` file: through its `.idx` index, or through
    offsets found by reading the file once."""

    def __init__(self, path_imgrec, path_imgidx):
        self.path = path_imgrec
        if path_imgidx:
            self._rec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
            self._offsets = [self._rec.idx[key] for key in self._rec.keys]
        else:
            self._rec = recordio.MXRecordIO(path_imgrec, "r")
            self._offsets = self._scan()
        if not self._offsets:
            raise RecordIOError(f"ImageRecordIter: {path_imgrec!r} holds no records")

    def _scan(self):
        offsets = []
        while True:
            offset = self._rec.tell()
            if self._rec.read() is None:
                return offsets
            offsets.append(offset)

    def __len__(self):
        return len(self._offsets)

    def read(self, position):
        self._rec.handle.seek(self._offsets[position])
        record = self._rec.read()
        if record is None:
            raise RecordIOError(f"ImageRecordIter: record {position} of {self.path!r} should "
                                f"start at byte {self._offsets[position]}, past the end of "
                                "the file (truncated file, or a stale .idx)")
        return record

    def close(self):
        self._rec.close()


class _EpochOrder:
    """The positions one part reads, epoch after epoch (reshuffled each epoch if asked).

    With `round_batch`, the short last batch of an epoch is completed with the first
    samples of the next epoch's order, and that epoch then starts after them (MXNet's
    behaviour: over many epochs every sample is read equally often). Without it, the batch
    is completed from the start of the current epoch and the next epoch starts afresh.
    """

    def __init__(self, start, stop, shuffle, rng, round_batch):
        self._range = (start, stop)
        self._shuffle, self._rng, self._round_batch = shuffle, rng, round_batch
        self._order, self._pos, self._borrowed = self._draw(), 0, False

    def _draw(self):
        order = np.arange(*self._range)
        if self._shuffle:
            self._rng.shuffle(order)
        return order

    def new_epoch(self):
        if not self._borrowed or self._pos >= len(self._order):
            self._order, self._pos = self._draw(), 0
        self._borrowed = False

    def take(self, size):
        """(positions, pad) of the next batch, or None when the epoch is over."""
        if self._borrowed or self._pos >= len(self._order):
            return None
        got = self._order[self._pos:self._pos + size]
        self._pos += len(got)
        pad = size - len(got)
        if pad == 0:
            return got, 0
        fill = self._borrow(pad) if self._round_batch else np.resize(self._order, pad)
        return np.concatenate([got, fill]), pad

    def _borrow(self, count):
        parts = []
        while count:
            self._order = self._draw()
            self._pos = min(count, len(self._order))
            parts.append(self._order[:self._pos])
            count -= self._pos
        self._borrowed = True
        return np.concatenate(parts)


class _Decoder:
    """Record bytes -> (label vector, record id, CHW uint8 image of `data_shape`)."""

    def __init__(self, data_shape, label_width, resize, rand_crop, mirror_prob, inter_method,
                 path):
        self.data_shape, self.label_width = data_shape, label_width
        self.resize, self.rand_crop, self.mirror_prob = resize, rand_crop, mirror_prob
        self.inter_method, self.path = inter_method, path

    def __call__(self, record, position, draws):
        try:
            header, payload = recordio.unpack(record)
            img = image.imdecode(payload, flag=_DECODE_FLAG[self.data_shape[0]]).asnumpy()
        except (RecordIOError, image.ImageFormatError) as err:
            raise self._error(position, f"cannot be decoded: {err}") from None
        if img.shape[2] != self.data_shape[0]:
            raise self._error(position, f"has {img.shape[2]} channels, data_shape "
                                        f"{self.data_shape} asks for {self.data_shape[0]}")
        img = self._crop(self._resize(img), position, draws)
        if draws[2] < self.mirror_prob:
            img = img[:, ::-1]
        return self._label(header, position), header.id, img.transpose(2, 0, 1)

    def _resize(self, img):
        if self.resize <= 0:
            return img
        h, w = img.shape[:2]
        # shorter edge to `resize`, the other scaled with integer division, as MXNet
        size = (self.resize * w // h, self.resize) if h <= w else (self.resize,
                                                                    self.resize * h // w)
        return image.resize_np(img, size[0], size[1], self.inter_method)

    def _crop(self, img, position, draws):
        (h, w), (out_h, out_w) = img.shape[:2], self.data_shape[1:]
        if h < out_h or w < out_w:
            raise self._error(position, f"is {h}x{w} (after resize={self.resize}), smaller "
                                        f"than data_shape {self.data_shape}; help: pass "
                                        "resize= at least the crop size")
        if self.rand_crop:
            y, x = int(draws[0] * (h - out_h + 1)), int(draws[1] * (w - out_w + 1))
        else:
            y, x = (h - out_h) // 2, (w - out_w) // 2
        return img[y:y + out_h, x:x + out_w]

    def _label(self, header, position):
        label = np.atleast_1d(np.asarray(header.label, dtype=np.float32))
        if len(label) != self.label_width:
            raise self._error(position, f"holds {len(label)} label(s) but label_width is "
                                        f"{self.label_width}")
        return label

    def _error(self, position, what):
        return RecordIOError(f"ImageRecordIter: record {position} of {self.path!r} {what}")


class ImageRecordIter(SingleSourceIter):
    """Iterate over images packed in a RecordIO file (by im2rec or `recordio.pack_img`).

    Batches hold `(batch_size,) + data_shape` float32 images (RGB, CHW) and
    `(batch_size,)` float32 labels (`(batch_size, label_width)` when label_width > 1).

    Parameters
    ----------
    path_imgrec : str
        The `.rec` file.
    data_shape : tuple (channels, height, width)
        Output image shape; channels is 1 (gray), 3 (RGB) or 4 (RGBA).
    batch_size : int
        Samples per batch.
    path_imgidx : str, optional
        Its `.idx` index; without one the file is read once at construction to find the
        records.
    shuffle : bool
        Shuffle the part's samples every epoch (NumPy RandomState(seed)).
    rand_crop : bool
        Crop at a random place instead of the centre.
    rand_mirror : bool
        Mirror half of the images left-right at random (`mirror=True` mirrors all).
    mean_r, mean_g, mean_b, mean_a, std_r, std_g, std_b, std_a, scale : float
        Output is `(pixel - mean) * scale / std` per channel.
    resize : int
        Resize the shorter edge to this many pixels before cropping (-1: no resize).
    label_width : int
        Labels per image.
    num_parts, part_index : int
        Read only part `part_index` of `num_parts` equal, disjoint, contiguous parts of the
        records (`kv.num_workers`, `kv.rank`); the last `N % num_parts` records are left
        out so every worker runs as many batches.
    preprocess_threads : int
        Threads that decode images (capped at the usable cores).
    round_batch : bool
        Complete the epoch's last batch with samples from the next epoch, which then starts
        after them (`pad` says how many); False completes it from this epoch's start.
    seed : int
        Seed of the shuffle; `seed_aug` (default: `seed`) seeds crops and mirrors, so
        results do not depend on the number of threads.
    inter_method : int
        Interpolation of `resize` (OpenCV codes, 1 = bilinear).

    >>> train = mx.io.ImageRecordIter(path_imgrec='train.rec', data_shape=(3, 28, 28),
    ...                               batch_size=64, rand_crop=True, rand_mirror=True,
    ...                               num_parts=kv.num_workers, part_index=kv.rank)
    """

    def __init__(self, path_imgrec, data_shape, batch_size, path_imgidx=None, shuffle=False,
                 rand_crop=False, rand_mirror=False, mean_r=0.0, mean_g=0.0, mean_b=0.0,
                 std_r=1.0, std_g=1.0, std_b=1.0, scale=1.0, resize=-1, label_width=1,
                 num_parts=1, part_index=0, preprocess_threads=4, round_batch=True, seed=0,
                 seed_aug=None, mirror=False, inter_method=1, mean_a=0.0, std_a=1.0,
                 data_name="data", label_name="softmax_label", **kwargs):
        where = "ImageRecordIter"
        check_kwargs(where, kwargs, _ACCEPTED, _UNSUPPORTED)
        data_shape = self._check_shape(data_shape)
        batch_size = check_count(batch_size, "batch_size", 1, where)
        label_width = check_count(label_width, "label_width", 1, where)
        self._source = _RecordSource(path_imgrec, path_imgidx)
        start, stop = split_part(len(self._source), num_parts, part_index, where)
        self._order = _EpochOrder(start, stop, shuffle, np.random.RandomState(seed),
                                  round_batch)
        self._aug_rng = np.random.RandomState(seed if seed_aug is None else seed_aug)
        self._decoder = _Decoder(data_shape, label_width, int(resize), rand_crop,
                                 1.0 if mirror else 0.5 if rand_mirror else 0.0,
                                 inter_method, self._source.path)
        channels = data_shape[0]
        self._mean = np.array([mean_r, mean_g, mean_b, mean_a][:channels], np.float32)
        self._mult = np.float32(scale) / np.array([std_r, std_g, std_b, std_a][:channels],
                                                  np.float32)
        self._pool = self._make_pool(preprocess_threads)
        weakref.finalize(self, _shutdown, self._pool, self._source)
        label_shape = () if label_width == 1 else (label_width,)
        super().__init__(batch_size, data_shape, label_shape, data_name, label_name)
        _log.info("ImageRecordIter: %s, part %d of %d: records %d to %d", path_imgrec,
                  part_index, num_parts, start, stop)

    @staticmethod
    def _check_shape(data_shape):
        shape = tuple(int(n) for n in data_shape)
        if len(shape) != 3 or shape[0] not in _DECODE_FLAG or min(shape) < 1:
            raise ValueError(f"ImageRecordIter: data_shape must be (channels, height, width) "
                             f"with 1, 3 or 4 channels, got {data_shape!r}")
        return shape

    @staticmethod
    def _make_pool(preprocess_threads):
        threads = min(check_count(preprocess_threads, "preprocess_threads", 1,
                                  "ImageRecordIter"), config.usable_cores())
        if threads == 1:
            return None
        import concurrent.futures   # here: only a multi-threaded iterator needs it
        return concurrent.futures.ThreadPoolExecutor(threads, "ImageRecordIter")

    def reset(self):
        """Start the next epoch (reshuffled when `shuffle`)."""
        self._order.new_epoch()
        self._batch = None

    def _next_batch(self):
        taken = self._order.take(self.batch_size)
        if taken is None:
            return None
        positions, pad = taken
        records = [self._source.read(p) for p in positions]     # one file: read in order
        # drawn here, not in the decoding threads, so augmentation ignores thread timing
        draws = self._aug_rng.random_sample((len(positions), 3))
        mapper = self._pool.map if self._pool is not None else map
        labels, ids, images = zip(*mapper(self._decoder, records, positions, draws))
        data = np.stack(images).astype(np.float32)
        data -= self._mean[:, None, None]
        data *= self._mult[:, None, None]
        label = np.stack(labels)
        if label.shape[1] == 1:
            label = label[:, 0]
        return data, label, pad, np.array(ids, dtype=np.uint64)


def _shutdown(pool, source):
    if pool is not None:
        pool.shutdown(wait=False)
    source.close()
