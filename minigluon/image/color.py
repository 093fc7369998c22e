"""Channel arithmetic on (H, W, C) images: the channels a decode `flag` asks for (gray,
colour or the file's own, RGB or BGR), and `color_normalize`."""
import numpy as np

__all__ = ["apply_flag", "color_normalize"]


def _to_gray(img):
    """Luma as OpenCV computes it: 0.299 R + 0.587 G + 0.114 B, rounded."""
    rgb = img[:, :, :3].astype(np.float32)
    gray = rgb @ np.array([0.299, 0.587, 0.114], np.float32)
    return np.clip(gray + 0.5, 0, 255).astype(np.uint8)[:, :, None]


def apply_flag(img, flag, to_rgb):
    """The channels imdecode's `flag` asks for (0 gray, 1 colour, -1 as stored), RGB or BGR."""
    channels = img.shape[2]
    if flag == 0:
        img = img[:, :, :1] if channels <= 2 else _to_gray(img)
    elif flag > 0:
        img = np.repeat(img[:, :, :1], 3, axis=2) if channels <= 2 else img[:, :, :3]
    if not to_rgb and img.shape[2] >= 3:
        img = img[:, :, [2, 1, 0] + list(range(3, img.shape[2]))]
    return np.ascontiguousarray(img)


def color_normalize(src, mean, std=None):
    """(src - mean) / std, with mean and std broadcast over the channel axis."""
    src = src - mean
    return src / std if std is not None else src
