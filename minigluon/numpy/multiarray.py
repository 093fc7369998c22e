"""mx.np.ndarray: an NDArray with NumPy semantics, and `array()` to make one."""

from ..ndarray.ndarray import NDArray, raw_index, set_np_class
from ..ndarray.registry import OPS, invoke
from .dispatch import new_array
from .methods import NumpyMethods


class ndarray(NumpyMethods, NDArray):   # noqa: N801 (NumPy's and MXNet's name)
    """An array on a device with NumPy semantics (MXNet's `mx.np.ndarray`).

    Compared with `mx.nd.NDArray`: operands of different dtypes are promoted, comparisons
    give bool arrays, reductions and `x[i]` give 0-d arrays, `dtype` is a `numpy.dtype`,
    and `reshape`/`flatten`/`argmax` follow NumPy. Autograd works as on NDArray::

        x = mx.np.array([1., 2., 3.])
        x.attach_grad()
        with mx.autograd.record():
            y = (x * x).sum()        # a 0-d array
        y.backward()                 # x.grad == 2 * x
    """

    __slots__ = ()

    @property
    def dtype(self):
        """The element type, a `numpy.dtype` (compares equal to `numpy.float32` and 'float32')."""
        return self._data.dtype

    @property
    def device(self):
        """The device the array lives on (the same as `ctx`)."""
        return self._ctx

    def __getitem__(self, key):
        return invoke(OPS["_np_getitem"], [self], {"key": raw_index(key, self._ctx)})

    def as_np_ndarray(self):
        """This array (it already has NumPy semantics)."""
        return self

    def to_device(self, device):
        """This array on `device` (MXNet 2's name for `as_in_context`)."""
        return self.as_in_context(device)

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self.item(), spec)
        return super().__format__(spec)

    def __repr__(self):
        text = repr(self.asnumpy())
        if self._ctx.device_type != "cpu" or self._ctx.device_id != 0:
            text = text[:-1] + f", ctx={self._ctx})"
        return text

    def __str__(self):
        return str(self.asnumpy())


set_np_class(ndarray)   # what NDArray.as_np_ndarray() returns


def context_arg(ctx, device):
    """The device from mx.np's two spellings of it, `ctx=` (MXNet 1.x) and `device=`
    (MXNet 2); None if neither is given."""
    if ctx is not None and device is not None and ctx != device:
        raise ValueError(f"got ctx={ctx} and device={device}; give only one of them")
    return ctx if ctx is not None else device


def from_nd(array):
    """A fresh legacy NDArray (not in any graph) as an mx.np.ndarray."""
    return ndarray(array._data, array._ctx)


def array(object, dtype=None, ctx=None, device=None):   # noqa: A002 (NumPy's name)
    """A new mx.np.ndarray holding a copy of `object` (a list, NumPy array, mx array...).

    The dtype is `object`'s when it has one (NumPy and mx arrays), else float32, as in
    MXNet; pass `dtype` to choose.

    >>> mx.np.array([[1, 2], [3, 4]]).dtype
    dtype('float32')
    """
    return new_array(object, context_arg(ctx, device), dtype)
