"""Channel arithmetic on images: `color_normalize`."""

__all__ = ["color_normalize"]


def color_normalize(src, mean, std=None):
    """(src - mean) / std, with mean and std broadcast over the channel axis.

    >>> mx.image.color_normalize(img.astype('float32'), mx.nd.array([123, 117, 104]))
    """
    src = src - mean
    return src / std if std is not None else src
