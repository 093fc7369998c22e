"""The C path: the shared argument checks, then the compiled kernels in `_kernels`.

Importing this module raises ImportError when the extension was not built.
"""
import math

import numpy as np

from . import _checks as check
from . import blas
from . import fallback
from . import _kernels


def sum_into(out, arrays, accumulate=False, nthreads=None):
    """out = a0 + a1 + ... (out = out + a0 + ... with accumulate), in C."""
    arrays, threads = check.sum_into(out, arrays, nthreads)
    _kernels.sum_into(out, arrays, bool(accumulate), threads)
    return out


def scale_add(out, a, alpha, beta, nthreads=None):
    """out = alpha*out + beta*a, in C."""
    alpha, beta, threads = check.scale_add(out, a, alpha, beta, nthreads)
    _kernels.scale_add(out, a, alpha, beta, threads)
    return out


def quantize_2bit(grad, residual, threshold, out=None, nthreads=None):
    """2-bit codes of residual + grad, updating residual in place, in C."""
    t, out, threads = check.quantize_2bit(grad, residual, threshold, out, nthreads)
    _kernels.quantize_2bit(grad, residual, out, float(t), threads)
    return out


def dequantize_2bit(packed, threshold, out, nthreads=None):
    """out = the values the 2-bit codes stand for, in C."""
    lut, threads = check.dequantize_2bit("dequantize_2bit", packed, threshold, out, nthreads)
    _kernels.dequantize_2bit(packed, out, lut, False, threads)
    return out


def dequantize_2bit_add(packed, threshold, out, nthreads=None):
    """out += the values the 2-bit codes stand for, in C."""
    lut, threads = check.dequantize_2bit("dequantize_2bit_add", packed, threshold, out,
                                         nthreads)
    _kernels.dequantize_2bit(packed, out, lut, True, threads)
    return out


def f16_to_f32(src, out, nthreads=None):
    """out = src widened from float16 to float32 (exact), in C."""
    threads = check.convert("f16_to_f32", src, out, "float16", "float32", nthreads)
    _kernels.f16_to_f32(src, out, threads)
    return out


def f32_to_f16(src, out, nthreads=None):
    """out = src rounded from float32 to float16 (nearest even), in C."""
    threads = check.convert("f32_to_f16", src, out, "float32", "float16", nthreads)
    _kernels.f32_to_f16(src, out, threads)
    return out


def im2col(x, kernel, stride=(1, 1), pad=(0, 0), dilate=(1, 1), out=None, nthreads=None):
    """Columns (C*kh*kw, N*oh*ow) of an (N, C, H, W) image, in C."""
    win, out, threads = check.im2col(x, kernel, stride, pad, dilate, out, nthreads)
    _kernels.im2col(x, out, *win, threads)
    return out


def col2im(cols, shape, kernel, stride=(1, 1), pad=(0, 0), dilate=(1, 1), out=None,
           nthreads=None):
    """The (N, C, H, W) image summing the columns back onto it, in C."""
    win, out, threads = check.col2im(cols, shape, kernel, stride, pad, dilate, out, nthreads)
    _kernels.col2im(cols, out, *win, threads)
    return out


def swap01(src, bias=None, out=None, nthreads=None):
    """(A, B, R) -> (B, A, R), plus bias[a] when given, in C."""
    out, threads = check.swap01(src, bias, out, nthreads)
    _kernels.swap01(src, bias, out, threads)
    return out


def max_pool2d(x, kernel, stride=(1, 1), pad=(0, 0), convention="valid", nthreads=None):
    """(max-pooled x, int32 argmax positions), in C."""
    win, out, argmax, threads = check.max_pool2d(x, kernel, stride, pad, convention, nthreads)
    _kernels.max_pool2d(x, out, argmax, *win[:6], threads)
    return out, argmax


def max_pool2d_backward(dy, argmax, size, out=None, nthreads=None):
    """Gradient of max pooling for an input of spatial `size`, in C."""
    out, threads = check.max_pool2d_backward(dy, argmax, size, out, nthreads)
    _kernels.max_pool2d_backward(dy, argmax, out, threads)
    return out


def winograd_input(x, pad=(1, 1), tile=2, out=None, nthreads=None):
    """Winograd F(tile, 3x3) input tiles B^T d B, ((tile+2)^2, C, N*th*tw), in C."""
    (ph, pw), tile, out, threads = check.winograd_input(x, pad, tile, out, nthreads)
    _kernels.winograd(0, x, out, None, ph, pw, tile, threads)
    return out


def winograd_output(m, shape, bias=None, tile=2, out=None, nthreads=None):
    """The (N, F, oh, ow) output A^T M A (+ bias) of Winograd products m, in C."""
    tile, out, threads = check.winograd_output(m, shape, bias, tile, out, nthreads)
    _kernels.winograd(1, m, out, bias, 0, 0, tile, threads)
    return out


def winograd_output_adjoint(dy, tile=2, out=None, nthreads=None):
    """A dY A^T of every output tile of dy, ((tile+2)^2, F, N*th*tw), in C."""
    tile, out, threads = check.winograd_output_adjoint(dy, tile, out, nthreads)
    _kernels.winograd(2, dy, out, None, 0, 0, tile, threads)
    return out


def winograd_input_adjoint(dv, shape, pad=(1, 1), tile=2, out=None, nthreads=None):
    """The image of `shape` summing B dV B^T of every tile, in C."""
    (ph, pw), tile, out, threads = check.winograd_input_adjoint(dv, shape, pad, tile, out,
                                                               nthreads)
    _kernels.winograd(3, dv, out, None, ph, pw, tile, threads)
    return out


def batch_norm_stats(x, nthreads=None):
    """Per-channel (mean, biased variance) of (outer, C, inner) data, float64, in C."""
    threads = check.batch_norm_stats(x, nthreads)
    mean, var = np.empty(x.shape[1]), np.empty(x.shape[1])
    _kernels.batch_norm(0, x, None, None, None, None, None, None, mean, var, threads)
    return mean, var


def batch_norm_forward(x, mean, scale, shift, out=None, nthreads=None):
    """out = (x - mean) * scale + shift per channel, in C."""
    out, threads = check.batch_norm_forward(x, mean, scale, shift, out, nthreads)
    _kernels.batch_norm(1, x, None, mean, scale, shift, None, out, None, None, threads)
    return out


def batch_norm_sums(x, dy, mean, nthreads=None):
    """Per-channel (sum of dy, sum of dy * (x - mean)), float64, in C."""
    threads = check.batch_norm_sums(x, dy, mean, nthreads)
    s1, s2 = np.empty(x.shape[1]), np.empty(x.shape[1])
    _kernels.batch_norm(2, x, dy, mean, None, None, None, None, s1, s2, threads)
    return s1, s2


def batch_norm_backward(x, dy, mean, a, b, k, out=None, nthreads=None):
    """out = (dy * a + (x - mean) * b) + k per channel, in C."""
    out, threads = check.batch_norm_backward(x, dy, mean, a, b, k, out, nthreads)
    _kernels.batch_norm(3, x, dy, mean, a, b, k, out, None, None, threads)
    return out


def batch_norm_train(x, gamma, beta, eps, act=None, out=None, nthreads=None):
    """Batch statistics, then act of the normalized x, per channel, in C (one channel at a
    time); returns (out, params, mean, var)."""
    code, lo, hi, eps, out, threads = check.batch_norm_train(x, gamma, beta, eps, act, out,
                                                              nthreads)
    params = np.empty((4, x.shape[1]), x.dtype)
    params[2] = beta
    mean, var = np.empty(x.shape[1]), np.empty(x.shape[1])
    _kernels.batch_norm_act(0, x, None, gamma, params, out, mean, var, code, lo, hi, eps,
                            threads)
    return out, params, mean, var


def batch_norm_apply(x, params, act=None, out=None, nthreads=None):
    """out = act((x - mean) * scale + shift) per channel, from params' rows, in C."""
    code, lo, hi, out, threads = check.batch_norm_apply(x, params, act, out, nthreads)
    _kernels.batch_norm_act(1, x, None, None, params, out, None, None, code, lo, hi, 0.0,
                            threads)
    return out


def batch_norm_grad(x, dy, params, batch_stats=True, act=None, out=None, nthreads=None):
    """(dx, sum g, sum g * (x - mean)) with g = dy * act'(y), per channel, in C."""
    code, lo, hi, out, threads = check.batch_norm_grad(x, dy, params, act, out, nthreads)
    s1, s2 = np.empty(x.shape[1]), np.empty(x.shape[1])
    _kernels.batch_norm_act(2 if batch_stats else 3, x, dy, None, params, out, s1, s2, code,
                            lo, hi, 0.0, threads)
    return out, s1, s2


def relu(x, out=None, nthreads=None):
    """max(x, 0) with NaN kept, in C."""
    out, threads = check.relu("relu", x, None, out, nthreads)
    _kernels.relu(x, None, out, threads)
    return out


def relu_backward(x, dy, out=None, nthreads=None):
    """dy * (x > 0), in C."""
    out, threads = check.relu("relu_backward", x, dy, out, nthreads)
    _kernels.relu(x, dy, out, threads)
    return out


def clip(x, lo, hi, out=None, nthreads=None):
    """NumPy's clip(x, lo, hi), in C."""
    out, threads = check.relu("clip", x, None, out, nthreads)
    _kernels.clip(x, None, out, float(lo), float(hi), threads)
    return out


def clip_backward(x, dy, lo, hi, out=None, nthreads=None):
    """dy * (lo <= x <= hi), in C."""
    out, threads = check.relu("clip_backward", x, dy, out, nthreads)
    _kernels.clip(x, dy, out, float(lo), float(hi), threads)
    return out


def sgd_update(weight, grad, mom=None, lr=0.01, wd=0.0, momentum=0.0, rescale_grad=1.0,
               clip_gradient=None, nthreads=None):
    """One SGD step on weight (and mom) in place, in C."""
    values, threads = check.sgd_update(weight, grad, mom, lr, wd, momentum, rescale_grad,
                                       clip_gradient, nthreads)
    _kernels.sgd_update(weight, grad, mom, *values, threads)
    return weight


def rows_sum(ids, values, out_ids=None, out=None):
    """(ids, values): the rows of several sorted parts summed over their union, in C."""
    ids, values, row_shape, out_ids, out = check.rows_sum(ids, values, out_ids, out)
    if values[0].dtype not in check.FLOATS:       # integer rows: NumPy's own sums
        return fallback.rows_sum(ids, values, out_ids, out)
    width = math.prod(row_shape)
    n = _kernels.rows_sum(ids, values, width, out_ids, out)
    return out_ids[:n], out[:n * width].reshape((n,) + row_shape)


def rows_add_at(table, ids, values):
    """table[ids[i]] += values[i], in order, in C."""
    check.rows_add_at(table, ids, values)
    _kernels.rows_add_at(table, table.shape[0], ids, values)
    return table


def rows_take(table, ids, out=None):
    """out[i] = table[ids[i]], in C."""
    out = check.rows_take(table, ids, out)
    _kernels.rows_take(table, table.shape[0], ids, out)
    return out


def rows_sgd_update(weight, ids, grad, mom=None, lr=0.01, wd=0.0, momentum=0.0,
                    rescale_grad=1.0, clip_gradient=None):
    """One SGD step on the rows `ids` of weight (and mom) in place, in C."""
    values = check.rows_sgd_update(weight, ids, grad, mom, lr, wd, momentum, rescale_grad,
                                   clip_gradient)
    _kernels.rows_sgd(weight, weight.shape[0], ids, grad, mom, *values)
    return weight


def rows_adam_update(weight, ids, grad, mean, var, lr, beta1=0.9, beta2=0.999, epsilon=1e-8,
                     wd=0.0, rescale_grad=1.0, clip_gradient=None):
    """One Adam step on the rows `ids` of weight, mean and var in place, in C."""
    v = check.rows_adam_update(weight, ids, grad, mean, var, dict(
        lr=lr, beta1=beta1, beta2=beta2, epsilon=epsilon, wd=wd, rescale_grad=rescale_grad,
        clip_gradient=clip_gradient))
    _kernels.rows_adam(weight, weight.shape[0], ids, grad, mean, var, v["lr"], v["beta1"],
                       v["beta2"], v["epsilon"], v["wd"], v["rescale_grad"], v["clip_gradient"])
    return weight


def depthwise_forward(x, w, bias=None, stride=1, pad=0, dilate=1, out=None, nthreads=None,
                      blocked=None):
    """Depthwise convolution (N, C*m, oh, ow) of x (N, C, H, W) with w (C*m, 1, kh, kw), in C."""
    win, out, threads = check.depthwise_forward(x, w, bias, stride, pad, dilate, out, nthreads)
    blocked = check.depthwise_blocked("depthwise_forward", blocked, win[:2], x.shape[2:],
                                      "forward")
    _kernels.depthwise(0, x, out, w, bias, *win, threads, blocked)
    return out


def depthwise_backward_data(dy, w, shape, stride=1, pad=0, dilate=1, out=None, nthreads=None,
                            blocked=None):
    """The gradient for the image of `shape` of depthwise_forward, in C."""
    win, out, threads = check.depthwise_backward_data(dy, w, shape, stride, pad, dilate, out,
                                                      nthreads)
    blocked = check.depthwise_blocked("depthwise_backward_data", blocked, win[:2],
                                      out.shape[2:], "data")
    _kernels.depthwise(1, out, dy, w, None, *win, threads, blocked)
    return out


def depthwise_backward_weight(x, dy, kernel, stride=1, pad=0, dilate=1, out=None,
                              nthreads=None, blocked=None):
    """The gradient (C*m, 1, kh, kw) for the filters of depthwise_forward, in C."""
    win, out, threads = check.depthwise_backward_weight(x, dy, kernel, stride, pad, dilate,
                                                        out, nthreads)
    blocked = check.depthwise_blocked("depthwise_backward_weight", blocked, win[:2],
                                      x.shape[2:], "weight")
    _kernels.depthwise(2, x, dy, out, None, *win, threads, blocked)
    return out


def lstm_cell_forward(i2h, h2h, c, nthreads=None):
    """(out (2, N, H) = [h', c'], act (N, 4H) = the activated gates) of one LSTM step, in C."""
    out, act, threads = check.lstm_cell_forward(i2h, h2h, c, nthreads)
    _kernels.lstm_cell(0, c, act, out, i2h, h2h, None, threads)
    return out, act


def lstm_cell_backward(dout, act, c, out, nthreads=None):
    """(gradient of the gate pre-activations (N, 4H), gradient of c) of one LSTM step, in C."""
    da, dc, threads = check.lstm_cell_backward(dout, act, c, out, nthreads)
    _kernels.lstm_cell(1, c, act, out, dout, da, dc, threads)
    return da, dc


def lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, rows, reverse=False):
    """Rows lo:hi of one LSTM layer through every step, in C (GIL released), its products
    through the loaded OpenBLAS: out[t] = h after step t, out[T] = the last c, act[t] the
    gates, cseq[t] c after step t."""
    lo, hi = check.lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, rows)
    address, ilp64 = _gemm("lstm_sequence_forward", px.dtype)
    _kernels.lstm_sequence_forward(address, ilp64, reverse, lo, hi, px, wh, h0, c0, out, act,
                                   cseq)
    return out


def lstm_sequence_backward(act, wh, c0, cseq, dout, dpx, dh0, dc0, rows, reverse=False):
    """Rows lo:hi of the same layer back through every step, in C: dpx the gradient of the
    gates' pre-activations, rows lo:hi of dh0 and dc0 those of the first states."""
    lo, hi = check.lstm_sequence_backward(act, wh, c0, cseq, dout, dpx, dh0, dc0, rows)
    address, ilp64 = _gemm("lstm_sequence_backward", act.dtype)
    _kernels.lstm_sequence_backward(address, ilp64, reverse, lo, hi, act, wh, c0, cseq, dout,
                                    dpx, dh0, dc0)
    return dpx


def _gemm(fn, dtype):
    found = blas.gemm(dtype)
    if found is None:
        raise RuntimeError(f"{fn}: no OpenBLAS cblas gemm for {dtype} is loaded in this "
                           "process; help: check minigluon_ext.blas.gemm(dtype) first and use "
                           "the NumPy loop (minigluon_ext.fallback) where it is None")
    return found


def gru_cell_forward(i2h, h2h, h, nthreads=None):
    """(out (N, H) = h', act (N, 4H) = r, z, n and h2h's new part) of one GRU step, in C."""
    out, act, threads = check.gru_cell_forward(i2h, h2h, h, nthreads)
    _kernels.gru_cell(0, h, act, out, i2h, h2h, None, threads)
    return out, act


def gru_cell_backward(dout, act, h, nthreads=None):
    """(gradients of i2h and h2h (N, 3H), gradient of h through the update gate) of one
    GRU step, in C."""
    di2h, dh2h, dh, threads = check.gru_cell_backward(dout, act, h, nthreads)
    _kernels.gru_cell(1, h, act, dout, di2h, dh2h, dh, threads)
    return di2h, dh2h, dh


def softmax_forward(x, log=False, out=None, nthreads=None):
    """softmax (log: log_softmax) along the last axis of (rows, width) x, in C."""
    out, threads = check.softmax_rows("softmax_forward", x, None, out, nthreads)
    _kernels.softmax(1 if log else 0, x, None, None, None, out, threads)
    return out


def softmax_backward(y, dy, log=False, out=None, nthreads=None):
    """The gradient for x of sum(dy * y), y = softmax_forward(x, log), in C."""
    out, threads = check.softmax_rows("softmax_backward", y, dy, out, nthreads, "y")
    _kernels.softmax(3 if log else 2, y, dy, None, None, out, threads)
    return out


def softmax_cross_entropy_forward(x, label, nthreads=None):
    """(loss (rows,), stats (rows, 2)) of -log_softmax(x)[r, label[r]], in C."""
    label, loss, stats, threads = check.softmax_cross_entropy_forward(x, label, nthreads)
    _kernels.softmax(4, x, None, label, stats, loss, threads)
    return loss, stats


def softmax_cross_entropy_backward(x, label, stats, dloss, out=None, nthreads=None):
    """(softmax(x) - onehot(label)) * dloss per row, in C."""
    label, out, threads = check.softmax_cross_entropy_backward(x, label, stats, dloss, out,
                                                               nthreads)
    _kernels.softmax(5, x, dloss, label, stats, out, threads)
    return out


def describe():
    """A few words on this path for the log: which SIMD paths the CPU enables."""
    feats = _kernels.tuning()
    simd = ", ".join(name for name in ("avx2", "f16c") if feats[name]) or "baseline only"
    return f"C kernels ({simd})"
