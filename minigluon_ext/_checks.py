"""Argument checks and the thread plan, shared by the C path and the NumPy fallback.

Both paths run these checks before touching memory, so they refuse the same inputs with
the same exceptions and messages: TypeError (`DTypeError`) for a wrong type or dtype,
ValueError (`ShapeError`) for a wrong shape or length, ValueError for a non-contiguous,
misaligned, read-only or overlapping array and for a bad threshold or thread count.
"""
import math
import numbers

import numpy as np

from minigluon.base import DTypeError, ShapeError
from minigluon.config import kvstore_bigarray_bound, kvstore_reduction_nthreads
from minigluon.threads import compute_threads

FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
WORD = np.dtype(np.uint32)
VALUES_PER_WORD = 16


def threads_for(n, nthreads=None):
    """Threads a kernel uses on `n` elements: 1 up to the big-array bound, else `nthreads`.

    `nthreads=None` means MXNET_KVSTORE_REDUCTION_NTHREADS capped at the usable cores; a
    number given here is used as is (tests use it to split small arrays 1..4 ways).
    """
    if n <= kvstore_bigarray_bound():
        return 1
    return kvstore_reduction_nthreads() if nthreads is None else nthreads


def words_for(n):
    """Number of uint32 words that hold the 2-bit codes of `n` values."""
    return (n + VALUES_PER_WORD - 1) // VALUES_PER_WORD


def same_memory(x, y):
    """True when x and y are the very same bytes (same start, same size)."""
    return x.__array_interface__["data"][0] == y.__array_interface__["data"][0] and \
        x.nbytes == y.nbytes


def _describe(x):
    return f"shape {x.shape}, dtype {x.dtype}"


def array(fn, name, x, writable=False, dtypes=FLOATS):
    """Check that x is a C-contiguous, aligned ndarray of one of `dtypes` (writable if asked)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{fn}: {name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype not in dtypes:
        allowed = ", ".join(str(d) for d in dtypes)
        raise DTypeError(f"{fn}: {name} has dtype {x.dtype} (shape {x.shape}); "
                         f"supported: {allowed}")
    if not x.flags.c_contiguous:
        fix = ("write into a contiguous array, then copy it into the view" if writable
               else f"pass np.ascontiguousarray({name})")
        raise ValueError(f"{fn}: {name} ({_describe(x)}, strides {x.strides}) is not "
                         f"C-contiguous; help: {fix}")
    if not x.flags.aligned:
        raise ValueError(f"{fn}: {name} ({_describe(x)}) is not aligned to its "
                         f"{x.dtype.itemsize}-byte items; help: pass a copy (x.copy())")
    if writable and not x.flags.writeable:
        raise ValueError(f"{fn}: {name} ({_describe(x)}) is read-only; "
                         f"help: pass a writable array")
    return x


def like(fn, name, x, ref_name, ref, dtype=None):
    """Check that x has ref's shape and `dtype` (default: ref's dtype)."""
    dtype = ref.dtype if dtype is None else np.dtype(dtype)
    if x.dtype != dtype:
        raise DTypeError(f"{fn}: {name} has dtype {x.dtype} but {ref_name} needs {dtype}; "
                         f"help: cast with .astype(np.{dtype})")
    if x.shape != ref.shape:
        raise ShapeError(f"{fn}: {name} has shape {x.shape} but {ref_name} has shape "
                         f"{ref.shape}")


def apart(fn, name, x, other_name, other, allow_same=False):
    """Check that x and other share no memory (or are the very same array, if allowed)."""
    if not np.may_share_memory(x, other):
        return
    if allow_same and same_memory(x, other):
        return
    what = "partially overlaps" if allow_same else "shares memory with"
    raise ValueError(f"{fn}: {name} ({_describe(x)}) {what} {other_name} "
                     f"({_describe(other)}); help: pass separate arrays")


def momentum_state(fn, mom, weight, grad):
    """Check an SGD momentum buffer: writable, shaped and typed as `weight`, and sharing
    memory with neither `weight` nor `grad`."""
    array(fn, "mom", mom, writable=True, dtypes=LAYER_FLOATS)
    like(fn, "mom", mom, "weight", weight)
    apart(fn, "mom", mom, "weight", weight)
    apart(fn, "mom", mom, "grad", grad)


def real(fn, name, value):
    """Check that value is a real number and return it as a Python float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a real number, got {type(value).__name__}")
    return float(value)


def threshold(fn, value, dtype):
    """Return the threshold rounded to `dtype`; refuse <= 0, NaN, inf and what rounds to them."""
    v = real(fn, "threshold", value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{fn}: threshold must be a finite number > 0, got {value!r}")
    with np.errstate(over="ignore", under="ignore"):
        t = np.dtype(dtype).type(v)
    if not (np.isfinite(t) and t > 0):
        raise ValueError(f"{fn}: threshold {value!r} becomes {t} in {np.dtype(dtype)}; "
                         f"help: pick a threshold that {np.dtype(dtype)} can hold")
    return t


def threads(fn, n, nthreads):
    """Validate a per-call thread count and plan the threads for n elements."""
    if nthreads is not None and (isinstance(nthreads, bool) or
                                 not isinstance(nthreads, numbers.Integral) or nthreads < 1):
        raise ValueError(f"{fn}: nthreads must be an integer >= 1 or None, got {nthreads!r}")
    return threads_for(n, None if nthreads is None else int(nthreads))


def sum_into(out, arrays, nthreads):
    """Check sum_into's arguments; return (arrays as a tuple, threads)."""
    fn = "sum_into"
    array(fn, "out", out, writable=True)
    if not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{fn}: arrays must be a list or tuple of numpy arrays, "
                        f"got {type(arrays).__name__}")
    if not arrays:
        raise ValueError(f"{fn}: arrays is empty; help: pass at least one array")
    for j, a in enumerate(arrays):
        name = f"arrays[{j}]"
        array(fn, name, a)
        like(fn, name, a, "out", out)
        apart(fn, "out", out, name, a, allow_same=True)
    return tuple(arrays), threads(fn, out.size, nthreads)


def scale_add(out, a, alpha, beta, nthreads):
    """Check scale_add's arguments; return (alpha, beta, threads)."""
    fn = "scale_add"
    array(fn, "out", out, writable=True)
    array(fn, "a", a)
    like(fn, "a", a, "out", out)
    apart(fn, "out", out, "a", a, allow_same=True)
    return real(fn, "alpha", alpha), real(fn, "beta", beta), threads(fn, out.size, nthreads)


def compute_dtype(grad_dtype):
    """The dtype the 2-bit rule and the residual use for a grad dtype (float16 -> float32)."""
    return np.dtype(np.float32) if grad_dtype == np.float16 else np.dtype(grad_dtype)


def quantize_2bit(grad, residual, value, out, nthreads):
    """Check quantize_2bit's arguments; return (threshold, out, threads), allocating out."""
    fn = "quantize_2bit"
    array(fn, "grad", grad)
    array(fn, "residual", residual, writable=True)
    like(fn, "residual", residual, f"grad ({grad.dtype})", grad,
         dtype=compute_dtype(grad.dtype))
    apart(fn, "residual", residual, "grad", grad)
    t = threshold(fn, value, compute_dtype(grad.dtype))
    words = words_for(grad.size)
    if out is None:
        out = np.empty(words, WORD)
    else:
        array(fn, "out", out, writable=True, dtypes=(WORD,))
        if out.shape != (words,):
            raise ShapeError(f"{fn}: out has shape {out.shape} but grad's {grad.size} values "
                             f"need shape ({words},) ({VALUES_PER_WORD} values per uint32 word)")
        apart(fn, "out", out, "grad", grad)
        apart(fn, "out", out, "residual", residual)
    return t, out, threads(fn, grad.size, nthreads)


def dequantize_2bit(fn, packed, value, out, nthreads):
    """Check (de)quantize arguments; return (lut, threads): lut[code] is the code's value."""
    array(fn, "packed", packed, dtypes=(WORD,))
    array(fn, "out", out, writable=True)
    words = words_for(out.size)
    if packed.shape != (words,):
        raise ShapeError(f"{fn}: packed has shape {packed.shape} but out's {out.size} values "
                         f"(shape {out.shape}) need shape ({words},) "
                         f"({VALUES_PER_WORD} values per uint32 word)")
    apart(fn, "out", out, "packed", packed)
    t = threshold(fn, value, out.dtype)
    lut = np.array([0, 0, -t, t], dtype=out.dtype)
    return lut, threads(fn, out.size, nthreads)


def convert(fn, src, out, src_dtype, out_dtype, nthreads):
    """Check a dtype conversion's arguments; return threads."""
    array(fn, "src", src, dtypes=(np.dtype(src_dtype),))
    array(fn, "out", out, writable=True, dtypes=(np.dtype(out_dtype),))
    if out.shape != src.shape:
        raise ShapeError(f"{fn}: out has shape {out.shape} but src has shape {src.shape}")
    apart(fn, "out", out, "src", src)
    return threads(fn, src.size, nthreads)


# ---- layer kernels (convolution columns, pooling, batch norm, relu) ----------------------
LAYER_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
INDEX = np.dtype(np.int32)
# below this many elements of work a layer kernel runs on one thread: starting a thread
# costs about as much as copying this many elements
LAYER_MIN_WORK = 1 << 15


def layer_threads(fn, work, nthreads):
    """Threads for a layer kernel: `nthreads` as given, else `compute_threads()` (the free
    cores, at most OMP_NUM_THREADS where set) for big work."""
    if nthreads is not None:
        if isinstance(nthreads, bool) or not isinstance(nthreads, numbers.Integral) or \
                nthreads < 1:
            raise ValueError(f"{fn}: nthreads must be an integer >= 1 or None, got {nthreads!r}")
        return int(nthreads)
    free = compute_threads()     # asked on every call: it also keeps BLAS to the count
    return 1 if work < LAYER_MIN_WORK else free


def _pair(fn, name, value, minimum):
    """A pair of ints >= minimum from an int or a 2-sequence."""
    # the operators pass tuples of two plain ints: checked without the numbers ABC, whose
    # isinstance was most of the 28 window checks a LeNet step makes
    if type(value) is tuple and len(value) == 2 and type(value[0]) is int and \
            type(value[1]) is int and value[0] >= minimum and value[1] >= minimum:
        return value
    pair = (value, value) if isinstance(value, numbers.Integral) else tuple(value)
    if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or
                             v < minimum for v in pair):
        raise ValueError(f"{fn}: {name} must be an int >= {minimum} or a pair of them, "
                         f"got {value!r}")
    return tuple(int(v) for v in pair)


def window2d(fn, kernel, stride, pad, dilate=(1, 1)):
    """The 8 window numbers (kh, kw, sh, sw, ph, pw, dh, dw), validated."""
    return (_pair(fn, "kernel", kernel, 1) + _pair(fn, "stride", stride, 1) +
            _pair(fn, "pad", pad, 0) + _pair(fn, "dilate", dilate, 1))


def conv_out_size(fn, size, win):
    """Output (oh, ow) of a convolution window over spatial `size`; ShapeError if none."""
    kh, kw, sh, sw, ph, pw, dh, dw = win
    out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                for n, k, s, p, d in zip(size, (kh, kw), (sh, sw), (ph, pw), (dh, dw)))
    if min(out) < 1:
        raise ShapeError(f"{fn}: kernel ({kh}, {kw}) with dilate ({dh}, {dw}) does not fit "
                         f"an image of spatial shape {tuple(size)} padded by ({ph}, {pw})")
    return out


def _shape4(fn, shape):
    """An (N, C, H, W) shape: N, C >= 0, H, W >= 1."""
    shape = tuple(int(v) for v in shape)
    if len(shape) != 4 or min(shape) < 0 or min(shape[2:]) < 1:
        raise ShapeError(f"{fn}: shape must be an image's (N, C, H, W) with H, W >= 1, "
                         f"got {shape}")
    return shape


def image(fn, name, x, writable=False):
    """A C-contiguous (N, C, H, W) float32/float64 array."""
    array(fn, name, x, writable, LAYER_FLOATS)
    if x.ndim != 4:
        raise ShapeError(f"{fn}: {name} must be (N, C, H, W), got shape {x.shape}")
    return x


def output(fn, out, shape, dtype, inputs, name="out"):
    """out, or a new array: checked for shape, dtype, writability and sharing no input."""
    if out is None:
        return np.empty(shape, dtype)
    array(fn, name, out, writable=True, dtypes=(np.dtype(dtype),))
    if out.shape != tuple(shape):
        raise ShapeError(f"{fn}: {name} has shape {out.shape}, expected {tuple(shape)}")
    for in_name, x in inputs:
        apart(fn, name, out, in_name, x)
    return out


def im2col(x, kernel, stride, pad, dilate, out, nthreads):
    """Check im2col's arguments; return (window, out, threads)."""
    fn = "im2col"
    image(fn, "x", x)
    win = window2d(fn, kernel, stride, pad, dilate)
    oh, ow = conv_out_size(fn, x.shape[2:], win)
    n, c = x.shape[:2]
    out = output(fn, out, (c * win[0] * win[1], n * oh * ow), x.dtype, [("x", x)])
    return win, out, layer_threads(fn, out.size, nthreads)


def col2im(cols, shape, kernel, stride, pad, dilate, out, nthreads):
    """Check col2im's arguments; return (window, out, threads)."""
    fn = "col2im"
    array(fn, "cols", cols, dtypes=LAYER_FLOATS)
    shape = _shape4(fn, shape)
    win = window2d(fn, kernel, stride, pad, dilate)
    oh, ow = conv_out_size(fn, shape[2:], win)
    want = (shape[1] * win[0] * win[1], shape[0] * oh * ow)
    if cols.shape != want:
        raise ShapeError(f"{fn}: cols has shape {cols.shape} but image {shape} with kernel "
                         f"{win[:2]} needs {want}")
    out = output(fn, out, shape, cols.dtype, [("cols", cols)])
    return win, out, layer_threads(fn, cols.size, nthreads)


def swap01(src, bias, out, nthreads):
    """Check swap01's arguments; return (out, threads)."""
    fn = "swap01"
    array(fn, "src", src, dtypes=LAYER_FLOATS)
    if src.ndim != 3:
        raise ShapeError(f"{fn}: src must have 3 axes (A, B, R), got shape {src.shape}")
    if bias is not None:
        array(fn, "bias", bias, dtypes=LAYER_FLOATS)
        like(fn, "bias", bias, "src's axis 0", np.empty(src.shape[:1], src.dtype))
    a, b, r = src.shape
    out = output(fn, out, (b, a, r), src.dtype, [("src", src)] +
                 ([("bias", bias)] if bias is not None else []))
    return out, layer_threads(fn, src.size, nthreads)


def pool_out_size(fn, size, win, convention="valid"):
    """Output (oh, ow) of max pooling: floor (valid) or ceil (full) of the window count."""
    if convention not in ("valid", "full"):
        raise ValueError(f"{fn}: convention must be 'valid' or 'full', got {convention!r}")
    kh, kw, sh, sw, ph, pw = win[:6]
    if any(k > n + 2 * p for k, n, p in zip((kh, kw), size, (ph, pw))):
        raise ShapeError(f"{fn}: kernel ({kh}, {kw}) does not fit an image of spatial shape "
                         f"{tuple(size)} padded by ({ph}, {pw})")
    up = convention == "full"
    return tuple(-(-(n + 2 * p - k) // s) + 1 if up else (n + 2 * p - k) // s + 1
                 for n, k, s, p in zip(size, (kh, kw), (sh, sw), (ph, pw)))


def max_pool2d(x, kernel, stride, pad, convention, nthreads):
    """Check max_pool2d's arguments; return (window, out, argmax, threads)."""
    fn = "max_pool2d"
    image(fn, "x", x)
    win = window2d(fn, kernel, stride, pad)
    if x.shape[2] * x.shape[3] > np.iinfo(INDEX).max:
        raise ShapeError(f"{fn}: feature maps of {x.shape[2] * x.shape[3]} elements do not "
                         "fit int32 argmax positions")
    oh, ow = pool_out_size(fn, x.shape[2:], win, convention)
    shape = x.shape[:2] + (oh, ow)
    return win, np.empty(shape, x.dtype), np.empty(shape, INDEX), \
        layer_threads(fn, x.size, nthreads)


def max_pool2d_backward(dy, argmax, size, out, nthreads):
    """Check max_pool2d_backward's arguments; return (out, threads)."""
    fn = "max_pool2d_backward"
    image(fn, "dy", dy)
    array(fn, "argmax", argmax, dtypes=(INDEX,))
    if argmax.shape != dy.shape:
        raise ShapeError(f"{fn}: argmax has shape {argmax.shape} but dy has {dy.shape}")
    h, w = (int(v) for v in size)
    if argmax.size and (argmax.min() < -1 or argmax.max() >= h * w):
        raise ValueError(f"{fn}: argmax holds positions outside [-1, {h * w}) for input "
                         f"maps of {h}x{w}; help: pass the argmax max_pool2d returned")
    out = output(fn, out, dy.shape[:2] + (h, w), dy.dtype, [("dy", dy), ("argmax", argmax)])
    return out, layer_threads(fn, out.size, nthreads)


def channels(fn, x):
    """A C-contiguous (outer, C, inner) float32/float64 array."""
    array(fn, "x", x, dtypes=LAYER_FLOATS)
    if x.ndim != 3:
        raise ShapeError(f"{fn}: x must be (outer, C, inner), got shape {x.shape}; help: "
                         "reshape to (prod(shape[:axis]), C, prod(shape[axis+1:]))")
    return x


def per_channel(fn, x, named):
    """Check that each (name, vector) is a contiguous (C,) array of x's dtype."""
    for name, v in named:
        array(fn, name, v, dtypes=LAYER_FLOATS)
        like(fn, name, v, "x's channels", np.empty(x.shape[1:2], x.dtype))


def batch_norm_stats(x, nthreads):
    """Check batch_norm_stats's arguments; return threads."""
    fn = "batch_norm_stats"
    channels(fn, x)
    return layer_threads(fn, x.size, nthreads)


def batch_norm_forward(x, mean, scale, shift, out, nthreads):
    """Check batch_norm_forward's arguments; return (out, threads)."""
    fn = "batch_norm_forward"
    channels(fn, x)
    per_channel(fn, x, (("mean", mean), ("scale", scale), ("shift", shift)))
    out = output(fn, out, x.shape, x.dtype, [("x", x)])
    return out, layer_threads(fn, x.size, nthreads)


def batch_norm_sums(x, dy, mean, nthreads):
    """Check batch_norm_sums's arguments; return threads."""
    fn = "batch_norm_sums"
    channels(fn, x)
    array(fn, "dy", dy, dtypes=LAYER_FLOATS)
    like(fn, "dy", dy, "x", x)
    per_channel(fn, x, (("mean", mean),))
    return layer_threads(fn, x.size, nthreads)


def batch_norm_backward(x, dy, mean, a, b, k, out, nthreads):
    """Check batch_norm_backward's arguments; return (out, threads)."""
    fn = "batch_norm_backward"
    channels(fn, x)
    array(fn, "dy", dy, dtypes=LAYER_FLOATS)
    like(fn, "dy", dy, "x", x)
    per_channel(fn, x, (("mean", mean), ("a", a), ("b", b), ("k", k)))
    out = output(fn, out, x.shape, x.dtype, [("x", x), ("dy", dy)])
    return out, layer_threads(fn, x.size, nthreads)


ACT_NONE, ACT_RELU, ACT_CLIP = 0, 1, 2     # activation.h's mg_act


def activation(fn, act):
    """(code, lo, hi) of the activation after a batch norm: None, "relu", or (lo, hi) for
    clip(y, lo, hi) (ReLU6 is (0, 6))."""
    if act is None:
        return ACT_NONE, 0.0, 0.0
    if isinstance(act, str) and act == "relu":
        return ACT_RELU, 0.0, 0.0
    if isinstance(act, tuple) and len(act) == 2 and all(
            isinstance(v, numbers.Real) and not isinstance(v, bool) for v in act):
        lo, hi = float(act[0]), float(act[1])
        if not lo <= hi:
            raise ValueError(f"{fn}: clip bounds must satisfy lo <= hi, got act={act!r}")
        return ACT_CLIP, lo, hi
    raise ValueError(f"{fn}: act must be None, 'relu' or a (lo, hi) pair of numbers for "
                     f"clip, got {act!r}; help: act=(0, 6) is ReLU6")


def bn_params(fn, x, params, name="params"):
    """Check a (4, C) params array of x's dtype: rows mean, scale, shift, inv_std."""
    array(fn, name, params, dtypes=LAYER_FLOATS)
    like(fn, name, params, "x's channels", np.empty((4, x.shape[1]), x.dtype))


def batch_norm_train(x, gamma, beta, eps, act, out, nthreads):
    """Check batch_norm_train's arguments; return (act code, lo, hi, eps, out, threads)."""
    fn = "batch_norm_train"
    channels(fn, x)
    per_channel(fn, x, (("beta", beta),) + ((("gamma", gamma),) if gamma is not None else ()))
    eps = real(fn, "eps", eps)
    if not eps >= 0:
        raise ValueError(f"{fn}: eps must be >= 0, got {eps}; help: BatchNorm's default is 1e-3")
    code, lo, hi = activation(fn, act)
    out = output(fn, out, x.shape, x.dtype, [("x", x)])
    return code, lo, hi, eps, out, layer_threads(fn, x.size, nthreads)


def batch_norm_apply(x, params, act, out, nthreads):
    """Check batch_norm_apply's arguments; return (act code, lo, hi, out, threads)."""
    fn = "batch_norm_apply"
    channels(fn, x)
    bn_params(fn, x, params)
    code, lo, hi = activation(fn, act)
    out = output(fn, out, x.shape, x.dtype, [("x", x)])
    return code, lo, hi, out, layer_threads(fn, x.size, nthreads)


def batch_norm_grad(x, dy, params, act, out, nthreads):
    """Check batch_norm_grad's arguments; return (act code, lo, hi, out, threads)."""
    fn = "batch_norm_grad"
    channels(fn, x)
    array(fn, "dy", dy, dtypes=LAYER_FLOATS)
    like(fn, "dy", dy, "x", x)
    bn_params(fn, x, params)
    code, lo, hi = activation(fn, act)
    out = output(fn, out, x.shape, x.dtype, [("x", x), ("dy", dy)])
    return code, lo, hi, out, layer_threads(fn, x.size, nthreads)


def relu(fn, x, dy, out, nthreads):
    """Check relu / relu_backward arguments; return (out, threads)."""
    array(fn, "x", x, dtypes=LAYER_FLOATS)
    inputs = [("x", x)]
    if dy is not None:
        array(fn, "dy", dy, dtypes=LAYER_FLOATS)
        like(fn, "dy", dy, "x", x)
        inputs.append(("dy", dy))
    out = output(fn, out, x.shape, x.dtype, inputs)
    return out, layer_threads(fn, x.size, nthreads)


def sgd_update(weight, grad, mom, lr, wd, momentum, rescale_grad, clip_gradient, nthreads):
    """Check sgd_update's arguments; return (the five numbers as floats, threads)."""
    fn = "sgd_update"
    array(fn, "weight", weight, writable=True, dtypes=LAYER_FLOATS)
    array(fn, "grad", grad, dtypes=LAYER_FLOATS)
    like(fn, "grad", grad, "weight", weight)
    apart(fn, "grad", grad, "weight", weight)
    if mom is not None:
        momentum_state(fn, mom, weight, grad)
    numbers_ = []
    for name, value in (("lr", lr), ("wd", wd), ("momentum", momentum),
                        ("rescale_grad", rescale_grad)):
        # plain floats (what the optimizers pass) skip the numbers-ABC isinstance
        if type(value) is not float and (isinstance(value, bool) or
                                         not isinstance(value, numbers.Real)):
            raise TypeError(f"{fn}: {name} must be a real number, got {value!r}")
        numbers_.append(float(value))
    clip = 0.0 if clip_gradient is None else float(clip_gradient)
    return (*numbers_, clip), layer_threads(fn, weight.size, nthreads)


WINOGRAD_TILES = (2, 4)


def winograd_tiles(oh, ow, tile=2):
    """(th, tw): the tile x tile output tiles of Winograd F(tile, 3x3) over oh x ow."""
    return -(-oh // tile), -(-ow // tile)


def _winograd_tile(fn, tile):
    if isinstance(tile, bool) or tile not in WINOGRAD_TILES:
        raise ValueError(f"{fn}: tile must be 2 or 4 (F(2x2, 3x3) or F(4x4, 3x3)), "
                         f"got {tile!r}")
    return int(tile)


def _winograd_image(fn, x, pad):
    """(pad pair, output size) of a 3x3 stride-1 convolution over image x."""
    ph, pw = _pair(fn, "pad", pad, 0)
    oh, ow = x.shape[2] + 2 * ph - 2, x.shape[3] + 2 * pw - 2
    if min(oh, ow) < 1:
        raise ShapeError(f"{fn}: a 3x3 kernel does not fit an image of spatial shape "
                         f"{x.shape[2:]} padded by ({ph}, {pw})")
    return (ph, pw), (oh, ow)


def _winograd_shape(c, n, size, tile):
    """The planes' shape ((tile+2)^2, c, n*th*tw) for an output of `size`."""
    th, tw = winograd_tiles(*size, tile)
    return ((tile + 2) ** 2, c, n * th * tw)


def _winograd_planes(fn, name, planes, c, n, size, tile):
    """Check that `planes` holds the transforms of n samples' c channels, output `size`."""
    array(fn, name, planes, dtypes=LAYER_FLOATS)
    want = _winograd_shape(c, n, size, tile)
    if planes.shape != want:
        raise ShapeError(f"{fn}: {name} has shape {planes.shape} but {n} sample(s) with {c} "
                         f"channels, a {size[0]}x{size[1]} output and tile {tile} need {want}")


def winograd_input(x, pad, tile, out, nthreads):
    """Check winograd_input's arguments; return (pad, tile, out, threads)."""
    fn = "winograd_input"
    image(fn, "x", x)
    tile = _winograd_tile(fn, tile)
    pad, size = _winograd_image(fn, x, pad)
    out = output(fn, out, _winograd_shape(x.shape[1], x.shape[0], size, tile), x.dtype,
                 [("x", x)])
    return pad, tile, out, layer_threads(fn, out.size, nthreads)


def winograd_output(m, shape, bias, tile, out, nthreads):
    """Check winograd_output's arguments; return (tile, out, threads)."""
    fn = "winograd_output"
    tile = _winograd_tile(fn, tile)
    n, f, oh, ow = _shape4(fn, shape)
    _winograd_planes(fn, "m", m, f, n, (oh, ow), tile)
    inputs = [("m", m)]
    if bias is not None:
        array(fn, "bias", bias, dtypes=LAYER_FLOATS)
        like(fn, "bias", bias, "the output's channels", np.empty(f, m.dtype))
        inputs.append(("bias", bias))
    out = output(fn, out, (n, f, oh, ow), m.dtype, inputs)
    return tile, out, layer_threads(fn, m.size, nthreads)


def winograd_output_adjoint(dy, tile, out, nthreads):
    """Check winograd_output_adjoint's arguments; return (tile, out, threads)."""
    fn = "winograd_output_adjoint"
    image(fn, "dy", dy)
    tile = _winograd_tile(fn, tile)
    out = output(fn, out, _winograd_shape(dy.shape[1], dy.shape[0], dy.shape[2:], tile),
                 dy.dtype, [("dy", dy)])
    return tile, out, layer_threads(fn, out.size, nthreads)


def winograd_input_adjoint(dv, shape, pad, tile, out, nthreads):
    """Check winograd_input_adjoint's arguments; return (pad, tile, out, threads)."""
    fn = "winograd_input_adjoint"
    tile = _winograd_tile(fn, tile)
    shape = _shape4(fn, shape)
    pad, size = _winograd_image(fn, np.empty((0, 0) + shape[2:]), pad)
    _winograd_planes(fn, "dv", dv, shape[1], shape[0], size, tile)
    out = output(fn, out, shape, dv.dtype, [("dv", dv)])
    return pad, tile, out, layer_threads(fn, dv.size, nthreads)


# ---- row kernels (a kvstore server's row_sparse keys) -------------------------------------
ROW_ID = np.dtype(np.int64)


def row_ids(fn, name, ids, rows=None, increasing=True):
    """Check an int64 vector of row ids: strictly increasing if asked, inside [0, rows) when
    `rows` is given. The message names the first bad position."""
    if not isinstance(ids, np.ndarray) or ids.dtype != ROW_ID or ids.ndim != 1:
        got = f"dtype {ids.dtype}, shape {ids.shape}" if isinstance(ids, np.ndarray) else \
            type(ids).__name__
        raise DTypeError(f"{fn}: {name} must be a 1-D int64 numpy array of row ids, got "
                         f"{got}; help: np.asarray(ids, dtype=np.int64).reshape(-1)")
    array(fn, name, ids, dtypes=(ROW_ID,))
    if increasing and ids.size > 1 and not bool((ids[1:] > ids[:-1]).all()):
        i = int(np.flatnonzero(ids[1:] <= ids[:-1])[0]) + 1
        raise ValueError(f"{fn}: {name} must be sorted and unique, but {name}[{i}] = "
                         f"{int(ids[i])} follows {int(ids[i - 1])}; help: pass "
                         f"np.unique({name})")
    if rows is not None and ids.size:
        low, high = (ids[0], ids[-1]) if increasing else (ids.min(), ids.max())
        if low < 0 or high >= rows:
            i = int(np.flatnonzero((ids < 0) | (ids >= rows))[0])
            raise ValueError(f"{fn}: {name}[{i}] = {int(ids[i])} is outside the table's "
                             f"{rows} rows; row ids must be in [0, {rows})")
    return ids


def table(fn, name, x, dtypes=FLOATS, writable=False):
    """Check a table of rows (at least 1-D, rows along axis 0); return its row length."""
    array(fn, name, x, writable=writable, dtypes=dtypes)
    if x.ndim < 1 or x.shape[0] < 1:
        raise ShapeError(f"{fn}: {name} must be a table of at least one row (rows along "
                         f"axis 0), got shape {x.shape}")
    return x.size // x.shape[0]


def rows_of(fn, name, x, count, row_shape, dtype):
    """Check that x holds `count` rows of `row_shape` and `dtype`."""
    array(fn, name, x, dtypes=(np.dtype(dtype),))
    if x.shape != (count,) + tuple(row_shape):
        raise ShapeError(f"{fn}: {name} has shape {x.shape}, expected {(count,) + tuple(row_shape)}"
                         f" (one row per id)")


def room(fn, name, x, dtype, size):
    """Check a writable scratch array of `dtype` with at least `size` items (or None)."""
    if x is None:
        return np.empty(size, dtype)
    array(fn, name, x, writable=True, dtypes=(np.dtype(dtype),))
    if x.size < size:
        raise ShapeError(f"{fn}: {name} holds {x.size} items, needs at least {size}; help: "
                         "pass a bigger buffer, or none")
    return x.reshape(-1)


def rows_sum(ids, values, out_ids, out):
    """Check rows_sum's arguments; return (ids, values, row shape, out_ids, flat out)."""
    fn = "rows_sum"
    ids, values = list(ids), list(values)
    if not ids or len(ids) != len(values):
        raise ValueError(f"{fn}: give one values array per ids array (at least one), got "
                         f"{len(ids)} ids and {len(values)} values arrays")
    if not isinstance(values[0], np.ndarray) or values[0].dtype.kind not in "biuf":
        got = getattr(values[0], "dtype", type(values[0]).__name__)
        raise DTypeError(f"{fn}: values[0] must be a numpy array of numbers, got {got}")
    row_shape = values[0].shape[1:]
    for p, (i, v) in enumerate(zip(ids, values)):
        row_ids(fn, f"ids[{p}]", i)
        rows_of(fn, f"values[{p}]", v, i.size, row_shape, values[0].dtype)
    width = math.prod(row_shape)
    if width < 1:
        raise ShapeError(f"{fn}: rows must hold at least one value, got row shape {row_shape}")
    total = sum(i.size for i in ids)
    return (ids, values, row_shape, room(fn, "out_ids", out_ids, ROW_ID, total),
            room(fn, "out", out, values[0].dtype, total * width))


def rows_add_at(table_, ids, values):
    """Check rows_add_at's arguments."""
    fn = "rows_add_at"
    if not isinstance(table_, np.ndarray):
        raise TypeError(f"{fn}: table must be a numpy.ndarray, got {type(table_).__name__}")
    table(fn, "table", table_, writable=True)
    row_ids(fn, "ids", ids, rows=table_.shape[0], increasing=False)
    rows_of(fn, "values", values, ids.size, table_.shape[1:], table_.dtype)


def rows_take(table_, ids, out):
    """Check rows_take's arguments; return out (made when None)."""
    fn = "rows_take"
    if not isinstance(table_, np.ndarray):
        raise TypeError(f"{fn}: table must be a numpy.ndarray, got {type(table_).__name__}")
    table(fn, "table", table_, dtypes=(table_.dtype,))
    row_ids(fn, "ids", ids, rows=table_.shape[0], increasing=False)
    shape = (ids.size,) + table_.shape[1:]
    if out is None:
        return np.empty(shape, table_.dtype)
    array(fn, "out", out, writable=True, dtypes=(table_.dtype,))
    if out.shape != shape:
        raise ShapeError(f"{fn}: out has shape {out.shape}, expected {shape}")
    apart(fn, "out", out, "table", table_)
    return out


def rows_sgd_update(weight, ids, grad, mom, lr, wd, momentum, rescale_grad, clip_gradient):
    """Check rows_sgd_update's arguments; return the five numbers as floats."""
    fn = "rows_sgd_update"
    table(fn, "weight", weight, dtypes=LAYER_FLOATS, writable=True)
    row_ids(fn, "ids", ids, rows=weight.shape[0])
    rows_of(fn, "grad", grad, ids.size, weight.shape[1:], weight.dtype)
    apart(fn, "grad", grad, "weight", weight)
    if mom is not None:
        momentum_state(fn, mom, weight, grad)
    numbers_ = [real(fn, name, value) for name, value in
                (("lr", lr), ("wd", wd), ("momentum", momentum), ("rescale_grad", rescale_grad))]
    clip = 0.0 if clip_gradient is None else real(fn, "clip_gradient", clip_gradient)
    return (*numbers_, clip)


def rows_adam_update(weight, ids, grad, mean, var, numbers_):
    """Check rows_adam_update's arguments; return its numbers (a dict) as floats, clip 0
    when off."""
    fn = "rows_adam_update"
    table(fn, "weight", weight, dtypes=LAYER_FLOATS, writable=True)
    row_ids(fn, "ids", ids, rows=weight.shape[0])
    rows_of(fn, "grad", grad, ids.size, weight.shape[1:], weight.dtype)
    apart(fn, "grad", grad, "weight", weight)
    for name, state in (("mean", mean), ("var", var)):
        array(fn, name, state, writable=True, dtypes=LAYER_FLOATS)
        like(fn, name, state, "weight", weight)
        for other_name, other in (("weight", weight), ("grad", grad)):
            apart(fn, name, state, other_name, other)
    apart(fn, "var", var, "mean", mean)
    clip = numbers_.pop("clip_gradient")
    out = {name: real(fn, name, value) for name, value in numbers_.items()}
    out["clip_gradient"] = 0.0 if clip is None else real(fn, "clip_gradient", clip)
    return out


# the C kernel keeps a window's tap offsets and weight-gradient sums on the stack
DEPTHWISE_MAX_SIDE = 32


# The blocked kernels (depthwise_blocks.c: eight planes at a time, one vector lane each)
# take windows of at most this many taps (their per-tap vectors live on the stack). At
# batch 16 on one thread (benchmarks/conv_depthwise.py --kernels, docs/performance.md,
# load 12-21) they ran the filter gradient in 0.23-0.8x the plane kernels' CPU on every
# MobileNet-v2 layer (1.0-1.04x at 112x112 stride 1), so it always takes them. The forward
# and the data gradient take them on planes of at most DEPTHWISE_BLOCK_MAX_PLANE values
# (14x14 and 7x7: 0.46-0.66x); on 28x28 a 3x3 window was 0.7-1.3x (the plane kernels' 3x3
# rows fill whole vectors there, and at 56x56 and up win by 1.2-1.7x), other windows
# 0.2-0.65x, so those take them up to DEPTHWISE_BLOCK_OTHER_MAX_PLANE.
DEPTHWISE_BLOCK_MAX_TAPS = 49
DEPTHWISE_BLOCK_MAX_PLANE = 14 * 14
DEPTHWISE_BLOCK_OTHER_MAX_PLANE = 28 * 28
DEPTHWISE_KINDS = ("forward", "data", "weight")


def depthwise_blocked(fn, blocked, kernel, size, kind):
    """Whether the depthwise `kind` ('forward', 'data' or 'weight') runs eight planes at a
    time: `blocked` as given, or for None by the kernel and the image's plane size (H, W)."""
    taps = kernel[0] * kernel[1]
    if blocked is None:
        if kind not in DEPTHWISE_KINDS:
            raise ValueError(f"{fn}: kind must be one of {DEPTHWISE_KINDS}, got {kind!r}")
        limit = DEPTHWISE_BLOCK_MAX_PLANE if tuple(kernel) == (3, 3) else \
            DEPTHWISE_BLOCK_OTHER_MAX_PLANE
        return taps <= DEPTHWISE_BLOCK_MAX_TAPS and \
            (kind == "weight" or size[0] * size[1] <= limit)
    if not isinstance(blocked, (bool, np.bool_)):
        raise ValueError(f"{fn}: blocked must be True, False or None (chosen by size), got "
                         f"{blocked!r}")
    if blocked and taps > DEPTHWISE_BLOCK_MAX_TAPS:
        raise ShapeError(f"{fn}: blocked=True takes kernels of at most "
                         f"{DEPTHWISE_BLOCK_MAX_TAPS} taps, got {tuple(kernel)}; help: pass "
                         "blocked=None or False")
    return bool(blocked)


def _depthwise_window(fn, kernel, stride, pad, dilate):
    win = window2d(fn, kernel, stride, pad, dilate)
    if max(win[:2]) > DEPTHWISE_MAX_SIDE:
        raise ShapeError(f"{fn}: kernel {win[:2]} has a side over {DEPTHWISE_MAX_SIDE}; help: "
                         "run such a convolution with im2col (nd.Convolution does)")
    return win


def _depthwise_filters(fn, name, w, channels, dtype, kernel=None):
    """w (c*m, 1, kh, kw) of `dtype` for `channels` input channels."""
    array(fn, name, w, dtypes=(np.dtype(dtype),))
    if w.ndim != 4 or w.shape[1] != 1 or w.shape[0] < 1 or w.shape[0] % max(channels, 1) or \
            (kernel is not None and w.shape[2:] != tuple(kernel)):
        want = f"(c*m, 1, {kernel[0]}, {kernel[1]})" if kernel else "(c*m, 1, kh, kw)"
        raise ShapeError(f"{fn}: {name} has shape {w.shape} but the data's {channels} channels "
                         f"need {want}, m filters per channel")
    return w


def _depthwise_image(fn, name, x):
    image(fn, name, x)
    if x.shape[1] < 1:
        raise ShapeError(f"{fn}: {name} has no channels (shape {x.shape})")
    return x


def depthwise_forward(x, w, bias, stride, pad, dilate, out, nthreads):
    """Check depthwise_forward's arguments; return (window, out, threads)."""
    fn = "depthwise_forward"
    _depthwise_image(fn, "x", x)
    _depthwise_filters(fn, "w", w, x.shape[1], x.dtype)
    win = _depthwise_window(fn, w.shape[2:], stride, pad, dilate)
    inputs = [("x", x), ("w", w)]
    if bias is not None:
        array(fn, "bias", bias, dtypes=(x.dtype,))
        like(fn, "bias", bias, "w's filters", np.empty(w.shape[:1], x.dtype))
        inputs.append(("bias", bias))
    shape = (x.shape[0], w.shape[0]) + conv_out_size(fn, x.shape[2:], win)
    out = output(fn, out, shape, x.dtype, inputs)
    return win, out, layer_threads(fn, out.size * w.shape[2] * w.shape[3], nthreads)


def _depthwise_dy(fn, dy, shape, w, win):
    """dy (n, c*m, oh, ow) for an image of `shape` and filters w."""
    want = (shape[0], w.shape[0]) + conv_out_size(fn, shape[2:], win)
    if dy.shape != want:
        raise ShapeError(f"{fn}: dy has shape {dy.shape} but image {shape} with filters "
                         f"{w.shape} and stride {win[2:4]}, pad {win[4:6]} needs {want}")


def depthwise_backward_data(dy, w, shape, stride, pad, dilate, out, nthreads):
    """Check depthwise_backward_data's arguments; return (window, out, threads)."""
    fn = "depthwise_backward_data"
    image(fn, "dy", dy)
    shape = _shape4(fn, shape)
    if shape[1] < 1:
        raise ShapeError(f"{fn}: shape {shape} has no channels")
    _depthwise_filters(fn, "w", w, shape[1], dy.dtype)
    win = _depthwise_window(fn, w.shape[2:], stride, pad, dilate)
    _depthwise_dy(fn, dy, shape, w, win)
    out = output(fn, out, shape, dy.dtype, [("dy", dy), ("w", w)])
    return win, out, layer_threads(fn, dy.size * w.shape[2] * w.shape[3], nthreads)


def depthwise_backward_weight(x, dy, kernel, stride, pad, dilate, out, nthreads):
    """Check depthwise_backward_weight's arguments; return (window, out, threads)."""
    fn = "depthwise_backward_weight"
    _depthwise_image(fn, "x", x)
    image(fn, "dy", dy)
    if dy.dtype != x.dtype:
        raise DTypeError(f"{fn}: dy has dtype {dy.dtype} but x has {x.dtype}; help: cast "
                         f"with .astype(np.{x.dtype})")
    win = _depthwise_window(fn, kernel, stride, pad, dilate)
    filters = dy.shape[1]
    if filters < 1 or filters % x.shape[1]:
        raise ShapeError(f"{fn}: dy has {filters} channels, not a multiple of x's "
                         f"{x.shape[1]} (shapes {dy.shape}, {x.shape})")
    w_shape = (filters, 1) + win[:2]
    _depthwise_dy(fn, dy, x.shape, np.empty(w_shape, x.dtype), win)
    out = output(fn, out, w_shape, x.dtype, [("x", x), ("dy", dy)])
    return win, out, layer_threads(fn, dy.size * win[0] * win[1], nthreads)


def _lstm_rows(fn, name, a, c, width):
    """a: a C-contiguous (N, width*H) array of c's dtype, for the state c (N, H)."""
    array(fn, name, a, dtypes=(c.dtype,))
    want = (c.shape[0], width * c.shape[1])
    if a.shape != want:
        raise ShapeError(f"{fn}: {name} has shape {a.shape} but the state of shape "
                         f"{c.shape} needs {want}")


# An LSTM step's gates are small (32 x 1024 in the benchmark's language model): split over
# the pool, forward + backward took 0.30 ms instead of 0.19 ms on one thread (load 4).
# Only gates of at least this many elements are split over threads.
LSTM_MIN_PARALLEL = 1 << 20


def _lstm_threads(fn, gates, nthreads):
    if nthreads is None and gates < LSTM_MIN_PARALLEL:
        return 1
    return layer_threads(fn, gates, nthreads)


def lstm_cell_forward(i2h, h2h, c, nthreads):
    """Check lstm_cell_forward's arguments; return (out, act, threads)."""
    fn = "lstm_cell_forward"
    array(fn, "c", c, dtypes=LAYER_FLOATS)
    if c.ndim != 2:
        raise ShapeError(f"{fn}: c must be (N, H), got shape {c.shape}")
    _lstm_rows(fn, "i2h", i2h, c, 4)
    _lstm_rows(fn, "h2h", h2h, c, 4)
    out = np.empty((2,) + c.shape, c.dtype)
    return out, np.empty(i2h.shape, c.dtype), _lstm_threads(fn, i2h.size, nthreads)


def lstm_cell_backward(dout, act, c, out, nthreads):
    """Check lstm_cell_backward's arguments; return (da, dc, threads)."""
    fn = "lstm_cell_backward"
    array(fn, "c", c, dtypes=LAYER_FLOATS)
    if c.ndim != 2:
        raise ShapeError(f"{fn}: c must be (N, H), got shape {c.shape}")
    _lstm_rows(fn, "act", act, c, 4)
    for name, a in (("out", out), ("dout", dout)):
        array(fn, name, a, dtypes=(c.dtype,))
        if a.shape != (2,) + c.shape:
            raise ShapeError(f"{fn}: {name} has shape {a.shape} but c of shape {c.shape} "
                             f"needs {(2,) + c.shape} (h and c of the step)")
    return np.empty(act.shape, c.dtype), np.empty(c.shape, c.dtype), \
        _lstm_threads(fn, act.size, nthreads)


def _lstm_sequence(fn, gates, named, rows):
    """Shapes of an LSTM sequence's arrays against `gates` (T, N, 4H): `named` maps a name
    to (array, writable, shape in terms of T, N, H); return (lo, hi) checked."""
    array(fn, "gates", gates, dtypes=LAYER_FLOATS)
    if gates.ndim != 3 or gates.shape[0] < 1 or gates.shape[2] < 4 or gates.shape[2] % 4:
        raise ShapeError(f"{fn}: the gates must be (T, N, 4H) with T, H >= 1, got shape "
                         f"{gates.shape}")
    t, n, h = gates.shape[0], gates.shape[1], gates.shape[2] // 4
    for name, (a, writable, shape) in named.items():
        array(fn, name, a, writable=writable, dtypes=(gates.dtype,))
        want = tuple({"T": t, "T+1": t + 1, "N": n, "H": h, "4H": 4 * h}[d] for d in shape)
        if a.shape != want:
            raise ShapeError(f"{fn}: {name} has shape {a.shape}; gates of shape "
                             f"{gates.shape} (T, N, 4H) need {want}")
    lo, hi = rows
    if not 0 <= lo < hi <= n:
        raise ValueError(f"{fn}: rows ({lo}, {hi}) must be a non-empty range within the "
                         f"batch of {n}; help: pass 0 <= lo < hi <= {n}")
    return int(lo), int(hi)


def lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, rows):
    """Check lstm_sequence_forward's arguments; return (lo, hi)."""
    return _lstm_sequence("lstm_sequence_forward", px, {
        "wh": (wh, False, ("4H", "H")), "h0": (h0, False, ("N", "H")),
        "c0": (c0, False, ("N", "H")), "out": (out, True, ("T+1", "N", "H")),
        "act": (act, True, ("T", "N", "4H")), "cseq": (cseq, True, ("T", "N", "H"))}, rows)


def lstm_sequence_backward(act, wh, c0, cseq, dout, dpx, dh0, dc0, rows):
    """Check lstm_sequence_backward's arguments; return (lo, hi)."""
    return _lstm_sequence("lstm_sequence_backward", act, {
        "wh": (wh, False, ("4H", "H")), "c0": (c0, False, ("N", "H")),
        "cseq": (cseq, False, ("T", "N", "H")), "dout": (dout, False, ("T+1", "N", "H")),
        "dpx": (dpx, True, ("T", "N", "4H")), "dh0": (dh0, True, ("N", "H")),
        "dc0": (dc0, True, ("N", "H"))}, rows)


def gru_cell_forward(i2h, h2h, h, nthreads):
    """Check gru_cell_forward's arguments; return (out, act, threads)."""
    fn = "gru_cell_forward"
    _state(fn, "h", h)
    _lstm_rows(fn, "i2h", i2h, h, 3)
    _lstm_rows(fn, "h2h", h2h, h, 3)
    act = np.empty((h.shape[0], 4 * h.shape[1]), h.dtype)
    return np.empty(h.shape, h.dtype), act, _lstm_threads(fn, i2h.size, nthreads)


def gru_cell_backward(dout, act, h, nthreads):
    """Check gru_cell_backward's arguments; return (di2h, dh2h, dh, threads)."""
    fn = "gru_cell_backward"
    _state(fn, "h", h)
    _lstm_rows(fn, "act", act, h, 4)
    _lstm_rows(fn, "dout", dout, h, 1)
    gates = (h.shape[0], 3 * h.shape[1])
    return np.empty(gates, h.dtype), np.empty(gates, h.dtype), np.empty(h.shape, h.dtype), \
        _lstm_threads(fn, act.size, nthreads)


def _state(fn, name, h):
    array(fn, name, h, dtypes=LAYER_FLOATS)
    if h.ndim != 2:
        raise ShapeError(f"{fn}: {name} must be (N, H), got shape {h.shape}")


# ---- softmax along the last axis (softmax.c) -------------------------------------------
LABEL = np.dtype(np.int32)
MAX_WIDTH = 2 ** 31 - 1     # labels travel as int32


def _rows(fn, name, x):
    array(fn, name, x, dtypes=LAYER_FLOATS)
    if x.ndim != 2 or not 1 <= x.shape[1] <= MAX_WIDTH:
        raise ShapeError(f"{fn}: {name} must be (rows, width) with 1 <= width <= {MAX_WIDTH}, "
                         f"got shape {x.shape}; help: reshape to (-1, width) for a softmax "
                         "along the last axis")


def softmax_rows(fn, x, dy, out, nthreads, x_name="x"):
    """Check softmax_forward / softmax_backward arguments; return (out, threads)."""
    _rows(fn, x_name, x)
    inputs = [(x_name, x)]
    if dy is not None:
        array(fn, "dy", dy, dtypes=LAYER_FLOATS)
        like(fn, "dy", dy, x_name, x)
        inputs.append(("dy", dy))
    return output(fn, out, x.shape, x.dtype, inputs), layer_threads(fn, x.size, nthreads)


def class_labels(fn, label, x):
    """The labels as int32, one per row of x, each in [0, width)."""
    if not isinstance(label, np.ndarray) or label.dtype.kind not in "iu":
        what = label.dtype if isinstance(label, np.ndarray) else type(label).__name__
        raise DTypeError(f"{fn}: label must be a numpy integer array, got {what}; help: "
                         "cast class indices with .astype(np.int64)")
    if label.shape != (x.shape[0],):
        raise ShapeError(f"{fn}: label has shape {label.shape} but x of shape {x.shape} "
                         f"needs one class index per row: ({x.shape[0]},)")
    if label.size:
        low, high = int(label.min()), int(label.max())
        if low < 0 or high >= x.shape[1]:
            bad = low if low < 0 else high
            row = int(np.flatnonzero(label == bad)[0])
            raise ValueError(f"{fn}: label[{row}] = {bad} is outside the {x.shape[1]} classes "
                             f"[0, {x.shape[1]}); help: clip the labels to the classes (as "
                             "pick's mode='clip' does) or fix the data")
    return np.ascontiguousarray(label, dtype=LABEL)


def softmax_cross_entropy_forward(x, label, nthreads):
    """Check softmax_cross_entropy_forward's arguments; return (label, loss, stats, threads)."""
    fn = "softmax_cross_entropy_forward"
    _rows(fn, "x", x)
    label = class_labels(fn, label, x)
    rows = x.shape[0]
    return label, np.empty(rows, x.dtype), np.empty((rows, 2), x.dtype), \
        layer_threads(fn, x.size, nthreads)


def softmax_cross_entropy_backward(x, label, stats, dloss, out, nthreads):
    """Check softmax_cross_entropy_backward's arguments; return (label, out, threads)."""
    fn = "softmax_cross_entropy_backward"
    _rows(fn, "x", x)
    label = class_labels(fn, label, x)
    rows = x.shape[0]
    for name, a, shape in (("stats", stats, (rows, 2)), ("dloss", dloss, (rows,))):
        array(fn, name, a, dtypes=(x.dtype,))
        if a.shape != shape:
            raise ShapeError(f"{fn}: {name} has shape {a.shape} but x of shape {x.shape} "
                             f"needs {shape}")
    out = output(fn, out, x.shape, x.dtype, [("x", x), ("stats", stats), ("dloss", dloss)])
    return label, out, layer_threads(fn, x.size, nthreads)
