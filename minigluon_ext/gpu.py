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
UPDATE_FORMS = ("optimizer", "operator")
MAX_BLOCKS = 8192      # a grid-stride loop covers any size with at most this many blocks


def source(name):
    """The text NVRTC compiles for cuda_src/<name>.cu: common.cuh, then the file."""
    with open(os.path.join(SOURCE_DIR, "common.cuh")) as f:
        common = f.read()
    with open(os.path.join(SOURCE_DIR, name + ".cu")) as f:
        body = f.read()
    return f"{common}\n#line 1 \"{name}.cu\"\n{body}"


def _suffix(x):
    """A kernel name's dtype suffix for a float32 or float64 array."""
    return "f32" if x.dtype == np.float32 else "f64"


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

    @staticmethod
    def device_of(x):
        """The context in which new arrays are made on x's device (`with backend.device_of(x)`)."""
        return x.device

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

    def zeros(self, like, n, dtype):
        """n zeros of dtype on the device of array `like`."""
        with self.backend.device_of(like):
            return self.xp.zeros(n, dtype=dtype)

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
            with self.backend.device_of(grad):          # not the current device: grad's
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


    # ---- optimizer updates (cuda_src/update.cu) --------------------------------------------
    # form="optimizer": the steps of optimizer/sgd.py, adam.py and nag.py (wd * weight added
    # only when wd != 0); form="operator": nd.sgd_update, nd.sgd_mom_update, nd.adam_update
    # and nd.nag_mom_update (wd * weight always added, and their grouping of operations).

    def sgd_update(self, weight, grad, mom=None, lr=0.01, wd=0.0, momentum=0.0,
                   rescale_grad=1.0, clip_gradient=None, nthreads=None, form="optimizer"):
        """One SGD step on weight (and mom) in place: native.sgd_update's rule and bits."""
        fn = "sgd_update"
        self._update_arrays(fn, weight, grad, [("mom", mom)] if mom is not None else [])
        t, clip, clipping, decay = self._update_numbers(fn, weight, wd, clip_gradient, form)
        nums = [t(check.real(fn, name, v)) for name, v in
                (("lr", lr), ("wd", wd), ("momentum", momentum), ("rescale_grad", rescale_grad))]
        state = weight if mom is None else mom        # never read without momentum
        self._run("update", f"sgd_update_{_suffix(weight)}", weight.size,
                  (weight, grad, state, *nums, t(clip), np.int32(clipping), np.int32(decay),
                   np.int32(mom is not None), np.int64(weight.size)), weight)
        return weight

    def sgd_scaled_update(self, weight, grad, lr, wd=0.0, rescale_grad=1.0, clip_gradient=None):
        """sgd_step's SGD (ndarray/ops_optimizer_mp.py) in place: weight = (1 - lr * wd) *
        weight - lr * clip(rescale_grad * grad), with 1 - lr * wd rounded once."""
        fn = "sgd_scaled_update"
        self._update_arrays(fn, weight, grad, [])
        t, clip, clipping, _ = self._update_numbers(fn, weight, wd, clip_gradient, "operator")
        lr, wd, rescale = [check.real(fn, name, v) for name, v in
                           (("lr", lr), ("wd", wd), ("rescale_grad", rescale_grad))]
        self._run("update", f"sgd_scaled_update_{_suffix(weight)}", weight.size,
                  (weight, grad, t(lr), t(1.0 - lr * wd), t(rescale), t(clip),
                   np.int32(clipping), np.int64(weight.size)), weight)
        return weight

    def adam_update(self, weight, grad, mean, var, lr, beta1=0.9, beta2=0.999, epsilon=1e-8,
                    wd=0.0, rescale_grad=1.0, clip_gradient=None, form="optimizer"):
        """One Adam step (lr already bias-corrected) on weight, mean and var in place:
        optimizer/adam.py's arithmetic (form="operator": nd.adam_update's)."""
        fn = "adam_update"
        self._update_arrays(fn, weight, grad, [("mean", mean), ("var", var)])
        t, clip, clipping, decay = self._update_numbers(fn, weight, wd, clip_gradient, form)
        lr, b1, b2, eps, wd, rescale = [check.real(fn, name, v) for name, v in (
            ("lr", lr), ("beta1", beta1), ("beta2", beta2), ("epsilon", epsilon), ("wd", wd),
            ("rescale_grad", rescale_grad))]
        # 1 - beta rounds once, from double: NumPy's (1.0 - beta1) * g does the same
        nums = [t(v) for v in (lr, b1, b2, 1.0 - b1, 1.0 - b2, eps, wd, rescale, clip)]
        self._run("update", f"adam_update_{_suffix(weight)}", weight.size,
                  (weight, grad, mean, var, *nums, np.int32(clipping), np.int32(decay),
                   np.int32(form == "optimizer"), np.int64(weight.size)), weight)
        return weight

    def nag_mom_update(self, weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                       clip_gradient=None, form="optimizer"):
        """One Nesterov step on weight and mom in place: nag_mom_step's arithmetic
        (ndarray/ops_optimizer_mp.py; form="operator": nd.nag_mom_update's)."""
        fn = "nag_mom_update"
        self._update_arrays(fn, weight, grad, [("mom", mom)])
        t, clip, clipping, _ = self._update_numbers(fn, weight, wd, clip_gradient, form)
        nums = [t(check.real(fn, name, v)) for name, v in
                (("lr", lr), ("wd", wd), ("momentum", momentum), ("rescale_grad", rescale_grad))]
        # nag_mom_step adds wd * weight whatever wd is, as the operator does
        self._run("update", f"nag_mom_update_{_suffix(weight)}", weight.size,
                  (weight, grad, mom, *nums, t(clip), np.int32(clipping), np.int32(1),
                   np.int32(form == "optimizer"), np.int64(weight.size)), weight)
        return weight

    def _update_arrays(self, fn, weight, grad, states):
        """weight, grad and the states: contiguous float32/float64 arrays of one shape,
        dtype and device, the states writable and apart from the others."""
        self._array(fn, "weight", weight, writable=True, dtypes=check.LAYER_FLOATS)
        self._array(fn, "grad", grad, dtypes=check.LAYER_FLOATS)
        check.like(fn, "grad", grad, "weight", weight)
        others = [("weight", weight), ("grad", grad)]
        for name, s in states:
            self._array(fn, name, s, writable=True, dtypes=check.LAYER_FLOATS)
            check.like(fn, name, s, "weight", weight)
            for other_name, other in others:
                if self.xp.may_share_memory(s, other):
                    raise ValueError(f"{fn}: {name} (shape {s.shape}) shares memory with "
                                     f"{other_name}; help: pass separate arrays")
            others.append((name, s))
        self._same_device(fn, weight, *others[1:])

    @staticmethod
    def _update_numbers(fn, weight, wd, clip_gradient, form):
        """(the dtype's scalar type, clip as a float, whether to clip, whether to add
        wd * weight) for `form`; clip_gradient None or <= 0 is off."""
        if form not in UPDATE_FORMS:
            raise ValueError(f"{fn}: form must be one of {UPDATE_FORMS}, got {form!r}")
        clip = 0.0 if clip_gradient is None else check.real(fn, "clip_gradient", clip_gradient)
        decay = form == "operator" or check.real(fn, "wd", wd) != 0
        return weight.dtype.type, clip, clip > 0, decay


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


def sgd_update(weight, grad, mom=None, lr=0.01, wd=0.0, momentum=0.0, rescale_grad=1.0,
               clip_gradient=None, nthreads=None):
    """`native.sgd_update` for CuPy arrays."""
    return kernels().sgd_update(weight, grad, mom, lr, wd, momentum, rescale_grad,
                                clip_gradient, nthreads)


def adam_update(weight, grad, mean, var, lr, beta1=0.9, beta2=0.999, epsilon=1e-8, wd=0.0,
                rescale_grad=1.0, clip_gradient=None):
    """optimizer/adam.py's dense step for CuPy arrays (lr already bias-corrected)."""
    return kernels().adam_update(weight, grad, mean, var, lr, beta1, beta2, epsilon, wd,
                                 rescale_grad, clip_gradient)


def nag_mom_update(weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                   clip_gradient=None):
    """nag_mom_step (the NAG optimizer's step with momentum) for CuPy arrays."""
    return kernels().nag_mom_update(weight, grad, mom, lr, momentum, wd, rescale_grad,
                                    clip_gradient)
