"""The operators and methods with NumPy semantics that mx.np.ndarray and its symbol twin
share, so a HybridBlock traced in NumPy mode builds the same ops it runs imperatively."""
from ..ndarray import operator_methods
from .dispatch import call


def _axes(axes):
    """`x.transpose(1, 0)`, `x.transpose((1, 0))` and `x.transpose()` alike."""
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    return tuple(axes) if axes else None


class NumpyMethods:
    """Mixin: arithmetic that promotes dtypes, bool comparisons, NumPy-style reductions."""

    __slots__ = ()

    # the dunder methods (NumPy-semantics ops) are added by operator_methods.define below
    __hash__ = object.__hash__

    # ---- shape --------------------------------------------------------------------------
    def reshape(self, *shape, order="C"):
        """NumPy's reshape: `x.reshape(2, -1)` or `x.reshape((2, -1))`; 0 means size 0."""
        if order != "C":
            raise ValueError(f"reshape: order={order!r} is not supported; minigluon arrays "
                             "are C-ordered, use order='C'")
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return call("_np_reshape", self, newshape=tuple(shape))

    def flatten(self):
        """A 1-D copy of the array (NumPy's flatten, not MXNet's 2-D Flatten)."""
        return call("_np_reshape", self, newshape=(-1,))

    ravel = flatten

    def transpose(self, *axes):
        """The axes permuted (reversed by default)."""
        return call("transpose", self, axes=_axes(axes))

    def swapaxes(self, axis1, axis2):
        """Exchange two axes."""
        return call("swapaxes", self, dim1=axis1, dim2=axis2)

    def squeeze(self, axis=None):
        """Remove size-1 axes (those in `axis` only, when given)."""
        return call("_np_squeeze", self, axis=axis)

    def repeat(self, repeats, axis=None):
        """Repeat each element `repeats` times along `axis` (of the flat array when None)."""
        return call("repeat", self, repeats=repeats, axis=axis)

    # ---- reductions ---------------------------------------------------------------------
    def sum(self, axis=None, dtype=None, keepdims=False):
        """Sum over `axis` (all axes when None); bools and small ints sum as int64."""
        return call("_np_sum", self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, keepdims=False):
        """Product over `axis` (all axes when None)."""
        return call("_np_prod", self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, keepdims=False):
        """Mean over `axis`; integer arrays average as float32."""
        return call("_np_mean", self, axis=axis, dtype=dtype, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        """Maximum over `axis` (all axes when None)."""
        return call("_np_max", self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False):
        """Minimum over `axis` (all axes when None)."""
        return call("_np_min", self, axis=axis, keepdims=keepdims)

    def argmax(self, axis=None, keepdims=False):
        """int64 index of the maximum along `axis` (into the flat array when None)."""
        return call("_np_argmax", self, axis=axis, keepdims=keepdims)

    def argmin(self, axis=None, keepdims=False):
        """int64 index of the minimum along `axis` (into the flat array when None)."""
        return call("_np_argmin", self, axis=axis, keepdims=keepdims)

    def any(self, axis=None, keepdims=False):
        """True where any element along `axis` is non-zero (a bool array)."""
        return call("_np_any", self, axis=axis, keepdims=keepdims)

    def all(self, axis=None, keepdims=False):
        """True where every element along `axis` is non-zero (a bool array)."""
        return call("_np_all", self, axis=axis, keepdims=keepdims)

    def var(self, axis=None, ddof=0, keepdims=False):
        """Variance over `axis`, dividing by n - ddof."""
        return call("_np_var", self, axis=axis, ddof=ddof, keepdims=keepdims)

    def std(self, axis=None, ddof=0, keepdims=False):
        """Standard deviation over `axis`, dividing by n - ddof."""
        return call("sqrt", self.var(axis=axis, ddof=ddof, keepdims=keepdims))

    def cumsum(self, axis=None, dtype=None):
        """Cumulative sum along `axis` (of the flat array when None)."""
        return call("_np_cumsum", self, axis=axis, dtype=dtype)

    def argsort(self, axis=-1):
        """int64 indices that sort the array along `axis` (the flat array when None)."""
        data, axis = (self.flatten(), 0) if axis is None else (self, axis)
        return call("argsort", data, axis=axis, dtype="int64")

    # ---- element-wise -------------------------------------------------------------------
    def clip(self, min=None, max=None):   # noqa: A002 (NumPy's parameter names)
        """Values limited to [min, max]; either bound may be None."""
        return call("_np_clip", self, a_min=min, a_max=max)

    def round(self, decimals=0):
        """Round half to even (as NumPy) to `decimals` decimals."""
        if not decimals:
            return call("rint", self)
        scale = 10.0 ** decimals
        return call("_np_true_divide", call("rint", call("_np_multiply", self, scale)), scale)

    def dot(self, b):
        """NumPy's dot product with `b`."""
        return call("_np_dot", self, b)


operator_methods.define(NumpyMethods, call, operator_methods.NUMPY)
