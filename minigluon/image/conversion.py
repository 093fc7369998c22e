"""Between the NDArray images users pass and the NumPy arrays the image code computes on:
`mx.image` and `gluon.data.vision.transforms` both take an NDArray (or NumPy) image in and
give an NDArray on the input's context back."""
import numpy as np

from ..base import MXNetError
from ..context import cpu
from ..ndarray import array
from ..ndarray.ndarray import NDArray

__all__ = ["numpy_image", "like_source"]


def numpy_image(src, what):
    """The NumPy array of image `src` (no copy on the CPU); `what` names the caller in errors."""
    if isinstance(src, NDArray):
        return src.asnumpy() if src.context.device_type != "cpu" else src._data
    if isinstance(src, np.ndarray):
        return src
    raise MXNetError(f"{what} expects an NDArray image (H, W, C), got {type(src).__name__}")


def like_source(arr, like):
    """NumPy result `arr` as an NDArray on the context of `like` (the CPU for NumPy input)."""
    ctx = like.context if isinstance(like, NDArray) else cpu()
    if ctx.device_type == "cpu":
        return NDArray(arr, ctx)
    return array(arr, ctx=ctx, dtype=arr.dtype)
