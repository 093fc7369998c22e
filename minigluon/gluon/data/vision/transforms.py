"""Image transforms for datasets (`gluon.data.vision.transforms`), as in MXNet 1.x.

Each transform is a Block that takes an NDArray image, HWC uint8 unless said otherwise, and
returns a new NDArray. They compute with NumPy, and resize with OpenCV through `mx.image`,
on the CPU data directly, which keeps the per-image overhead small. Random transforms draw
from minigluon's seeded random state, so `mx.random.seed(n)` makes them repeat.

Out of scope: hybridizing transforms (they run imperatively; hybridize() changes nothing
and a Symbol input is refused); they do not go through `mx.nd.image` operators as in MXNet.

Example::

    transformer = transforms.Compose([
        transforms.RandomResizedCrop(32), transforms.RandomFlipLeftRight(),
        transforms.ToTensor(), transforms.Normalize((0.49, 0.48, 0.45), (0.25, 0.24, 0.26))])
    train = gluon.data.vision.CIFAR10(train=True).transform_first(transformer)
"""
import math
import numbers

import numpy as np

from .... import image
from ....base import MXNetError, ShapeError
from ....image.conversion import like_source, numpy_image
from ....ndarray import random as _random
from ...block import Block, HybridBlock
from ...nn import Sequential

__all__ = ["Compose", "HybridCompose", "Cast", "ToTensor", "Normalize", "Resize", "CenterCrop",
           "RandomResizedCrop", "RandomCrop", "RandomFlipLeftRight", "RandomFlipTopBottom",
           "RandomBrightness", "RandomContrast", "RandomSaturation", "RandomHue",
           "RandomColorJitter", "RandomLighting", "CropResize", "Rotate", "RandomRotation",
           "RandomApply"]

_GRAY_WEIGHTS = np.array([0.299, 0.587, 0.114], np.float32)


def _rng():
    # looked up on every call: mx.random.seed() replaces the generator object
    return _random.generator(np).rng


def _pair(size, what):
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if len(size) != 2:
        raise MXNetError(f"{what}: size must be an int or a (width, height) pair, got {size!r}")
    return int(size[0]), int(size[1])


def _check_image(img, what, ndims=(3,)):
    if img.ndim not in ndims:
        layout = " or ".join({3: "(H, W, C)", 4: "(N, H, W, C)"}[n] for n in ndims)
        raise ShapeError(f"{what} expects an image of shape {layout}, got shape {img.shape}")


class _NumpyTransform:
    """Mixin: forward() runs `_transform` on the NumPy data of the input image."""

    def forward(self, x):
        return like_source(self._transform(numpy_image(x, type(self).__name__)), x)

    def hybridize(self, active=True, **kwargs):
        """No effect: transforms always run imperatively."""

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._repr_args().items())
        return f"{type(self).__name__}({args})"

    def _repr_args(self):
        return {}


# ---- composition and dtype ----------------------------------------------------------------
class _Function(Block):
    """Wraps a plain callable so Compose can hold it."""

    def __init__(self, fn):
        super().__init__()
        self._fn = fn

    def forward(self, x):
        return self._fn(x)


class Compose(Sequential):
    """Apply `transforms` one after another.

    >>> t = transforms.Compose([transforms.Resize(300), transforms.CenterCrop(256),
    ...                         transforms.ToTensor()])
    """

    def __init__(self, transforms):
        super().__init__()
        for t in transforms:
            self.add(t if isinstance(t, Block) else _Function(t))

    def hybridize(self, active=True, **kwargs):
        """No effect: transforms always run imperatively."""


HybridCompose = Compose


class Cast(_NumpyTransform, HybridBlock):
    """Cast the input to `dtype` (default float32)."""

    def __init__(self, dtype="float32"):
        super().__init__()
        self._dtype = np.dtype(dtype)

    def _transform(self, img):
        return img.astype(self._dtype)

    def _repr_args(self):
        return {"dtype": self._dtype.name}


class ToTensor(_NumpyTransform, HybridBlock):
    """HWC (or NHWC) image with values in [0, 255] -> CHW (or NCHW) float32 in [0, 1].

    Inputs: **data** (H, W, C) or (N, H, W, C), any dtype.
    Outputs: **out** (C, H, W) or (N, C, H, W) float32, `data / 255`.
    """

    def _transform(self, img):
        _check_image(img, "ToTensor", (3, 4))
        axes = (2, 0, 1) if img.ndim == 3 else (0, 3, 1, 2)
        chw = img.transpose(axes)
        out = np.empty(chw.shape, np.float32)
        np.true_divide(chw, np.float32(255), out=out)
        return out


class Normalize(_NumpyTransform, HybridBlock):
    """(data - mean) / std per channel, on CHW or NCHW float images.

    Parameters
    ----------
    mean, std : float or sequence of float
        One value for all channels or one per channel.

    Inputs: **data** (C, H, W) or (N, C, H, W). Outputs: **out** of the same shape, float32.
    """

    def __init__(self, mean=0.0, std=1.0):
        super().__init__()
        self._mean_arg, self._std_arg = mean, std
        self._mean = np.asarray(mean, np.float32).reshape(-1, 1, 1)
        self._std = np.asarray(std, np.float32).reshape(-1, 1, 1)

    def _transform(self, img):
        _check_image(img, "Normalize", (3, 4))
        channels = img.shape[-3]
        for name, arr in (("mean", self._mean), ("std", self._std)):
            if arr.shape[0] not in (1, channels):
                raise ShapeError(f"Normalize: {name} has {arr.shape[0]} values but the input "
                                 f"{img.shape} has {channels} channels (layout CHW/NCHW)")
        out = np.subtract(img, self._mean, dtype=np.float32)
        out /= self._std
        return out

    def _repr_args(self):
        return {"mean": self._mean_arg, "std": self._std_arg}


# ---- resizing and cropping ----------------------------------------------------------------
def _per_image(fn, img):
    """Apply `fn` to an HWC image, or to each image of an NHWC batch."""
    if img.ndim == 4:
        return np.stack([fn(one) for one in img])
    return fn(img)


class Resize(_NumpyTransform, Block):
    """Resize an HWC (or NHWC) image to `size`.

    Parameters
    ----------
    size : int or (width, height)
        An int means (size, size), or with `keep_ratio` the length of the shorter edge.
    keep_ratio : bool
        With an int `size`, resize the shorter edge to `size` and keep the aspect ratio.
    interpolation : int
        OpenCV code: 0 nearest, 1 bilinear (default), 2 bicubic, 3 area, 4 Lanczos.
    """

    def __init__(self, size, keep_ratio=False, interpolation=1):
        super().__init__()
        self._size, self._keep, self._interp = size, keep_ratio, interpolation

    def _target(self, h, w):
        if not isinstance(self._size, numbers.Number):
            return _pair(self._size, "Resize")
        size = int(self._size)
        if not self._keep:
            return size, size
        return (size, int(h * size / w)) if h > w else (int(w * size / h), size)

    def _transform(self, img):
        _check_image(img, "Resize", (3, 4))
        w, h = self._target(*img.shape[-3:-1])
        return _per_image(lambda one: image.resize_np(one, w, h, self._interp), img)

    def _repr_args(self):
        return {"size": self._size, "keep_ratio": self._keep, "interpolation": self._interp}


class CenterCrop(_NumpyTransform, Block):
    """Crop the centre to `size` (int or (width, height)); an image smaller than that is
    cropped as large as it fits with the same aspect ratio, then resized up."""

    def __init__(self, size, interpolation=1):
        super().__init__()
        self._size, self._interp = _pair(size, "CenterCrop"), interpolation

    def _transform(self, img):
        _check_image(img, "CenterCrop")
        box = image.center_crop_box(img.shape[:2], self._size)
        return np.ascontiguousarray(image.fixed_crop_np(img, *box, self._size, self._interp))

    def _repr_args(self):
        return {"size": self._size, "interpolation": self._interp}


class RandomResizedCrop(_NumpyTransform, Block):
    """Crop a random part and resize it to `size` (the Inception-style crop).

    The crop covers a fraction of the area drawn uniformly from `scale`, with an aspect
    ratio (w/h) drawn log-uniformly from `ratio`; after 10 draws that do not fit, the
    centre crop is used.

    Parameters
    ----------
    size : int or (width, height)
    scale : (float, float)
    ratio : (float, float)
    interpolation : int
    """

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=1):
        super().__init__()
        self._size = _pair(size, "RandomResizedCrop")
        self._scale, self._ratio, self._interp = scale, ratio, interpolation

    def _transform(self, img):
        _check_image(img, "RandomResizedCrop")
        box = image.random_size_crop_box(img.shape[:2], self._scale, self._ratio)
        if box is None:
            box = image.center_crop_box(img.shape[:2], self._size)
        x0, y0, w, h = box
        return image.resize_np(img[y0:y0 + h, x0:x0 + w], *self._size, self._interp)

    def _repr_args(self):
        return {"size": self._size, "scale": self._scale, "ratio": self._ratio,
                "interpolation": self._interp}


def _pad_widths(pad):
    """((top, bottom), (left, right)) from an int, (pad_h, pad_w), (top, bottom, left,
    right) or a NumPy-style ((top, bottom), (left, right)[, (0, 0)])."""
    if pad is None:
        return None
    if isinstance(pad, numbers.Number):
        return (int(pad), int(pad)), (int(pad), int(pad))
    pad = tuple(pad)
    if len(pad) == 2 and all(isinstance(p, numbers.Number) for p in pad):
        return (int(pad[0]), int(pad[0])), (int(pad[1]), int(pad[1]))
    if len(pad) == 4 and all(isinstance(p, numbers.Number) for p in pad):
        return (int(pad[0]), int(pad[1])), (int(pad[2]), int(pad[3]))
    if len(pad) in (2, 3) and all(len(p) == 2 for p in pad):
        return tuple(pad[0]), tuple(pad[1])
    raise MXNetError(f"RandomCrop: pad must be an int, (pad_h, pad_w), (top, bottom, left, "
                     f"right) or ((top, bottom), (left, right)), got {pad!r}")


class RandomCrop(_NumpyTransform, Block):
    """Pad the image (optional), then crop `size` (int or (width, height)) at a random
    place; an image smaller than the crop is cropped as large as fits and resized up.

    Parameters
    ----------
    size : int or (width, height)
    pad : int or tuple, optional
        Border added first: an int for all sides, (pad_h, pad_w), (top, bottom, left,
        right), or NumPy-style ((top, bottom), (left, right)).
    pad_value : number
        Value of the added border.
    interpolation : int

    >>> t = transforms.RandomCrop(32, pad=4)     # the usual CIFAR augmentation
    """

    def __init__(self, size, pad=None, pad_value=0, interpolation=1):
        super().__init__()
        self._size = _pair(size, "RandomCrop")
        self._pad, self._pad_arg = _pad_widths(pad), pad
        self._pad_value, self._interp = pad_value, interpolation

    def _padded(self, img):
        (top, bottom), (left, right) = self._pad
        h, w = img.shape[:2]
        out = np.full((h + top + bottom, w + left + right) + img.shape[2:], self._pad_value,
                      img.dtype)
        out[top:top + h, left:left + w] = img
        return out

    def _transform(self, img):
        _check_image(img, "RandomCrop")
        if self._pad is not None:
            img = self._padded(img)
        x0, y0, w, h = image.random_crop_box(img.shape[:2], self._size)
        return np.ascontiguousarray(image.fixed_crop_np(img, x0, y0, w, h, self._size,
                                                        self._interp))

    def _repr_args(self):
        return {"size": self._size, "pad": self._pad_arg}


class CropResize(_NumpyTransform, HybridBlock):
    """Crop the box at column `x`, row `y` of `width` x `height` from an HWC (or NHWC)
    image, then resize it to `size` ((width, height) or an int for both) if given.

    >>> transforms.CropResize(0, 0, 100, 50, size=(25, 25))(img)   # (25, 25, C)
    """

    def __init__(self, x, y, width, height, size=None, interpolation=None):
        super().__init__()
        self._box = (int(x), int(y), int(width), int(height))
        self._size, self._interp = size, 1 if interpolation is None else interpolation

    def _transform(self, img):
        _check_image(img, "CropResize", (3, 4))
        x, y, w, h = self._box
        rows, cols = img.shape[-3:-1]
        if w <= 0 or h <= 0 or x < 0 or y < 0 or x + w > cols or y + h > rows:
            raise MXNetError(f"CropResize: the box x={x}, y={y}, width={w}, height={h} must "
                             f"have a positive size and lie inside the {cols}x{rows} image")
        out = img[..., y:y + h, x:x + w, :]
        if self._size is None:
            return out.copy()
        tw, th = _pair(self._size, "CropResize")
        if tw <= 0 or th <= 0:
            raise MXNetError(f"CropResize: size must be positive, got {self._size!r}")
        return _per_image(lambda one: image.resize_np(one, tw, th, self._interp), out)

    def _repr_args(self):
        return dict(zip(("x", "y", "width", "height"), self._box), size=self._size)


# ---- flips --------------------------------------------------------------------------------
class RandomFlipLeftRight(_NumpyTransform, HybridBlock):
    """Mirror the image horizontally with probability 0.5 (HWC or NHWC)."""

    def _transform(self, img):
        _check_image(img, "RandomFlipLeftRight", (3, 4))
        if _rng().random() < 0.5:
            return np.ascontiguousarray(np.flip(img, axis=-2))
        return img.copy()


class RandomFlipTopBottom(_NumpyTransform, HybridBlock):
    """Flip the image vertically with probability 0.5 (HWC or NHWC)."""

    def _transform(self, img):
        _check_image(img, "RandomFlipTopBottom", (3, 4))
        if _rng().random() < 0.5:
            return np.ascontiguousarray(np.flip(img, axis=-3))
        return img.copy()


# ---- colour -------------------------------------------------------------------------------
def _like_input(values, img):
    """Float results back to the input dtype; uint8 saturates at [0, 255] as in MXNet."""
    if img.dtype == np.uint8:
        return np.clip(values, 0, 255, out=values).astype(np.uint8)
    return values.astype(img.dtype, copy=False)


def _gray(img):
    """Per-pixel luma (H, W, 1) as float32; the image itself when it has one channel."""
    if img.shape[2] == 1:
        return img.astype(np.float32)
    return (img[:, :, :3] @ _GRAY_WEIGHTS)[:, :, None]


def _blend(img, alpha, other):
    """img * alpha + other * (1 - alpha), saturated to the input dtype."""
    out = img * np.float32(alpha)
    out += other * np.float32(1 - alpha)
    return _like_input(out, img)


def _adjust_brightness(img, alpha):
    return _like_input(img * np.float32(alpha), img)


def _adjust_contrast(img, alpha):
    return _blend(img, alpha, np.float32(_gray(img).mean()))


def _adjust_saturation(img, alpha):
    return _blend(img, alpha, _gray(img))


_TYIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
_ITYIQ = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])


def _adjust_hue(img, alpha):
    """Rotate the chroma plane of YIQ space by alpha * pi radians."""
    if img.shape[2] == 1:
        return img.copy()
    c, s = math.cos(alpha * math.pi), math.sin(alpha * math.pi)
    rotation = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    matrix = (_ITYIQ @ rotation @ _TYIQ).T.astype(np.float32)
    return _like_input(img[:, :, :3] @ matrix, img)


class _RandomColor(_NumpyTransform, HybridBlock):
    """Draw a factor uniformly in [-amount, amount] and apply `_adjust(img, factor)`."""

    _offset = 1.0        # brightness/contrast/saturation scale by 1 + u; hue rotates by u

    def __init__(self, amount):
        super().__init__()
        if amount < 0:
            raise MXNetError(f"{type(self).__name__}: the jitter amount must be >= 0, "
                             f"got {amount}")
        self._amount = float(amount)

    def _transform(self, img):
        _check_image(img, type(self).__name__)
        u = _rng().uniform(-self._amount, self._amount)
        return self._adjust(img, self._offset + u)

    def _repr_args(self):
        return {"amount": self._amount}


class RandomBrightness(_RandomColor):
    """Scale all pixels by 1 + u, u uniform in [-brightness, brightness]."""
    _adjust = staticmethod(_adjust_brightness)


class RandomContrast(_RandomColor):
    """Blend with the mean gray level: alpha * img + (1 - alpha) * mean(gray), alpha =
    1 + u, u uniform in [-contrast, contrast]."""
    _adjust = staticmethod(_adjust_contrast)


class RandomSaturation(_RandomColor):
    """Blend with each pixel's gray level: alpha * img + (1 - alpha) * gray, alpha = 1 + u,
    u uniform in [-saturation, saturation]."""
    _adjust = staticmethod(_adjust_saturation)


class RandomHue(_RandomColor):
    """Rotate the hue by u * 180 degrees (in YIQ space), u uniform in [-hue, hue]."""
    _adjust = staticmethod(_adjust_hue)
    _offset = 0.0


class RandomColorJitter(_NumpyTransform, HybridBlock):
    """Brightness, contrast, saturation and hue jitter (those that are non-zero), applied in
    a random order.

    >>> t = transforms.RandomColorJitter(brightness=0.4, contrast=0.4, saturation=0.4)
    """

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        self._args = {"brightness": brightness, "contrast": contrast,
                      "saturation": saturation, "hue": hue}
        kinds = (RandomBrightness, RandomContrast, RandomSaturation, RandomHue)
        self._jitters = [kind(amount) for kind, amount in zip(kinds, self._args.values())
                         if amount > 0]

    def _transform(self, img):
        for i in _rng().permutation(len(self._jitters)):
            img = self._jitters[i]._transform(img)
        return img if self._jitters else img.copy()

    def _repr_args(self):
        return self._args


class RandomLighting(_NumpyTransform, HybridBlock):
    """AlexNet-style PCA lighting noise: add eigvec @ (a * eigval) to every pixel, with a
    drawn from N(0, alpha) per principal component (ImageNet's RGB eigen-decomposition)."""

    _EIGVAL = np.array([55.46, 4.794, 1.148], np.float32)
    _EIGVEC = np.array([[-0.5675, 0.7192, 0.4009],
                        [-0.5808, -0.0045, -0.8140],
                        [-0.5836, -0.6948, 0.4203]], np.float32)

    def __init__(self, alpha):
        super().__init__()
        self._alpha = float(alpha)

    def _transform(self, img):
        _check_image(img, "RandomLighting")
        if img.shape[2] != 3:
            raise ShapeError(f"RandomLighting needs an RGB image, got shape {img.shape}")
        a = _rng().normal(0, self._alpha, 3).astype(np.float32)
        rgb = self._EIGVEC @ (a * self._EIGVAL)
        return _like_input(img + rgb, img)

    def _repr_args(self):
        return {"alpha": self._alpha}


# ---- rotation -----------------------------------------------------------------------------
def _zoom(angle, h, w, zoom_in, zoom_out):
    """Factor on the sampling grid: >1 shows the whole rotated image (zoom_out), <1 hides
    the empty corners (zoom_in)."""
    c, s = abs(math.cos(angle)), abs(math.sin(angle))
    if zoom_out:
        return max((w * c + h * s) / w, (w * s + h * c) / h)
    if zoom_in:
        return min(w / (w * c + h * s), h / (w * s + h * c))
    return 1.0


def _rotate_chw(img, degrees, zoom_in, zoom_out):
    """Rotate a float32 CHW image counter-clockwise by `degrees` about its centre, with
    bilinear sampling and zeros outside the source."""
    _, h, w = img.shape
    angle = math.radians(degrees)
    scale = _zoom(angle, h, w, zoom_in, zoom_out)
    dy, dx = np.mgrid[0:h, 0:w].astype(np.float64)
    dy, dx = (dy - (h - 1) / 2) * scale, (dx - (w - 1) / 2) * scale
    sx = dx * math.cos(angle) - dy * math.sin(angle) + (w - 1) / 2
    sy = dx * math.sin(angle) + dy * math.cos(angle) + (h - 1) / 2
    return _bilinear(img, sy, sx).astype(np.float32)


def _bilinear(img, sy, sx):
    y0, x0 = np.floor(sy).astype(np.int64), np.floor(sx).astype(np.int64)
    out = np.zeros(img.shape, np.float64)
    for oy, ox in ((0, 0), (0, 1), (1, 0), (1, 1)):
        yi, xi = y0 + oy, x0 + ox
        weight = (1 - np.abs(sy - yi)) * (1 - np.abs(sx - xi))
        inside = (yi >= 0) & (yi < img.shape[1]) & (xi >= 0) & (xi < img.shape[2])
        values = img[:, np.clip(yi, 0, img.shape[1] - 1), np.clip(xi, 0, img.shape[2] - 1)]
        out += values * np.where(inside, weight, 0.0)
    return out


def _check_rotatable(img, what):
    if img.dtype != np.float32:
        raise TypeError(f"{what} needs a float32 image, got {img.dtype}; cast it first, "
                        f"e.g. with transforms.Cast() or ToTensor()")
    if img.ndim not in (3, 4):
        raise ShapeError(f"{what} expects an image of shape (C, H, W) or (N, C, H, W), got "
                         f"shape {img.shape}")


def _rotate(img, degrees, zoom_in, zoom_out):
    """`degrees`: one angle, or one per image of an NCHW batch."""
    if img.ndim == 3:
        return _rotate_chw(img, degrees, zoom_in, zoom_out)
    angles = np.broadcast_to(degrees, (img.shape[0],))
    return np.stack([_rotate_chw(one, a, zoom_in, zoom_out) for one, a in zip(img, angles)])


def _check_zoom(zoom_in, zoom_out):
    if zoom_in and zoom_out:
        raise ValueError("zoom_in and zoom_out cannot both be True: pick one")


class Rotate(_NumpyTransform, Block):
    """Rotate a float32 CHW image (or NCHW batch) counter-clockwise by `rotation_degrees`
    about its centre; pixels from outside the image are 0. `zoom_in` scales so no empty
    corner shows, `zoom_out` so the whole rotated image fits.

    >>> transforms.Rotate(90.)(mx.nd.array([[[0, 0, 0], [0, 0, 1], [0, 0, 0]]]))
    [[[0, 1, 0], [0, 0, 0], [0, 0, 0]]]
    """

    def __init__(self, rotation_degrees, zoom_in=False, zoom_out=False):
        super().__init__()
        _check_zoom(zoom_in, zoom_out)
        self._args = (float(rotation_degrees), zoom_in, zoom_out)

    def _transform(self, img):
        _check_rotatable(img, "Rotate")
        return _rotate(img, *self._args)

    def _repr_args(self):
        return dict(zip(("rotation_degrees", "zoom_in", "zoom_out"), self._args))


class RandomRotation(_NumpyTransform, Block):
    """With probability `rotate_with_proba`, rotate like `Rotate` by an angle drawn
    uniformly from `angle_limits` = (lower, upper) degrees (one per image of a batch);
    otherwise return the input.

    >>> transforms.RandomRotation((-10, 10))(mx.nd.ones((3, 32, 32)))
    """

    def __init__(self, angle_limits, zoom_in=False, zoom_out=False, rotate_with_proba=1.0):
        super().__init__()
        lower, upper = (float(a) for a in angle_limits)
        if lower >= upper:
            raise ValueError(f"RandomRotation: angle_limits must be (lower, upper) with lower "
                             f"< upper, got {tuple(angle_limits)!r}")
        if not 0 <= rotate_with_proba <= 1:
            raise ValueError(f"RandomRotation: rotate_with_proba must be in [0, 1], got "
                             f"{rotate_with_proba!r}")
        _check_zoom(zoom_in, zoom_out)
        self._limits, self._zoom = (lower, upper), (zoom_in, zoom_out)
        self._proba = rotate_with_proba

    def _transform(self, img):
        if _rng().random() >= self._proba:
            return img.copy()          # as in MXNet, a skipped image is not type-checked
        _check_rotatable(img, "RandomRotation")
        count = () if img.ndim == 3 else (img.shape[0],)     # one angle per image
        return _rotate(img, _rng().uniform(*self._limits, count), *self._zoom)

    def _repr_args(self):
        return {"angle_limits": self._limits, "rotate_with_proba": self._proba}


# ---- random application -------------------------------------------------------------------
class RandomApply(Sequential):
    """Apply `transforms` (a Block or a callable) with probability `p`, else pass the input
    through unchanged.

    >>> transforms.RandomApply(transforms.RandomResizedCrop(224), p=0.5)
    """

    def __init__(self, transforms, p=0.5):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"RandomApply: p must be a probability in [0, 1], got {p!r}")
        self.transforms = transforms if isinstance(transforms, Block) else _Function(transforms)
        self.p = p

    def forward(self, x):
        return self.transforms(x) if _rng().random() < self.p else x
