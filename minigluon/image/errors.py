"""The error every `mx.image` codec raises for bytes it cannot decode or an image it
cannot encode."""
from ..base import MXNetError

__all__ = ["ImageFormatError"]


class ImageFormatError(MXNetError, ValueError):
    """Image bytes that cannot be decoded, or an image that cannot be encoded."""
