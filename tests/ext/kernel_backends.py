"""Where `gpu.Kernels` is tested: on the CUDA sources compiled for the CPU (cuda_on_cpu),
wherever g++ is, and on the real GPU (CuPy and NVRTC), wherever there is one. The layer
tests take the `kernels` fixture that conftest.py builds from `KINDS`, so a session with a
GPU runs the very comparisons with the C kernels on it.

`OnGpu` lets a test written for NumPy arrays run on the GPU unchanged.
"""
import numpy as np
import pytest

from minigluon_ext import gpu

import cuda_on_cpu


def has_gpu():
    """True where CuPy imports and sees a CUDA device."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:        # no CuPy, no driver or no device: each means no GPU here
        return False


KINDS = [pytest.param("cpu", marks=pytest.mark.skipif(cuda_on_cpu.compiler() is None,
                                                      reason="needs g++")),
         pytest.param("gpu", marks=pytest.mark.skipif(not has_gpu(), reason="needs a GPU"))]


def make(kind):
    """The kernels of one kind, called with NumPy arrays."""
    return gpu.Kernels(cuda_on_cpu.CpuBackend()) if kind == "cpu" else OnGpu()


class OnGpu:
    """gpu.Kernels on the GPU, called with NumPy arrays: array arguments are copied to the
    device, and after the call copied back into the arrays they came from (some kernels write
    their arguments); results come back as NumPy arrays, or as the caller's own array where
    the kernel returned that argument."""

    xp = np

    def __init__(self):
        import cupy
        self.cupy, self.kernels = cupy, gpu.Kernels(gpu.CudaBackend())

    def __getattr__(self, name):
        method = getattr(self.kernels, name)
        if not callable(method):
            return method
        return lambda *args, **kwargs: self._call(method, args, kwargs)

    def _call(self, method, args, kwargs):
        copies = {}                         # id(device copy) -> (copy, the NumPy original)

        def to_device(a):
            if not isinstance(a, np.ndarray):
                return a
            d = self.cupy.asarray(a)
            copies[id(d)] = (d, a)
            return d
        result = method(*[to_device(a) for a in args],
                        **{k: to_device(v) for k, v in kwargs.items()})
        for d, a in copies.values():
            if a.flags.writeable:
                a[...] = d.get()
        return self._back(result, copies)

    def _back(self, result, copies):
        if isinstance(result, tuple):
            return tuple(self._back(r, copies) for r in result)
        if id(result) in copies:
            return copies[id(result)][1]
        return result.get() if isinstance(result, self.cupy.ndarray) else result
