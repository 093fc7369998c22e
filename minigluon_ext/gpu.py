"""The GPU path: minigluon_ext's kernels for CuPy arrays, from the CUDA sources in cuda_src/.

The functions here have the names, arguments and results of `minigluon_ext.native` for the
kernels a GPU needs (2-bit compression; the layers' kernels come from gpu_layers.py), and
take CuPy arrays on one device. Each `cuda_src/<file>.cu` is compiled by NVRTC (through
`cupy.RawModule`) the first time one of its kernels runs, with `common.cuh` in front of it.

The kernels follow the C kernels' arithmetic step for step (no fused multiply-add: NVRTC
runs with --fmad=false), so a GPU worker's results, and its 2-bit pushes, are the bits a
CPU would make. tests/ext/test_cuda_sources.py checks that on any machine: it compiles
the same sources for the CPU and runs `Kernels` over them.

Importing this module needs no CuPy; the first kernel call does.
"""
import os

import numpy as np

from minigluon.base import DTypeError, ShapeError

from . import _checks as check
from .gpu_layers import LayerKernels

SOURCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_src")

# Bit-identical to the C kernels: no a*b+c contracted to one rounding, IEEE division and sqrt.
NVRTC_OPTIONS = ("--std=c++14", "--fmad=false", "--prec-div=true", "--prec-sqrt=true")

BLOCK = 256            # threads per block
MAX_BLOCKS = 8192      # a grid-stride loop covers any size with at most this many blocks


def source(name):
    """The text NVRTC compiles for cuda_src/<name>.cu: common.cuh, then the file."""
    with open(os.path.join(SOURCE_DIR, "common.cuh")) as f:
        common = f.read()
    with open(os.path.join(SOURCE_DIR, name + ".cu")) as f:
        body = f.read()
    return f"{common}\n#line 1 \"{name}.cu\"\n{body}"


def blocks_for(n):
    """Blocks of BLOCK threads for n items (at least 1; grid-stride beyond MAX_BLOCKS)."""
    return max(1, min((int(n) + BLOCK - 1) // BLOCK, MAX_BLOCKS))


class CudaBackend:
    """Runs kernels on CuPy arrays: one RawModule per source file, compiled on first use."""

    def __init__(self):
        try:
            import cupy
        except ImportError:
            raise ImportError("minigluon_ext.gpu needs CuPy for CUDA arrays; install it with "
                              "`pip install 'minigluon[gpu]'`") from None
        self.xp = cupy
        self._modules = {}

    def launch(self, file, kernel, n, args, like):
        """Run `kernel` of cuda_src/<file>.cu over n items on the device of array `like`."""
        module = self._modules.get(file)
        if module is None:
            module = self.xp.RawModule(code=source(file), options=NVRTC_OPTIONS)
            self._modules[file] = module
        with like.device:
            module.get_function(kernel)((blocks_for(n),), (BLOCK,), args)


class Kernels(LayerKernels):
    """The kernel functions over one backend (`CudaBackend`, or the CPU build of the same
    sources that the tests use); arrays are the backend's `xp.ndarray`. The layer kernels
    (convolution columns, pooling, ReLU, BatchNorm) come from gpu_layers.LayerKernels."""

    def __init__(self, backend):
        self.backend = backend
        self.xp = backend.xp

    # ---- argument checks (the C path's rules, for the backend's arrays) ------------------

    def _array(self, fn, name, x, writable=False, dtypes=check.FLOATS):
        if not isinstance(x, self.xp.ndarray):
            raise TypeError(f"{fn}: {name} must be a {self.xp.__name__}.ndarray on the GPU, "
                            f"got {type(x).__name__}; help: move it with mx.nd.array(..., "
                            f"ctx=mx.gpu()) or cupy.asarray")
        if x.dtype not in dtypes:
            allowed = ", ".join(str(d) for d in dtypes)
            raise DTypeError(f"{fn}: {name} has dtype {x.dtype} (shape {x.shape}); "
                                   f"supported: {allowed}")
        if not x.flags.c_contiguous:
            raise ValueError(f"{fn}: {name} (shape {x.shape}, strides {x.strides}) is not "
                             f"C-contiguous; help: pass {self.xp.__name__}."
                             f"ascontiguousarray({name})")
        return x

    def _same_device(self, fn, first, *others):
        where = getattr(first, "device", None)
        for name, x in others:
            if getattr(x, "device", None) != where:
                raise ValueError(f"{fn}: {name} is on {x.device} but the other arrays are on "
                                 f"{where}; help: copy it to one device first")

    def _run(self, file, kernel, n, args, like):
        if n:
            self.backend.launch(file, kernel, n, args, like)

    # ---- 2-bit compression (cuda_src/twobit.cu) -------------------------------------------

    def quantize_2bit(self, grad, residual, threshold, out=None, nthreads=None):
        """2-bit codes of residual + grad, updating residual in place (native's rule/bits)."""
        fn = "quantize_2bit"
        self._array(fn, "grad", grad)
        self._array(fn, "residual", residual, writable=True)
        rule = check.compute_dtype(grad.dtype)
        check.like(fn, "residual", residual, f"grad ({grad.dtype})", grad, dtype=rule)
        t = check.threshold(fn, threshold, rule)
        words = check.words_for(grad.size)
        if out is None:
            out = self.xp.empty(words, dtype=np.uint32)
        else:
            self._array(fn, "out", out, writable=True, dtypes=(check.WORD,))
            if out.shape != (words,):
                raise ShapeError(f"{fn}: out has shape {out.shape} but grad's "
                                       f"{grad.size} values need shape ({words},)")
        self._same_device(fn, grad, ("residual", residual), ("out", out))
        # float16 grads run the rule in float32 (the residual's dtype), as on the host
        g = grad.astype(np.float32) if grad.dtype == np.float16 else grad
        suffix = "f32" if rule == np.float32 else "f64"
        self._run("twobit", f"quantize_2bit_{suffix}", words,
                  (g, residual, out, rule.type(t), np.int64(grad.size)), grad)
        return out

    def dequantize_2bit(self, packed, threshold, out, nthreads=None):
        """out = the values the 2-bit codes stand for."""
        return self._dequantize("dequantize_2bit", packed, threshold, out, add=False)

    def dequantize_2bit_add(self, packed, threshold, out, nthreads=None):
        """out += the values the 2-bit codes stand for."""
        return self._dequantize("dequantize_2bit_add", packed, threshold, out, add=True)

    def _dequantize(self, fn, packed, threshold, out, add):
        self._array(fn, "packed", packed, dtypes=(check.WORD,))
        self._array(fn, "out", out, writable=True)
        words = check.words_for(out.size)
        if packed.shape != (words,):
            raise ShapeError(f"{fn}: packed has shape {packed.shape} but out's "
                                   f"{out.size} values need shape ({words},)")
        self._same_device(fn, out, ("packed", packed))
        t = check.threshold(fn, threshold, out.dtype)
        if out.dtype == np.float16:
            # float16 sums run in float32 and round once, as on the host
            wide = out.astype(np.float32)
            self._dequantize_into(packed, np.float32(t), wide, add)
            out[...] = wide.astype(np.float16)
            return out
        self._dequantize_into(packed, out.dtype.type(t), out, add)
        return out

    def _dequantize_into(self, packed, t, out, add):
        suffix = "f32" if out.dtype == np.float32 else "f64"
        self._run("twobit", f"dequantize_2bit_{suffix}", out.size,
                  (packed, out, t, np.int32(add), np.int64(out.size)), out)


_cuda = None


def kernels():
    """The `Kernels` of the CUDA backend (CuPy imported on the first call)."""
    global _cuda
    if _cuda is None:
        _cuda = Kernels(CudaBackend())
    return _cuda


# ---- layer kernels (gpu_layers.py) --------------------------------------------------------

def im2col(x, kernel, stride=(1, 1), pad=(0, 0), dilate=(1, 1), out=None, nthreads=None):
    """`native.im2col` for CuPy arrays."""
    return kernels().im2col(x, kernel, stride, pad, dilate, out, nthreads)


def col2im(cols, shape, kernel, stride=(1, 1), pad=(0, 0), dilate=(1, 1), out=None,
           nthreads=None):
    """`native.col2im` for CuPy arrays."""
    return kernels().col2im(cols, shape, kernel, stride, pad, dilate, out, nthreads)


def max_pool2d(x, kernel, stride=(1, 1), pad=(0, 0), convention="valid", nthreads=None):
    """`native.max_pool2d` for CuPy arrays."""
    return kernels().max_pool2d(x, kernel, stride, pad, convention, nthreads)


def max_pool2d_backward(dy, argmax, size, out=None, nthreads=None, **window):
    """`native.max_pool2d_backward` for CuPy arrays (window: kernel=, stride=, pad=)."""
    return kernels().max_pool2d_backward(dy, argmax, size, out, nthreads, **window)


def relu(x, out=None, nthreads=None):
    """`native.relu` for CuPy arrays."""
    return kernels().relu(x, out, nthreads)


def relu_backward(x, dy, out=None, nthreads=None):
    """`native.relu_backward` for CuPy arrays."""
    return kernels().relu_backward(x, dy, out, nthreads)


def batch_norm_forward(x, mean, scale, shift, out=None, nthreads=None):
    """`native.batch_norm_forward` for CuPy arrays."""
    return kernels().batch_norm_forward(x, mean, scale, shift, out, nthreads)


def batch_norm_backward(x, dy, mean, a, b, k, out=None, nthreads=None):
    """`native.batch_norm_backward` for CuPy arrays."""
    return kernels().batch_norm_backward(x, dy, mean, a, b, k, out, nthreads)


# ---- 2-bit compression (twobit.cu) ---------------------------------------------------------

def quantize_2bit(grad, residual, threshold, out=None, nthreads=None):
    """`native.quantize_2bit` for CuPy arrays."""
    return kernels().quantize_2bit(grad, residual, threshold, out, nthreads)


def dequantize_2bit(packed, threshold, out, nthreads=None):
    """`native.dequantize_2bit` for CuPy arrays."""
    return kernels().dequantize_2bit(packed, threshold, out, nthreads)


def dequantize_2bit_add(packed, threshold, out, nthreads=None):
    """`native.dequantize_2bit_add` for CuPy arrays."""
    return kernels().dequantize_2bit_add(packed, threshold, out, nthreads)
