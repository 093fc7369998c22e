"""The geometry that Convolution, Deconvolution and Pooling share: their shape attributes
(kernel, stride, dilate, pad) checked and expanded per spatial axis, the channel-first
layouts they take, and `Window`, a sliding window over a padded grid."""
import numpy as np

from ..base import MXNetError, ShapeError

__all__ = ["per_axis", "kernel_attr", "check_layout", "Window"]

_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def per_axis(op, name, value, n, default):
    """Expand an MXNet shape attribute (tuple, int or empty) to one int per spatial axis."""
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0):
        return (default,) * n
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ShapeError(f"{op}: {name}={value} has {len(value)} entries but the operator "
                         f"works on {n} spatial axes; give one per axis")
    return value


def kernel_attr(op, kernel):
    """The `kernel` attribute as a tuple of positive ints (an int means a 1-D kernel)."""
    kernel = (kernel,) if isinstance(kernel, (int, np.integer)) else tuple(kernel or ())
    if not kernel or min(kernel) < 1:
        raise ShapeError(f"{op}: kernel must be a tuple of positive sizes, one per spatial "
                         f"axis, got {kernel!r}")
    return tuple(int(k) for k in kernel)


def check_layout(op, layout, data, n):
    """Raise unless `data` is channel-first with `n` spatial axes, as `layout` must say."""
    if n not in _LAYOUTS:
        raise ShapeError(f"{op}: kernel must have 1, 2 or 3 entries, got {n}")
    if data.ndim != n + 2:
        raise ShapeError(f"{op}: a {n}-D kernel needs {_LAYOUTS[n]} data with {n + 2} axes, "
                         f"got data of shape {data.shape}")
    if layout not in (None, _LAYOUTS[n]):
        raise MXNetError(f"{op}: layout {layout!r} is not supported, only {_LAYOUTS[n]}; "
                         "help: transpose the data to channel-first with nd.transpose")


class Window:
    """A sliding window over a padded grid: kernel, stride, dilation and padding per axis.

    `size` is the unpadded grid, `out` the number of window positions along each axis.
    """

    def __init__(self, kernel, stride, dilate, pad, size, out):
        self.kernel, self.stride, self.dilate = kernel, stride, dilate
        self.pad, self.size, self.out = pad, size, out
        self.padded = tuple(n + 2 * p for n, p in zip(size, pad))

    @classmethod
    def sliding(cls, op, kernel, stride, dilate, pad, size):
        """The window of a convolution over `size`; raises if the kernel does not fit."""
        if min(stride) < 1 or min(dilate) < 1 or min(pad) < 0:
            raise ShapeError(f"{op}: stride {stride} and dilate {dilate} must be positive and "
                             f"pad {pad} non-negative")
        out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                    for n, k, s, d, p in zip(size, kernel, stride, dilate, pad))
        if min(out) < 1:
            raise ShapeError(f"{op}: kernel {kernel} (dilate {dilate}) does not fit input of "
                             f"spatial shape {size} padded by {pad}")
        return cls(kernel, stride, dilate, pad, size, out)

    def slices(self, offset):
        """Per-axis slices of the padded grid that kernel tap `offset` reads."""
        return tuple(slice(t * d, t * d + s * (o - 1) + 1, s) for t, d, s, o in
                     zip(offset, self.dilate, self.stride, self.out))

    def taps(self):
        return np.ndindex(*self.kernel)

    def crop(self):
        return tuple(slice(p, p + n) for p, n in zip(self.pad, self.size))
