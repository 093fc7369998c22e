"""Devices: `cpu(i)` and `gpu(i)`, and the array module (numpy or cupy) behind each.

`cpu(0)` and `cpu(1)` are distinct devices that share host memory, so data-parallel and
model-parallel code can be exercised on one machine. GPU arrays come from CuPy, imported
the first time a GPU context is used. With MINIGLUON_SIMULATED_GPUS=N, `gpu(0..N-1)` are
backed by NumPy instead (see config.simulated_gpus).
"""
import contextlib
import threading
import warnings

import numpy

from . import config
from .base import ContextError

_local = threading.local()
_cupy = None


def _import_cupy():
    """Import CuPy once, or explain how to get a usable GPU backend."""
    global _cupy
    if _cupy is None:
        try:
            import cupy
        except ImportError:
            raise ContextError(
                "a GPU context needs CuPy, which is not installed; install it with "
                "`pip install 'minigluon[gpu]'` (or the cupy-cudaXXx wheel matching your "
                "CUDA), or set MINIGLUON_SIMULATED_GPUS=N to simulate N GPUs with NumPy"
            ) from None
        _cupy = cupy
    return _cupy


def num_gpus():
    """Number of GPUs visible: the simulated count, else CUDA's device count (0 without CuPy)."""
    simulated = config.simulated_gpus()
    if simulated:
        return simulated
    try:
        cupy = _import_cupy()
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy, no driver, or no device: all mean "zero GPUs"
        return 0


class _ContextType(type):
    """Gives the Context class MXNet 1.x's deprecated class attribute `default_ctx`."""

    @property
    def default_ctx(cls):
        """The current device (deprecated in MXNet too: use `mx.current_context()`)."""
        warnings.warn("Context.default_ctx is deprecated; use mx.current_context()",
                      DeprecationWarning, stacklevel=2)
        return current_context()

    @default_ctx.setter
    def default_ctx(cls, ctx):
        warnings.warn("Context.default_ctx is deprecated; use `with ctx:` scopes",
                      DeprecationWarning, stacklevel=2)
        if not isinstance(ctx, Context):
            raise ContextError(f"Context.default_ctx must be a Context, got {ctx!r}")
        _stack()[-1] = ctx


class Context(metaclass=_ContextType):
    """A device: `Context('cpu', 0)`, `Context('gpu', 1)`; also a `with` scope default."""

    devtype2str = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
    devstr2type = {v: k for k, v in devtype2str.items()}

    def __init__(self, device_type, device_id=0):
        if isinstance(device_type, Context):
            device_type, device_id = device_type.device_type, device_type.device_id
        if device_type not in self.devstr2type:
            raise ContextError(f"unknown device type {device_type!r}; use 'cpu' or 'gpu'")
        if not isinstance(device_id, int) or device_id < 0:
            raise ContextError(f"device_id must be a non-negative int, got {device_id!r}")
        self.device_type = device_type
        self.device_id = device_id
        self._xp = None

    @property
    def device_typeid(self):
        return self.devstr2type[self.device_type]

    @property
    def xp(self):
        """The array module for this device: numpy, or cupy for a real GPU."""
        if self._xp is None:
            self._xp = self._resolve_array_module()
        return self._xp

    @property
    def is_gpu(self):
        return self.device_type == "gpu"

    def _resolve_array_module(self):
        if self.device_type != "gpu":
            return numpy
        simulated = config.simulated_gpus()
        if simulated:
            if self.device_id >= simulated:
                raise ContextError(
                    f"{self} does not exist: MINIGLUON_SIMULATED_GPUS={simulated} "
                    f"simulates gpu(0)..gpu({simulated - 1})")
            return numpy
        cupy = _import_cupy()
        count = num_gpus()
        if self.device_id >= count:
            raise ContextError(
                f"{self} does not exist: CUDA sees {count} GPU(s); use gpu(0)..gpu({count - 1}), "
                "cpu(), or set MINIGLUON_SIMULATED_GPUS=N to simulate GPUs")
        return cupy

    def scope(self):
        """A context manager that makes this device current for the array module."""
        if self.xp is numpy:
            return contextlib.nullcontext()
        return self.xp.cuda.Device(self.device_id)

    def empty_cache(self):
        """Release cached GPU memory back to the driver (no-op on CPU)."""
        if self.xp is not numpy:
            self.xp.get_default_memory_pool().free_all_blocks()

    def __reduce__(self):
        # the cached array module cannot be pickled; a device is its type and id
        return (Context, (self.device_type, self.device_id))

    def __eq__(self, other):
        return (isinstance(other, Context) and self.device_type == other.device_type
                and self.device_id == other.device_id)

    def __hash__(self):
        return hash((self.device_type, self.device_id))

    def __repr__(self):
        return f"{self.device_type}({self.device_id})"

    __str__ = __repr__

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()


def _stack():
    if not hasattr(_local, "stack"):
        _local.stack = [Context("cpu", 0)]
    return _local.stack


def current_context():
    """The device new arrays go to when no `ctx` is given."""
    return _stack()[-1]


def cpu(device_id=0):
    """The CPU device `device_id` (distinct ids are distinct devices sharing host memory)."""
    return Context("cpu", device_id)


def cpu_pinned(device_id=0):
    """Page-locked host memory; on minigluon this is ordinary host memory."""
    return Context("cpu_pinned", device_id)


def gpu(device_id=0):
    """The GPU device `device_id`; checked when first used, not when named."""
    return Context("gpu", device_id)
