"""`make_loss` (alias `MakeLoss`): marks an array as a loss to minimise.

The forward is the identity. The backward ignores the incoming head gradient and sends
`grad_scale` to every element, divided by the batch size (normalization='batch') or by
the count of elements above `valid_thresh` (normalization='valid', at least 1), so a
graph whose output is a make_loss can be trained by calling backward() with no head.
"""
from ..base import MXNetError
from .registry import register

_NORMALIZATIONS = ("null", "batch", "valid")


def _divisor(xp, data, normalization, valid_thresh):
    if normalization == "batch":
        return data.shape[0] if data.ndim else 1
    if normalization == "valid":
        return max(1, int((data > valid_thresh).sum()))
    return 1


@register("make_loss", aliases=("MakeLoss",))
def make_loss(xp, data, grad_scale=1.0, valid_thresh=0.0, normalization="null"):
    """Identity forward; the gradient is grad_scale / (1, batch size or valid count)."""
    if normalization not in _NORMALIZATIONS:
        raise MXNetError(f"make_loss: normalization must be one of {_NORMALIZATIONS}, got "
                         f"{normalization!r}")
    scale = float(grad_scale) / _divisor(xp, data, normalization, valid_thresh)

    def backward(_dy):
        return (xp.full(data.shape, scale, dtype=data.dtype),)
    return data.copy(), backward
