"""minigluon_ext: C kernels for the kvstore's and the layers' hot loops, with a NumPy fallback.

Kvstore kernels (contiguous float16, float32 and float64 NumPy arrays; each returns its output):

- `sum_into(out, arrays, accumulate=False)`: out = a0 + a1 + ...; out += ... with accumulate
- `scale_add(out, a, alpha, beta)`: out = alpha*out + beta*a
- `quantize_2bit(grad, residual, threshold, out=None)` -> packed uint32 codes
- `dequantize_2bit(packed, threshold, out)` / `dequantize_2bit_add(packed, threshold, out)`
- `f16_to_f32(src, out)` / `f32_to_f16(src, out)`

Every kernel takes `nthreads=None`.  Arrays with more than MXNET_KVSTORE_BIGARRAY_BOUND
elements (default 1,000,000) are split over MXNET_KVSTORE_REDUCTION_NTHREADS threads
(default 4, capped at the usable cores); `nthreads=k` overrides that count, uncapped.
Smaller arrays always use one thread.  See `threads_for`.

Results (both paths give the same bits; NaN payloads aside when two NaNs meet):

- sums add left to right, each step rounded to the dtype:
  out = ((a0 + a1) + a2) + ...  or, with accumulate, ((out + a0) + a1) + ...;
  float16 sums (and scale_add) run in float32 and round to float16 once, at the end.
- scale_add rounds both products, then adds them (no fused multiply-add).
- f32_to_f16 rounds to nearest even and overflows to inf, like NumPy's astype; f16_to_f32
  is exact.  NaN bits are kept as NumPy keeps them.

2-bit compression (MXNet's rule, with error feedback in `residual`), per value:

    r += g
    if r >= t:    code 0b11 (stands for +t),  r -= t
    elif r <= -t: code 0b10 (stands for -t),  r += t
    else:         code 0b00 (stands for 0)

Bit layout: 16 codes per uint32 word; value i is in word i // 16, byte (i % 16) // 4 of
that word in memory order, at bit shift 6 - 2 * (i % 4) within the byte (the first of
each 4 values in the two most significant bits, as in MXNet's kernel).  Bits past the
last value are 0; code 0b01 is never written and decodes to 0.  Example: grad
[t, -t, 0, t] with a zero residual packs into first byte 0b11_10_00_11 = 0xE3.

The rule runs in the grad's dtype, except for float16 grads, which run in float32 and
need a float32 residual (multi_precision style).  The threshold is rounded to that dtype
(and, for dequantize, to out's dtype); it must be finite and > 0 after rounding.

Layer kernels (contiguous float32 and float64 NumPy arrays; minigluon.ndarray's conv_host,
ops_nn and ops_elemwise call them on host arrays), multi-threaded over rows, planes or channels:

- `im2col(x, kernel, stride, pad, dilate)`: (N, C, H, W) -> columns (C*kh*kw, N*oh*ow);
  row (c, i, j), column (n, y, x) holds x[n, c, y*sh - ph + i*dh, x*sw - pw + j*dw], 0 in
  the padding.  `col2im(cols, shape, ...)` is its adjoint: each image element starts at 0
  and adds its column entries in tap order (0, 0), (0, 1), ..., each step rounded.
- `swap01(src, bias=None)`: (A, B, R) -> (B, A, R), + bias[a] (matmul rows <-> NCHW).
- Winograd F(MxM, 3x3), M = `tile` = 2 or 4, for 3x3 stride-1 convolutions, tiles in
  (M+2)^2 planes ((M+2)^2, C, N*th*tw): `winograd_input(x, pad)` = B^T d B,
  `winograd_output(m, shape, bias)` = A^T M A + bias, and their adjoints
  `winograd_output_adjoint(dy)` = A dY A^T and `winograd_input_adjoint(dv, shape, pad)` =
  B dV B^T summed into the image in tile order.  Each product sums its nonzero terms in
  ascending order, each rounded.
- `max_pool2d(x, kernel, stride, pad, convention)` -> (out, int32 argmax y*W + x): the
  first NaN of a window, else its first maximum, row-major; positions outside the image
  are skipped (a window with none gives -inf, -1).  `max_pool2d_backward(dy, argmax, size)`
  adds dy at the argmax positions in window order.
- `batch_norm_stats(x)` -> float64 (mean, biased var) per channel of (outer, C, inner) x;
  `batch_norm_sums(x, dy, mean)` -> float64 (sum dy, sum dy*(x - mean)); both accumulate in
  double (8 interleaved partial sums per run; the statistics in one pass, over x - K and
  (x - K)^2 for K the channel's first value): equal to NumPy's float64 sums up to
  rounding, not bit for bit.  `batch_norm_forward(x, mean, scale, shift)` =
  (x - mean)*scale + shift, `batch_norm_backward(x, dy, mean, a, b, k)` =
  (dy*a + (x - mean)*b) + k, per channel.
- The same fused, a block of channels at a time (its passes while it is in the cache), with an
  activation `act` after the normalization: None, "relu", or (lo, hi) for clip (ReLU6 is
  (0, 6)). `params` is (4, C) in x's dtype: rows mean, scale, shift, inv_std.
  `batch_norm_train(x, gamma, beta, eps, act)` -> (out, params, mean, var): the statistics
  (as batch_norm_stats), params as NumPy computes them in x's dtype (inv_std = 1 /
  sqrt(var + eps), scale = inv_std * gamma, or inv_std where gamma is None, shift = beta),
  out = act((x - mean) * scale + shift). `batch_norm_apply(x, params, act)` is that last
  map. `batch_norm_grad(x, dy, params, batch_stats, act)` -> (dx, sum g, sum g*(x - mean))
  with g = dy * act'(y), y the normalized x, and dx = batch_norm_backward's map with ops_nn's
  coefficients (batch_stats=True) or g * scale (False): the bits of the unfused chain.
- `lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, rows)` and
  `lstm_sequence_backward(act, wh, c0, cseq, dout, dpx, dh0, dc0, rows)`: one LSTM layer's
  recurrence for the batch rows (lo, hi), every step in one call (GIL released), the
  products through the loaded OpenBLAS's gemm (`blas.gemm`); `lstm_sequence_native(dtype)`
  says whether the C loop runs.  Within rounding of the fallback's NumPy loop.
- `relu(x)` = np.maximum(x, 0); `relu_backward(x, dy)` = dy * (x > 0).
- `clip(x, lo, hi)` = np.clip(x, lo, hi) (ReLU6 is clip(x, 0, 6)), bounds rounded to x's
  dtype; `clip_backward(x, dy, lo, hi)` = dy * (lo <= x <= hi).
- `sgd_update(weight, grad, mom, lr, wd, momentum, rescale_grad, clip_gradient)`: one SGD
  step (with momentum when `mom` is given) in place, one pass over the arrays.
- Softmax along the last axis of (rows, width) data, one row at a time:
  `softmax_forward(x, log=False)` (log_softmax with log=True) and
  `softmax_backward(y, dy, log=False)`; `softmax_cross_entropy_forward(x, label)` ->
  (loss, stats), loss[r] = -log_softmax(x)[r, label[r]], and
  `softmax_cross_entropy_backward(x, label, stats, dloss)` = (softmax(x) - onehot(label))
  * dloss[r].  Row sums run in float64; float32 exponentials within a few ulp of NumPy's.

Row kernels (a kvstore server's row_sparse keys; tables of rows along axis 0, int64 row ids;
one thread, GIL released):

- `rows_sum(ids, values, out_ids=None, out=None)` -> (ids, values): parts of sorted unique
  ids and their rows (float16/32/64) summed over the union of the ids. A row starts from
  part 0's row where part 0 has it, else from +0, and adds the later parts' rows in order,
  each step rounded (float16 through float32). `out_ids`/`out` are optional scratch with
  room for every part's rows; the results are views of them.
- `rows_take(table, ids, out=None)`: out[i] = table[ids[i]] (any dtype; ids in range).
- `rows_add_at(table, ids, values)`: table[ids[i]] += values[i] in order (np.add.at's bits;
  ids may repeat), float16/32/64.
- `rows_sgd_update(weight, ids, grad, mom, ...)`: sgd_update's step on the rows `ids`
  (sorted, unique, in range) of weight and mom, grad row i for ids[i]; the same bits as
  gathering the rows, stepping them and scattering them back.
- `rows_adam_update(weight, ids, grad, mean, var, lr, beta1, beta2, epsilon, wd, ...)`: the
  same for optimizer/adam.py's step (lr bias-corrected by the caller), float32/float64.

Except for the batch-norm sums (and the params batch_norm_train derives from them), both
paths give the same bits.  Layer kernels take `nthreads=None`: one thread below 32768
elements of work, else all usable cores.

Path: the C extension `_kernels` when it is built, else (or with MINIGLUON_EXT_FALLBACK=1)
the NumPy code in `minigluon_ext.fallback`.  `ACTIVE` / `backend()` say which ('c' or
'numpy'); the choice is logged once at debug level on logger 'minigluon'.  `native` is the
C path (None when not built) and `fallback` the NumPy path, for tests and comparisons.

>>> import numpy as np, minigluon_ext as ext
>>> a, b = np.ones(4, np.float32), np.full(4, 2, np.float32)
>>> ext.sum_into(np.empty(4, np.float32), [a, b])
array([3., 3., 3., 3.], dtype=float32)
"""
import logging

import numpy as np

from minigluon.config import ext_force_fallback

from . import blas, fallback
from ._checks import (DEPTHWISE_BLOCK_MAX_PLANE, DEPTHWISE_BLOCK_MAX_TAPS, DEPTHWISE_MAX_SIDE,
                      LAYER_FLOATS, threads_for, winograd_tiles, words_for)
from ._checks import depthwise_blocked as check_blocked

try:
    from . import native
    _missing = None
except ImportError as err:  # extension not built: the NumPy path still works
    native = None
    _missing = err

if ext_force_fallback():
    _impl, _why = fallback, "MINIGLUON_EXT_FALLBACK=1"
elif native is None:
    _impl, _why = fallback, f"C extension not built: {_missing}"
else:
    _impl, _why = native, "built"

ACTIVE = "c" if _impl is native else "numpy"

logging.getLogger("minigluon").debug("minigluon_ext: %s active (%s)", _impl.describe(), _why)

__all__ = ["ACTIVE", "backend", "sum_into", "scale_add", "quantize_2bit", "dequantize_2bit",
           "dequantize_2bit_add", "f16_to_f32", "f32_to_f16", "threads_for", "words_for",
           "im2col", "col2im", "swap01", "winograd_input", "winograd_output",
           "winograd_output_adjoint", "winograd_input_adjoint", "depthwise_forward",
           "depthwise_backward_data", "depthwise_backward_weight", "DEPTHWISE_MAX_SIDE",
           "depthwise_blocked", "DEPTHWISE_BLOCK_MAX_TAPS", "DEPTHWISE_BLOCK_MAX_PLANE",
           "lstm_cell_forward", "lstm_cell_backward", "lstm_sequence_native",
           "lstm_sequence_forward", "lstm_sequence_backward", "gru_cell_forward", "gru_cell_backward",
           "max_pool2d", "max_pool2d_backward",
           "batch_norm_stats", "batch_norm_forward", "batch_norm_sums", "batch_norm_backward",
           "batch_norm_train", "batch_norm_apply", "batch_norm_grad",
           "relu", "relu_backward", "clip", "clip_backward", "sgd_update",
           "softmax_forward", "softmax_backward",
           "softmax_cross_entropy_forward", "softmax_cross_entropy_backward",
           "rows_sum", "rows_take", "rows_add_at", "rows_sgd_update",
           "rows_adam_update",
           "LAYER_DTYPES", "winograd_tiles", "native", "fallback"]

# dtypes the layer kernels take
LAYER_DTYPES = LAYER_FLOATS


def backend():
    """'c' when the C kernels are in use, 'numpy' when the fallback is."""
    return ACTIVE


def sum_into(out, arrays, accumulate=False, nthreads=None):
    """Sum arrays into out, left to right: out = a0 + a1 + ... (accumulate: out += ...).

    Parameters
    ----------
    out : ndarray (float16/32/64, C-contiguous, writable); may be one of `arrays`
    arrays : list or tuple of ndarrays with out's shape and dtype
    accumulate : bool, add to out's current values instead of overwriting them
    nthreads : int, threads for a big array (None: MXNET_KVSTORE_REDUCTION_NTHREADS)

    >>> sum_into(out, [g0, g1, g2])             # out = g0 + g1 + g2
    """
    return _impl.sum_into(out, arrays, accumulate, nthreads)


def scale_add(out, a, alpha, beta, nthreads=None):
    """out = alpha*out + beta*a, in place (optimizer updates).

    >>> scale_add(weight, grad, 1.0, -lr)       # weight -= lr * grad
    """
    return _impl.scale_add(out, a, alpha, beta, nthreads)


def quantize_2bit(grad, residual, threshold, out=None, nthreads=None):
    """Compress grad to 2 bits per value with error feedback; return the packed uint32 codes.

    residual (grad's shape; float32 for float16 grads, else grad's dtype) is updated in
    place.  `out`, if given, must be a uint32 array of shape (words_for(grad.size),).

    >>> packed = quantize_2bit(grad, residual, 0.5)   # residual starts at zeros
    """
    return _impl.quantize_2bit(grad, residual, threshold, out, nthreads)


def dequantize_2bit(packed, threshold, out, nthreads=None):
    """Write into out the values (+threshold, -threshold or 0) the 2-bit codes stand for.

    >>> dequantize_2bit(packed, 0.5, np.empty_like(grad))
    """
    return _impl.dequantize_2bit(packed, threshold, out, nthreads)


def dequantize_2bit_add(packed, threshold, out, nthreads=None):
    """Add to out the values the 2-bit codes stand for (a server summing pushes).

    >>> dequantize_2bit_add(packed, 0.5, summed)
    """
    return _impl.dequantize_2bit_add(packed, threshold, out, nthreads)


def f16_to_f32(src, out, nthreads=None):
    """Widen float16 src into float32 out (exact).

    >>> f16_to_f32(weight16, master32)
    """
    return _impl.f16_to_f32(src, out, nthreads)


def f32_to_f16(src, out, nthreads=None):
    """Round float32 src into float16 out (nearest even, overflow to inf).

    >>> f32_to_f16(master32, weight16)
    """
    return _impl.f32_to_f16(src, out, nthreads)


def im2col(x, kernel, stride=(1, 1), pad=(0, 0), dilate=(1, 1), out=None, nthreads=None):
    """Columns (C*kh*kw, N*oh*ow) of an (N, C, H, W) image for a 2-D convolution.

    kernel, stride, pad, dilate: an int or an (h, w) pair each.  W (F, C*kh*kw) @ columns
    is the convolution's output as (F, N*oh*ow).

    >>> cols = im2col(x, (3, 3), pad=1)             # x (32, 64, 32, 32) -> (576, 32768)
    """
    return _impl.im2col(x, kernel, stride, pad, dilate, out, nthreads)


def col2im(cols, shape, kernel, stride=(1, 1), pad=(0, 0), dilate=(1, 1), out=None,
           nthreads=None):
    """The (N, C, H, W) image of `shape` with every column entry added where im2col took it.

    >>> dx = col2im(w2d.T @ dy_rows, x.shape, (3, 3), pad=1)
    """
    return _impl.col2im(cols, shape, kernel, stride, pad, dilate, out, nthreads)


def swap01(src, bias=None, out=None, nthreads=None):
    """Swap the first two axes of a 3-D array, adding bias[a] to src[a] when given.

    >>> y = swap01(rows.reshape(F, N, P), bias)    # (F, N, P) -> (N, F, P) + bias
    """
    return _impl.swap01(src, bias, out, nthreads)


def winograd_input(x, pad=(1, 1), tile=2, out=None, nthreads=None):
    """Winograd F(tile x tile, 3x3) transforms B^T d B of the input tiles of (N, C, H, W) x.

    tile: 2 or 4. Returns ((tile+2)^2, C, N*th*tw): element (i, j) of tile (n, ty, tx) in
    plane (tile+2)*i + j, with th, tw = ceil(oh/tile), ceil(ow/tile) for the 3x3 stride-1
    output oh x ow.

    >>> v = winograd_input(x, pad=1)                 # (32, 64, 32, 32) -> (16, 64, 8192)
    """
    return _impl.winograd_input(x, pad, tile, out, nthreads)


def winograd_output(m, shape, bias=None, tile=2, out=None, nthreads=None):
    """The (N, F, oh, ow) output of `shape` from Winograd products m ((tile+2)^2, F, tiles).

    >>> y = winograd_output(u @ v, (32, 64, 32, 32), bias)
    """
    return _impl.winograd_output(m, shape, bias, tile, out, nthreads)


def winograd_output_adjoint(dy, tile=2, out=None, nthreads=None):
    """The adjoint of winograd_output (without bias), from dy (N, F, oh, ow).

    >>> dm = winograd_output_adjoint(dy)
    """
    return _impl.winograd_output_adjoint(dy, tile, out, nthreads)


def winograd_input_adjoint(dv, shape, pad=(1, 1), tile=2, out=None, nthreads=None):
    """The adjoint of winograd_input: the (N, C, H, W) image of `shape` summing the tiles.

    >>> dx = winograd_input_adjoint(u.swapaxes(1, 2) @ dm, x.shape, pad=1)
    """
    return _impl.winograd_input_adjoint(dv, shape, pad, tile, out, nthreads)


def depthwise_forward(x, w, bias=None, stride=1, pad=0, dilate=1, out=None, nthreads=None,
                      blocked=None):
    """Depthwise convolution: x (N, C, H, W), w (C*m, 1, kh, kw) -> (N, C*m, oh, ow).

    Output channel c*m + k reads input channel c only (Convolution with num_group = C).
    stride, pad, dilate: an int or an (h, w) pair each; kernel sides up to
    DEPTHWISE_MAX_SIDE. `blocked`: run eight planes at a time (True, kernels of at most 49
    taps) or one (False); None chooses by the plane size. The same bits either way.

    >>> y = depthwise_forward(x, w, bias, stride=2, pad=1)   # (16, 96, 112, 112) -> 56x56
    """
    return _impl.depthwise_forward(x, w, bias, stride, pad, dilate, out, nthreads, blocked)


def depthwise_blocked(kernel, size, kind, blocked=None):
    """Whether the depthwise kernels of `kind` ('forward', 'data' or 'weight') run eight
    planes at a time for a (kh, kw) kernel over images of planes `size` (H, W): `blocked`
    checked and returned, or for None chosen by measurement (see DEPTHWISE_BLOCK_MAX_PLANE).

    >>> depthwise_blocked((3, 3), (7, 7), "forward"), depthwise_blocked((3, 3), (56, 56), "data")
    (True, False)
    """
    return check_blocked("depthwise_blocked", blocked, kernel, size, kind)


def depthwise_backward_data(dy, w, shape, stride=1, pad=0, dilate=1, out=None, nthreads=None,
                            blocked=None):
    """The gradient for the (N, C, H, W) image of `shape` of sum(dy * depthwise_forward);
    `blocked` as for depthwise_forward.

    >>> dx = depthwise_backward_data(dy, w, x.shape, stride=2, pad=1)
    """
    return _impl.depthwise_backward_data(dy, w, shape, stride, pad, dilate, out, nthreads,
                                         blocked)


def depthwise_backward_weight(x, dy, kernel, stride=1, pad=0, dilate=1, out=None,
                              nthreads=None, blocked=None):
    """The gradient (C*m, 1, kh, kw) for the filters of sum(dy * depthwise_forward), summed
    in float64 (a small plane's products in the dtype first); `blocked` as for
    depthwise_forward.

    >>> dw = depthwise_backward_weight(x, dy, (3, 3), stride=2, pad=1)
    """
    return _impl.depthwise_backward_weight(x, dy, kernel, stride, pad, dilate, out, nthreads,
                                           blocked)


def lstm_cell_forward(i2h, h2h, c, nthreads=None):
    """One LSTM cell update from the gate projections i2h, h2h (N, 4H), gates in MXNet's
    order (input, forget, candidate, output), and the cell state c (N, H).

    Returns out (2, N, H) = [h', c'] and act (N, 4H), the activated gates the backward needs.

    >>> out, act = lstm_cell_forward(x @ wx.T + bx, h @ wh.T + bh, c)
    """
    return _impl.lstm_cell_forward(i2h, h2h, c, nthreads)


def lstm_cell_backward(dout, act, c, out, nthreads=None):
    """The gradients of sum(dout * out) of lstm_cell_forward: (for the pre-activations
    i2h + h2h (N, 4H), for c (N, H)).

    >>> da, dc = lstm_cell_backward(dout, act, c, out)
    """
    return _impl.lstm_cell_backward(dout, act, c, out, nthreads)


def lstm_sequence_native(dtype):
    """True where lstm_sequence_forward/backward run in C for arrays of `dtype`: the
    extension is active and the loaded BLAS's gemm was found (minigluon_ext.blas)."""
    return _impl is native and np.dtype(dtype) in LAYER_DTYPES and blas.gemm(dtype) is not None


def lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, rows, reverse=False):
    """Rows lo:hi = `rows` of one LSTM layer through every step of a sequence, from the
    input projections px (T, N, 4H) (both biases added), the recurrent weight wh (4H, H)
    and the first states h0, c0 (N, H). Writes rows lo:hi of out (T + 1, N, H): h after
    each step, then the last c; act (T, N, 4H): the activated gates; cseq (T, N, H): c
    after each step. `reverse` reads the steps from T - 1 down to 0. Each step is
    lstm_cell_forward(px[t], h @ wh.T, c); in C the whole loop runs with the GIL released,
    so row blocks on several threads run side by side.

    >>> lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, (0, n))
    """
    return _impl.lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, rows, reverse)


def lstm_sequence_backward(act, wh, c0, cseq, dout, dpx, dh0, dc0, rows, reverse=False):
    """Rows lo:hi of the same layer back through every step from dout (T + 1, N, H), the
    gradient of the forward's out: writes rows lo:hi of dpx (T, N, 4H), the gradient of
    the gates' pre-activations (of px and of h @ wh.T alike), and of dh0, dc0 (N, H).

    >>> lstm_sequence_backward(act, wh, c0, cseq, dout, dpx, dh0, dc0, (0, n))
    """
    return _impl.lstm_sequence_backward(act, wh, c0, cseq, dout, dpx, dh0, dc0, rows,
                                        reverse)


def gru_cell_forward(i2h, h2h, h, nthreads=None):
    """One GRU update from the gate projections i2h, h2h (N, 3H), gates in MXNet's order
    (reset, update, new) and h2h holding its bias, and the state h (N, H):
    r = sigmoid(i2h_r + h2h_r), z = sigmoid(i2h_z + h2h_z), n = tanh(i2h_n + r * h2h_n),
    h' = (1 - z) * n + z * h.

    Returns out (N, H) = h' and act (N, 4H) = [r, z, n, h2h_n], what the backward needs.

    >>> out, act = gru_cell_forward(x @ wx.T + bx, h @ wh.T + bh, h)
    """
    return _impl.gru_cell_forward(i2h, h2h, h, nthreads)


def gru_cell_backward(dout, act, h, nthreads=None):
    """The gradients of sum(dout * out) of gru_cell_forward: (for i2h (N, 3H), for h2h
    (N, 3H), for h (N, H) through the update gate only; h2h's own path to h is the caller's
    matmul).

    >>> di2h, dh2h, dh = gru_cell_backward(dout, act, h)
    """
    return _impl.gru_cell_backward(dout, act, h, nthreads)


def max_pool2d(x, kernel, stride=(1, 1), pad=(0, 0), convention="valid", nthreads=None):
    """2-D max pooling of (N, C, H, W): (out, int32 argmax), argmax = y*W + x or -1.

    convention: 'valid' (floor) or 'full' (ceil) window count.

    >>> out, argmax = max_pool2d(x, 2, 2)
    """
    return _impl.max_pool2d(x, kernel, stride, pad, convention, nthreads)


def max_pool2d_backward(dy, argmax, size, out=None, nthreads=None):
    """Gradient of max_pool2d for an input of spatial `size` (H, W).

    >>> dx = max_pool2d_backward(dy, argmax, x.shape[2:])
    """
    return _impl.max_pool2d_backward(dy, argmax, size, out, nthreads)


def batch_norm_stats(x, nthreads=None):
    """Per-channel float64 (mean, biased variance) of (outer, C, inner) data.

    >>> mean, var = batch_norm_stats(x.reshape(n, c, -1))
    """
    return _impl.batch_norm_stats(x, nthreads)


def batch_norm_forward(x, mean, scale, shift, out=None, nthreads=None):
    """(x - mean) * scale + shift per channel of (outer, C, inner) data.

    >>> y = batch_norm_forward(x3, mean, gamma * inv_std, beta)
    """
    return _impl.batch_norm_forward(x, mean, scale, shift, out, nthreads)


def batch_norm_sums(x, dy, mean, nthreads=None):
    """Per-channel float64 (sum of dy, sum of dy * (x - mean)) of (outer, C, inner) data.

    >>> sum_dy, sum_dy_xc = batch_norm_sums(x3, dy3, mean)
    """
    return _impl.batch_norm_sums(x, dy, mean, nthreads)


def batch_norm_backward(x, dy, mean, a, b, k, out=None, nthreads=None):
    """(dy * a + (x - mean) * b) + k per channel of (outer, C, inner) data.

    >>> dx = batch_norm_backward(x3, dy3, mean, a, b, k)
    """
    return _impl.batch_norm_backward(x, dy, mean, a, b, k, out, nthreads)


def batch_norm_train(x, gamma, beta, eps, act=None, out=None, nthreads=None):
    """(out, params, mean, var): batch statistics of (outer, C, inner) data, then
    act((x - mean) * scale + shift) per channel; gamma None stands for ones.

    >>> y, params, mean, var = batch_norm_train(x3, gamma, beta, 1e-5, act="relu")
    """
    return _impl.batch_norm_train(x, gamma, beta, eps, act, out, nthreads)


def batch_norm_apply(x, params, act=None, out=None, nthreads=None):
    """act((x - params[0]) * params[1] + params[2]) per channel of (outer, C, inner) data.

    >>> y = batch_norm_apply(x3, params, act=(0, 6))
    """
    return _impl.batch_norm_apply(x, params, act, out, nthreads)


def batch_norm_grad(x, dy, params, batch_stats=True, act=None, out=None, nthreads=None):
    """(dx, sum g, sum g * (x - mean)), g = dy * act'(y): the gradient of batch_norm_train
    (batch_stats=True) or of batch_norm_apply (False) with its activation.

    >>> dx, sum_g, sum_g_xc = batch_norm_grad(x3, dy3, params, act="relu")
    """
    return _impl.batch_norm_grad(x, dy, params, batch_stats, act, out, nthreads)


def relu(x, out=None, nthreads=None):
    """max(x, 0), element-wise, NaN kept (np.maximum(x, 0)).

    >>> y = relu(x)
    """
    return _impl.relu(x, out, nthreads)


def relu_backward(x, dy, out=None, nthreads=None):
    """dy * (x > 0), element-wise.

    >>> dx = relu_backward(x, dy)
    """
    return _impl.relu_backward(x, dy, out, nthreads)


def softmax_forward(x, log=False, out=None, nthreads=None):
    """softmax (log=True: log_softmax) along the last axis of a (rows, width) array.

    >>> p = softmax_forward(logits.reshape(-1, logits.shape[-1]))
    """
    return _impl.softmax_forward(x, log, out, nthreads)


def softmax_backward(y, dy, log=False, out=None, nthreads=None):
    """The gradient for x of sum(dy * y), where y = softmax_forward(x, log).

    >>> dx = softmax_backward(y, dy, log=True)
    """
    return _impl.softmax_backward(y, dy, log, out, nthreads)


def softmax_cross_entropy_forward(x, label, nthreads=None):
    """The softmax cross-entropy of one class per row of a (rows, width) array: (loss
    (rows,) = -log_softmax(x)[r, label[r]], stats (rows, 2) = (row max, log sum exp(x -
    max)), what the backward needs). label: integers in [0, width), one per row.

    >>> loss, stats = softmax_cross_entropy_forward(logits, np.array([3, 0]))
    """
    return _impl.softmax_cross_entropy_forward(x, label, nthreads)


def softmax_cross_entropy_backward(x, label, stats, dloss, out=None, nthreads=None):
    """The gradient for x of sum(dloss * loss): (softmax(x) - onehot(label)) * dloss[r].

    >>> dx = softmax_cross_entropy_backward(logits, label, stats, np.ones(2, np.float32))
    """
    return _impl.softmax_cross_entropy_backward(x, label, stats, dloss, out, nthreads)
def clip(x, lo, hi, out=None, nthreads=None):
    """min(max(x, lo), hi), element-wise, NaN kept (np.clip(x, lo, hi)).

    >>> y = clip(x, 0, 6)
    """
    return _impl.clip(x, lo, hi, out, nthreads)


def clip_backward(x, dy, lo, hi, out=None, nthreads=None):
    """dy * (lo <= x <= hi), element-wise.

    >>> dx = clip_backward(x, dy, 0, 6)
    """
    return _impl.clip_backward(x, dy, lo, hi, out, nthreads)


def sgd_update(weight, grad, mom=None, lr=0.01, wd=0.0, momentum=0.0, rescale_grad=1.0,
               clip_gradient=None, nthreads=None):
    """One SGD step in place, NumPy's bits, one pass (float32/float64, C-contiguous):
    g = clip(rescale_grad * grad) + wd * weight; with `mom`: mom = momentum * mom - lr * g,
    weight += mom; without: weight -= lr * g. Returns weight.

    >>> sgd_update(w, g, mom, lr=0.1, wd=1e-4, momentum=0.9, rescale_grad=1 / 64)
    """
    return _impl.sgd_update(weight, grad, mom, lr, wd, momentum, rescale_grad, clip_gradient,
                            nthreads)


def rows_sum(ids, values, out_ids=None, out=None):
    """The sum of several row sets over the union of their ids: (sorted ids, rows).

    `ids[p]`: strictly increasing int64 ids of part p; `values[p]`: its rows, shape
    (ids[p].size,) + row shape. Parts are added in order (part 0 first).

    >>> ids, rows = rows_sum([np.array([1, 4]), np.array([4])], [a, b])   # rows[1] = a[1] + b[0]
    """
    return _impl.rows_sum(ids, values, out_ids, out)


def rows_add_at(table, ids, values):
    """table[ids[i]] += values[i] for every i, in order (int64 ids in [0, rows), repeats
    allowed; float16/32/64): np.add.at's sums, bit for bit. Returns table. An Embedding's
    gradient is this scatter of its output gradient's rows.

    >>> rows_add_at(np.zeros((3, 2)), np.array([2, 0, 2]), np.ones((3, 2)))
    array([[1., 1.], [0., 0.], [2., 2.]])
    """
    return _impl.rows_add_at(table, ids, values)


def rows_take(table, ids, out=None):
    """The rows `ids` of `table` (int64 ids in [0, rows), any order) as one array.

    >>> rows_take(np.arange(6.).reshape(3, 2), np.array([2, 0]))
    array([[4., 5.], [0., 1.]])
    """
    return _impl.rows_take(table, ids, out)


def rows_sgd_update(weight, ids, grad, mom=None, lr=0.01, wd=0.0, momentum=0.0,
                    rescale_grad=1.0, clip_gradient=None):
    """`sgd_update` on the rows `ids` (sorted, unique, in range) of weight and mom only,
    in place; grad holds one row per id. Returns weight.

    >>> rows_sgd_update(table, np.array([3, 7]), grad_rows, lr=0.1)
    """
    return _impl.rows_sgd_update(weight, ids, grad, mom, lr, wd, momentum, rescale_grad,
                                 clip_gradient)


def rows_adam_update(weight, ids, grad, mean, var, lr, beta1=0.9, beta2=0.999, epsilon=1e-8,
                     wd=0.0, rescale_grad=1.0, clip_gradient=None):
    """Adam's step (optimizer/adam.py, `lr` already bias-corrected) on the rows `ids`
    (sorted, unique, in range) of weight, mean and var only, in place. Returns weight.

    >>> rows_adam_update(table, np.array([3, 7]), grad_rows, mean, var, lr=1e-3)
    """
    return _impl.rows_adam_update(weight, ids, grad, mean, var, lr, beta1, beta2, epsilon, wd,
                                  rescale_grad, clip_gradient)
