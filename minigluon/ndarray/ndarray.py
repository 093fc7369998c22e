"""NDArray: a mutable n-dimensional array on one device, with MXNet 1.x semantics.

The data lives in `_data`, a numpy.ndarray on CPU or a cupy.ndarray on a real GPU. Every
computation goes through the operator registry (`registry.invoke`), which is also where
autograd records. In-place operators write into the existing buffer, so views, parameters
and optimizer states keep their identity.
"""
import numpy as np

from .. import autograd
from ..base import AutogradError, MXNetError, ShapeError
from ..context import Context, current_context
from . import mxnet_format, operator_methods, registry, sparse_storage

_NUMERIC = (int, float, bool, np.generic)
py_slice = slice   # Python's slice, under the name MXNet code uses where nd.slice shadows it

# MXNet's storage-type ids (graph attributes and file headers carry the number). NDArray
# is 'default' (dense) storage; the sparse classes of mx.nd.sparse are the others. The
# underscored names are MXNet's, which its tests import; minigluon's modules use the public ones.
STORAGE_TYPE_STR_TO_ID = {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}
STORAGE_TYPE_ID_TO_STR = {v: k for k, v in STORAGE_TYPE_STR_TO_ID.items()}
_STORAGE_TYPE_STR_TO_ID, _STORAGE_TYPE_ID_TO_STR = STORAGE_TYPE_STR_TO_ID, STORAGE_TYPE_ID_TO_STR
_np_class = None   # mx.np.ndarray, registered by mx.np (which sits above ndarray) at import


def set_np_class(cls):
    """Make `cls` (mx.np.ndarray) the class `NDArray.as_np_ndarray()` returns."""
    global _np_class
    _np_class = cls


def _call(name, *args, **kwargs):
    return registry.invoke(registry.OPS[name], args, kwargs)


class NDArray:
    """An array on a device. Create one with `mx.nd.array`, `mx.nd.zeros`, ..."""

    __slots__ = ("_data", "_ctx", "_node", "_out_index", "_grad", "_grad_req", "_fresh_grad",
                 "_grad_hooks", "__weakref__")
    __array_ufunc__ = None    # numpy defers to our reflected operators
    __array_priority__ = 1000.0

    def __init__(self, data, ctx=None):
        self._data = data
        self._ctx = ctx if ctx is not None else current_context()
        self._node = None
        self._out_index = 0
        self._grad = None
        self._grad_req = None
        self._fresh_grad = False   # set by autograd.backward, cleared by Trainer.step
        self._grad_hooks = None    # {id: hook}: autograd.register_post_accumulate_grad_hook

    # ---- attributes -------------------------------------------------------------------
    @property
    def shape(self):
        return tuple(self._data.shape)

    @property
    def dtype(self):
        """The element type as a NumPy scalar type, e.g. `numpy.float32`."""
        return self._data.dtype.type

    @property
    def size(self):
        return int(self._data.size)

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def context(self):
        return self._ctx

    ctx = context

    @property
    def stype(self):
        """The storage type: 'default' (dense); sparse arrays are 'row_sparse' or 'csr'."""
        return "default"

    @property
    def grad(self):
        """The gradient buffer attached by `attach_grad()`, or None."""
        return self._grad

    @property
    def T(self):
        return _call("transpose", self)

    @property
    def writable(self):
        return bool(getattr(self._data.flags, "writeable", True))

    # ---- conversion -------------------------------------------------------------------
    def asnumpy(self):
        """A NumPy copy of the data."""
        if isinstance(self._data, np.ndarray):
            return self._data.copy()
        return self._data.get()

    def asscalar(self):
        """The single element as a NumPy scalar; the array must have size 1."""
        if self.size != 1:
            raise ShapeError(f"asscalar needs an array of size 1, got shape {self.shape}")
        return self.asnumpy().reshape(())[()]

    def item(self):
        return self.asscalar().item()

    def astype(self, dtype, copy=True):
        """The data converted to `dtype` (gradients flow back through the cast)."""
        if not copy and np.dtype(dtype) == self._data.dtype:
            return self
        return _call("cast", self, dtype=dtype)

    def tostype(self, stype):
        """This array in storage type `stype` ('default', 'row_sparse' or 'csr')."""
        return _call("cast_storage", self, stype=stype)

    def copy(self):
        """A copy on the same device."""
        return self.copyto(self._ctx)

    def copyto(self, other):
        """Copy into `other` (an NDArray, whose buffer is overwritten) or onto a Context."""
        if isinstance(other, Context):
            return _to_context(self, other)
        if isinstance(other, NDArray):
            if other is self:
                return other
            if other.shape != self.shape:
                raise ShapeError(f"copyto: source shape {self.shape} does not match "
                                 f"destination shape {other.shape}")
            moved = _to_context(self, other._ctx)
            if "default" != self.stype or "default" != other.stype:
                # the destination keeps its storage type (MXNet converts into it)
                return registry.invoke(registry.get("cast_storage"), (moved,),
                                       {"stype": other.stype}, out=other)
            other._data[...] = moved._data
            other._node, other._out_index = moved._node, moved._out_index
            return other
        raise MXNetError(f"copyto: expected an NDArray or a Context, got {type(other).__name__}")

    def as_in_context(self, context):
        """This array on `context`: itself if it is already there, else a copy."""
        if context == self._ctx:
            return self
        return _to_context(self, context)

    as_in_ctx = as_in_context

    def wait_to_read(self):
        """Block until pending device work that writes this array is done."""
        if not isinstance(self._data, np.ndarray):
            with self._ctx.scope():
                self._ctx.xp.cuda.get_current_stream().synchronize()

    wait_to_write = wait_to_read

    def to_dlpack_for_read(self):
        """A DLPack capsule sharing this array's memory, for another framework to read."""
        self.wait_to_read()
        return self._data.__dlpack__()

    def to_dlpack_for_write(self):
        """A DLPack capsule sharing this array's memory, for another framework to write."""
        self.wait_to_write()
        return self._data.__dlpack__()

    def tolist(self):
        return self.asnumpy().tolist()

    # NDArray opts out of NumPy's ufuncs (__array_ufunc__ = None, so numpy defers to our
    # operators), which NumPy's np.all / np.any would use; they call these methods instead,
    # and give NumPy's answer on the data as MXNet's NDArray does.
    def all(self, axis=None, out=None, keepdims=False, **kwargs):
        """NumPy's `all` of the data (what `np.all(x)` returns)."""
        return np.all(self.asnumpy(), axis=axis, out=out, keepdims=keepdims, **kwargs)

    def any(self, axis=None, out=None, keepdims=False, **kwargs):
        """NumPy's `any` of the data (what `np.any(x)` returns)."""
        return np.any(self.asnumpy(), axis=axis, out=out, keepdims=keepdims, **kwargs)

    def __array__(self, dtype=None, copy=None):
        arr = self.asnumpy()
        return arr if dtype is None else arr.astype(dtype, copy=False)

    # ---- autograd ---------------------------------------------------------------------
    def attach_grad(self, grad_req="write", stype=None):
        """Make this array a variable: later `backward()` calls write its `.grad`, kept in
        storage type `stype` (by default this array's own)."""
        stype = self.stype if stype is None else stype
        zeros = self._ctx.xp.zeros(self.shape, dtype=self.dtype)
        dense_cls = type(self) if self.stype == "default" else NDArray
        grad = dense_cls(zeros, self._ctx)
        if stype != "default":
            grad = grad.tostype(stype)
        autograd.mark_variables([self], [grad], grad_req)

    # the tape's view of storage (autograd calls these; sparse classes override them):
    # gradients travel as dense raw buffers and take a buffer's stype when stored
    def _dense_raw(self):
        """The data as a dense raw buffer."""
        return self._data

    def _write_dense(self, raw, add=False):
        """Write (or with `add`, add) the dense raw buffer `raw` into this array; a sparse
        container (a row_sparse gradient) is densified first."""
        if hasattr(raw, "to_dense"):
            with self._ctx.scope():
                raw = raw.to_dense(self._ctx.xp)
        if add:
            self._data += raw
        else:
            self._data[...] = raw

    def _wrap_dense(self, raw):
        """The dense raw buffer `raw` as a dense array of this array's flavour."""
        return type(self)(raw, self._ctx)

    def backward(self, out_grad=None, retain_graph=False, train_mode=True):
        """Backpropagate from this array (see `autograd.backward`)."""
        autograd.backward([self], None if out_grad is None else [out_grad],
                          retain_graph=retain_graph, train_mode=train_mode)

    def detach(self):
        """The same data, cut out of the recorded graph."""
        return type(self)(self._data, self._ctx)

    # ---- the NumPy front end (mx.np) ----------------------------------------------------
    def as_np_ndarray(self):
        """This array as an `mx.np.ndarray` (NumPy semantics), sharing data and graph."""
        return self._view_as(_np_class)

    def as_nd_ndarray(self):
        """This array as a legacy `mx.nd.NDArray`, sharing data and graph."""
        return self if type(self) is NDArray else self._view_as(NDArray)

    def _view_as(self, cls):
        """Another handle, of class `cls`, on this array's data, graph position and gradient
        buffer. Both handles see writes; attach_grad() on the one used in the graph."""
        view = cls(self._data, self._ctx)
        view._node, view._out_index = self._node, self._out_index
        view._grad, view._grad_req = self._grad, self._grad_req
        return view

    # ---- shape helpers with MXNet's calling conventions ---------------------------------
    def reshape(self, *shape, **kwargs):
        """Reshape; `x.reshape(2, 3)`, `x.reshape((2, -1))` and `x.reshape(shape=(0, -1))`."""
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        if shape:
            kwargs["shape"] = shape
        return _call("reshape", self, **kwargs)

    def reshape_like(self, *args, **kwargs):
        """Reshape to the shape of `rhs` (by position or as `rhs=`), as nd.reshape_like."""
        return _call("reshape_like", self, *args, **kwargs)

    def flatten(self, inplace=False):
        """(N, d1, d2, ...) -> (N, d1*d2*...); `inplace=True` gives a view sharing the data."""
        return self._shaped("flatten", inplace)

    def squeeze(self, axis=None, inplace=False):
        """Drop axes of size 1 (those in `axis` when given); `inplace=True` gives a view."""
        return self._shaped("squeeze", inplace, axis=axis)

    def expand_dims(self, axis, inplace=False):
        """Insert an axis of size 1 at `axis`; `inplace=True` gives a view."""
        return self._shaped("expand_dims", inplace, axis=axis)

    def _shaped(self, name, inplace, **attrs):
        """The shape op `name` as MXNet's methods give it: a new buffer (an operator's
        result), or with `inplace` a view that sees later writes to this array."""
        out = _call(name, self, **attrs)
        if not inplace:
            out._data = out._data.copy()    # a reshape's backward needs no output values
        return out

    def zeros_like(self):
        return type(self)(self._ctx.xp.zeros_like(self._data), self._ctx)

    def ones_like(self):
        return type(self)(self._ctx.xp.ones_like(self._data), self._ctx)

    # ---- indexing ---------------------------------------------------------------------
    def __getitem__(self, key):
        return _call("_getitem", self, key=raw_index(key, self._ctx))

    def __setitem__(self, key, value):
        if autograd.is_recording() and (autograd.needs_grad(self) or (
                isinstance(value, NDArray) and autograd.needs_grad(value))):
            raise AutogradError(
                f"x[{key!r}] = value: Inplace operations (+=, -=, x[:]=, etc) are not supported "
                "when recording with autograd on an array, or from a value, that needs a "
                "gradient; build the result out of place (e.g. with nd.where or concat) instead")
        key = raw_index(key, self._ctx)
        if isinstance(value, NDArray):
            value = value.as_in_context(self._ctx)._dense_raw()
        elif not isinstance(value, _NUMERIC):
            value = self._ctx.xp.asarray(value)
        if getattr(value, "size", 0) == 1:
            value = value.reshape(())    # MXNet code writes x[i] = nd.array([v])
        try:
            self._data[key] = value
        except (ValueError, IndexError) as err:
            shape = getattr(value, "shape", ())
            raise ShapeError(f"__setitem__: cannot assign a value of shape {tuple(shape)} to "
                             f"index {key!r} of an array of shape {self.shape}: {err}") from None

    @staticmethod
    def _basic_indexing_slice_is_contiguous(slc_key, shape):
        """Whether `x[slc_key]` of a C-contiguous array of `shape` is itself C-contiguous,
        for a key of ints and slices (NumPy's flag rule: axes of length 1 never matter)."""
        slc_key = slc_key if isinstance(slc_key, tuple) else (slc_key,)
        lengths, strides, step_stride = [], [], 1
        for dim in reversed(range(len(shape))):
            part = slc_key[dim] if dim < len(slc_key) else slice(None)
            if isinstance(part, slice):
                start, stop, step = part.indices(shape[dim])
                lengths.append(len(range(start, stop, step)))
                strides.append(step * step_stride)
            step_stride *= shape[dim]
        if 0 in lengths:
            return True
        expected = 1
        for length, stride in zip(lengths, strides):
            if length != 1:
                if stride != expected:
                    return False
                expected *= length
        return True

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d NDArray")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __bool__(self):
        if self.size == 1:
            return bool(self.asscalar())
        if self.size == 0:
            return False
        raise ValueError(f"the truth value of an NDArray of shape {self.shape} is ambiguous; "
                         "use .asnumpy().any() or .all()")

    def __float__(self):
        return float(self.asscalar())

    def __int__(self):
        return int(self.asscalar())

    def __repr__(self):
        shape = "x".join(str(n) for n in self.shape)
        return f"\n{self.asnumpy()}\n<NDArray {shape} @{self._ctx}>"

    def __getstate__(self):
        return {"data": self.asnumpy(), "ctx": (self._ctx.device_type, self._ctx.device_id)}

    def __setstate__(self, state):
        if "handle" in state:    # an MXNet NDArray's state: its binary record, loaded on cpu
            NDArray.__init__(self, mxnet_format.read_handle(bytes(state["handle"])), Context("cpu", 0))
            return
        ctx = Context(*state["ctx"])
        NDArray.__init__(self, ctx.xp.asarray(state["data"]), ctx)

    __hash__ = object.__hash__

    # ---- arithmetic: the dunder methods are added by operator_methods.define below ---
    def __pos__(self): return self

    def _inplace(self, name, other):
        """`self op= other`: recorded as a new graph node when autograd needs it, otherwise
        written into the existing buffer so views and aliases see the change."""
        result = _call(name, self._snapshot() if autograd.is_recording() else self, other)
        if result._node is not None:
            self._data, self._node, self._out_index = result._data, result._node, 0
            return self
        if result.shape != self.shape:
            raise ShapeError(f"{name} in place: result shape {result.shape} does not fit "
                             f"the target's shape {self.shape}")
        self._data[...] = result._data
        return self

    def _snapshot(self):
        """Another handle on this array's data, graph position and gradient buffer, so a
        recorded in-place op can rebind `self` without its node taking `self` as input."""
        return self._view_as(type(self))


registry.set_array_class(NDArray)
operator_methods.define(NDArray, _call, operator_methods.LEGACY, inplace=True)


def _to_context(array, ctx):
    """Copy `array` onto device `ctx`, recording the copy so gradients flow back."""
    src = array._ctx
    data = _move(array._data, src, ctx)
    out = type(array)(data, ctx)
    if autograd.is_recording() and autograd.needs_grad(array):
        node = autograd.Node("_copyto", lambda dy: (_move(dy, ctx, src),), [array],
                             [(out.shape, data.dtype, ctx)])
        out._node = node
    return out


def _move(data, src, dst):
    """A copy of the raw array (or sparse container) `data` from device `src` to `dst`."""
    if sparse_storage.is_sparse(data):
        return data.map(lambda part: _move(part, src, dst))
    if dst.xp is np:
        return data.copy() if isinstance(data, np.ndarray) else data.get()
    with dst.scope():
        return dst.xp.array(data, copy=True)


def raw_index(key, ctx):
    """The index `key` as the array module takes it: NDArrays in it become integer (or
    bool) arrays on `ctx`, the indexed array's device; lists become arrays."""
    if isinstance(key, NDArray):
        return _index_array(key, ctx)
    if isinstance(key, tuple):
        return tuple(_index_array(k, ctx) if isinstance(k, NDArray) else k for k in key)
    if isinstance(key, list):
        return ctx.xp.asarray(key)
    return key


def _index_array(key, ctx):
    data = key.as_in_context(ctx)._data
    if data.dtype.kind == "b":
        return data
    if data.dtype.kind == "f":
        return data.astype(np.int64)
    return data


__all__ = ["NDArray", "AutogradError"]
