"""When an operator runs on minigluon_ext's CUDA kernels: `device_kernels(xp, *arrays)`.

Convolution, Pooling, relu and BatchNorm ask this once per call, and so do the optimizers'
steps (with the weight). A `gpu.Kernels` answer means: run the device path (conv_device,
pool_device, the kernels' relu and BatchNorm maps, device_update) with it; None means the
host or NumPy/CuPy path. Only CuPy arrays get an answer: simulated GPUs
(MINIGLUON_SIMULATED_GPUS) hold NumPy arrays and keep the host path.

The device paths take the kernels and the array module as arguments, so a test that sets
`_STAND_IN` to `gpu.Kernels(cuda_on_cpu.CpuBackend())` (the same CUDA sources compiled for
the CPU) runs them, operators and autograd included, on NumPy arrays. Only the `cupy` line
below is left for a GPU to run first.
"""
import types

import numpy as np

import minigluon_ext as ext
from minigluon_ext import gpu

__all__ = ["device_kernels"]

# tests: the Kernels to use for NumPy arrays (None: NumPy arrays never take the device path)
_STAND_IN = None


def device_kernels(xp, *arrays):
    """The kernels for these arrays (None entries: absent inputs), or None unless they are
    all device arrays of one dtype the kernels take (float32, float64)."""
    arrays = [a for a in arrays if a is not None]
    if not arrays or arrays[0].dtype not in ext.LAYER_DTYPES:
        return None
    if xp is np:
        kernels = _STAND_IN
    elif isinstance(xp, types.ModuleType) and xp.__name__ == "cupy":   # not TracingXp
        kernels = gpu.kernels()
    else:
        return None
    if kernels is None or not all(isinstance(a, kernels.xp.ndarray) and
                                  a.dtype == arrays[0].dtype for a in arrays):
        return None
    return kernels
