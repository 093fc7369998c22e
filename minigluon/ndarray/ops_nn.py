"""Neural-network operators that are not convolutions: FullyConnected, Dropout, Embedding,
BatchNorm, LayerNorm, InstanceNorm, GroupNorm and softmax_cross_entropy. (Convolution,
Deconvolution and Pooling live in ops_convolution.py, ops_deconvolution.py and
ops_pooling.py.)"""
import math

import numpy as np

import minigluon_ext as ext

from .. import autograd
from ..base import ShapeError
from .batchnorm_host import HostBatchNorm
from .device_kernels import device_kernels
from .random import generator
from .registry import Backward, get, register
from .sparse_storage import RowSparseStorage

# BatchNorm of host arrays uses minigluon_ext's kernels (tests turn this off to compare)
_HOST_KERNELS = True


@register("FullyConnected", inputs=("data", "weight", "bias"), takes_need=True)
def fully_connected(xp, data, weight, bias=None, num_hidden=None, no_bias=False, flatten=True):
    """y = x W^T + b, with W of shape (num_hidden, in_units).

    flatten=True treats the input as (N, everything else); flatten=False applies the layer
    to the last axis only.
    """
    x = data.reshape(data.shape[0], -1) if flatten else data.reshape(-1, data.shape[-1])
    if weight.ndim != 2 or weight.shape[1] != x.shape[1] or \
            (num_hidden is not None and weight.shape[0] != num_hidden):
        raise ShapeError(f"FullyConnected: data of shape {data.shape} (flatten={flatten}) "
                         f"needs weight of shape ({num_hidden or weight.shape[0]}, "
                         f"{x.shape[1]}), got {weight.shape}")
    use_bias = bias is not None and not no_bias
    # MXNet takes a bias of shape (num_hidden,) or (num_hidden, 1)
    if use_bias and bias.shape not in ((weight.shape[0],), (weight.shape[0], 1)):
        raise ShapeError(f"FullyConnected: bias must have shape ({weight.shape[0]},) or "
                         f"({weight.shape[0]}, 1), got {bias.shape}")
    out = x @ weight.T
    if use_bias:
        out += bias.reshape(-1)
    out_shape = (data.shape[0], weight.shape[0]) if flatten else \
        data.shape[:-1] + (weight.shape[0],)
    bias_shape = bias.shape if use_bias else None
    return out.reshape(out_shape), Backward(_fc_grads, xp, data, weight, flatten, bias_shape)


def _fc_grads(xp, data, weight, flatten, bias_shape, dy, need=(True, True, True)):
    # written with xp.matmul and array methods so that create_graph can record it
    x = data.reshape(data.shape[0], -1) if flatten else data.reshape(-1, data.shape[-1])
    d2 = dy.reshape(x.shape[0], -1)
    dx = xp.matmul(d2, weight).reshape(data.shape) if need[0] else None
    dw = xp.matmul(d2.T, x) if need[1] else None
    use_bias = bias_shape is not None
    return dx, dw, (_bias_grad(d2).reshape(bias_shape) if use_bias and need[2] else None)


# rows from which a host bias gradient is a BLAS product, not NumPy's sum
BIAS_PRODUCT_ROWS = 256


def _bias_grad(d2):
    """The sum of d2's rows. A host float array's as ones @ d2, on the BLAS threads: NumPy's
    sum runs on one thread, 4 ms for the language model's (1120, 10000) decoder gradient
    against 1 ms (2 threads, quiet)."""
    if isinstance(d2, np.ndarray) and d2.dtype in ext.LAYER_DTYPES and \
            d2.shape[0] >= BIAS_PRODUCT_ROWS:
        return np.ones(d2.shape[0], d2.dtype) @ d2
    return d2.sum(axis=0)


@register("Dropout")
def dropout(xp, data, p=0.5, mode="training", axes=(), cudnn_off=False):
    """Zero each element with probability p and scale the rest by 1/(1-p), in training only.

    `axes` lists axes along which one draw is shared (e.g. whole channels).
    """
    if not 0 <= p < 1:
        raise ShapeError(f"Dropout: p must be in [0, 1), got {p}")
    active = mode == "always" or autograd.is_training()
    if not active or p == 0:
        return data.copy(), Backward(lambda m, dy: (dy,), xp)
    shape = tuple(1 if i in tuple(axes) else n for i, n in enumerate(data.shape))
    keep = generator(xp).uniform(0, 1, shape, data.dtype) >= p
    mask = keep.astype(data.dtype) / data.dtype.type(1 - p)
    return data * mask, Backward(lambda m, mask, dy: (dy * mask,), xp, mask)


@register("Embedding", inputs=("data", "weight"))
def embedding(xp, data, weight, input_dim=None, output_dim=None, dtype="float32",
              sparse_grad=False):
    """Rows of `weight` looked up by the integer values of `data` (clipped to the table)."""
    if weight.ndim != 2 or (input_dim is not None and weight.shape != (input_dim, output_dim)):
        raise ShapeError(f"Embedding: weight must have shape ({input_dim}, {output_dim}), "
                         f"got {weight.shape}")
    idx = xp.clip(data.astype(np.int64), 0, weight.shape[0] - 1)
    out = weight[idx]

    def backward(dy):
        flat = dy.reshape(-1, weight.shape[1])
        if sparse_grad:
            # only the rows looked up, each summed once: a row_sparse gradient whose cost
            # follows the batch, not the vocabulary
            rows, where = xp.unique(idx.reshape(-1), return_inverse=True)
            values = xp.zeros((rows.shape[0], weight.shape[1]), dtype=weight.dtype)
            _add_at(xp, values, where.reshape(-1), flat)
            return None, RowSparseStorage(values, rows.astype(np.int64), weight.shape)
        g = xp.zeros_like(weight)
        _add_at(xp, g, idx.reshape(-1), flat)
        return None, g
    return out, backward


def _add_at(xp, out, ids, values):
    """out[ids] += values with repeated ids summed (NumPy's add.at, CuPy's scatter_add).
    Host float tables take minigluon_ext's row scatter: the bits of add.at, which took
    2.4 ms for the language model's 1120 rows of 256 (about 8 ns a value)."""
    if xp is np and out.dtype in ext.LAYER_DTYPES and out.flags.c_contiguous and \
            ids.dtype == np.int64:
        ext.rows_add_at(out, ids, np.ascontiguousarray(values, dtype=out.dtype))
    elif hasattr(xp.add, "at"):
        xp.add.at(out, ids, values)
    else:
        import cupyx
        cupyx.scatter_add(out, ids, values)


def _channel_view(vec, ndim, axis):
    return vec.reshape(tuple(-1 if i == axis else 1 for i in range(ndim)))


@register("BatchNorm", inputs=("data", "gamma", "beta", "moving_mean", "moving_var"))
def batch_norm(xp, data, gamma, beta, moving_mean, moving_var, eps=1e-3, momentum=0.9,
               fix_gamma=True, use_global_stats=False, output_mean_var=False, axis=1,
               cudnn_off=False, min_calib_range=None, max_calib_range=None):
    """Normalize over every axis but `axis`.

    In training mode (autograd.is_training() and not use_global_stats) the batch statistics
    are used and the moving statistics are updated in place:
    moving = moving * momentum + batch * (1 - momentum). Otherwise the moving ones are used.
    fix_gamma=True treats gamma as 1.
    """
    ax = _check_channel_vectors(data, axis, gamma, beta, moving_mean, moving_var)
    red = tuple(i for i in range(data.ndim) if i != ax)
    work = data.astype(np.float32) if data.dtype == np.float16 else data
    g = xp.ones_like(gamma) if fix_gamma else gamma
    training = autograd.is_training() and not use_global_stats
    kernels = _channel_kernels(xp, work)
    if kernels is ext and data.size:
        out, backward, stats = _host_batch_norm(
            HostBatchNorm(work, ax), data, gamma, beta, moving_mean, moving_var, eps,
            momentum, fix_gamma, training)
        return ((out,) + stats if output_mean_var else out), backward
    if kernels is not None and data.size:
        norm = _KernelBatchNorm(kernels, xp, work, ax, eps)
        if training:
            mean, var = norm.batch_stats()
            _update_moving(moving_mean, moving_var, mean, var, momentum)
        else:
            mean, var = moving_mean.astype(work.dtype), moving_var.astype(work.dtype)
        out = norm.forward(mean, var, g, beta).astype(data.dtype, copy=False)

        def device_backward(dy, *unused):
            dx, dgamma, dbeta = norm.backward(dy, training, fix_gamma)
            return (dx.astype(data.dtype, copy=False), dgamma.astype(gamma.dtype),
                    dbeta.astype(beta.dtype), None, None)
        if output_mean_var:
            return (out, mean.astype(data.dtype), var.astype(data.dtype)), device_backward
        return out, device_backward
    if training:
        mean, var = work.mean(axis=red), work.var(axis=red)
        _update_moving(moving_mean, moving_var, mean, var, momentum)
    else:
        mean, var = moving_mean.astype(work.dtype), moving_var.astype(work.dtype)
    inv_std = 1 / xp.sqrt(var + eps)
    xhat = (work - _channel_view(mean, data.ndim, ax)) * _channel_view(inv_std, data.ndim, ax)
    out = (xhat * _channel_view(g, data.ndim, ax) + _channel_view(beta, data.ndim, ax))
    out = out.astype(data.dtype, copy=False)

    def backward(dy, *unused):
        dy = dy.astype(work.dtype, copy=False)
        dbeta = dy.sum(axis=red)
        dgamma = xp.zeros_like(gamma) if fix_gamma else (dy * xhat).sum(axis=red)
        dxhat = dy * _channel_view(g, data.ndim, ax)
        scale = _channel_view(inv_std, data.ndim, ax)
        if training:
            m = data.size // data.shape[ax]
            dx = scale / m * (m * dxhat - _channel_view(dxhat.sum(axis=red), data.ndim, ax)
                              - xhat * _channel_view((dxhat * xhat).sum(axis=red), data.ndim, ax))
        else:
            dx = dxhat * scale
        return (dx.astype(data.dtype, copy=False), dgamma.astype(gamma.dtype, copy=False),
                dbeta.astype(beta.dtype, copy=False), None, None)
    if output_mean_var:
        return (out, mean.astype(data.dtype), var.astype(data.dtype)), backward
    return out, backward


def _update_moving(moving_mean, moving_var, mean, var, momentum):
    """moving = moving * momentum + batch * (1 - momentum), in place."""
    for moving, batch in ((moving_mean, mean), (moving_var, var)):
        moving *= momentum
        moving += (1 - momentum) * batch.astype(moving.dtype)


def _check_channel_vectors(data, axis, gamma, beta, moving_mean, moving_var):
    """BatchNorm's channel axis, once each vector is checked to hold one value a channel."""
    ax = axis % data.ndim
    c = data.shape[ax]
    for name, v in (("gamma", gamma), ("beta", beta), ("moving_mean", moving_mean),
                    ("moving_var", moving_var)):
        if v.shape != (c,):
            raise ShapeError(f"BatchNorm: {name} must have shape ({c},) for data of shape "
                             f"{data.shape} and axis {axis}, got {v.shape}")
    return ax


def _host_batch_norm(norm, data, gamma, beta, moving_mean, moving_var, eps, momentum,
                     fix_gamma, training):
    """(out, backward, (mean, var)) of BatchNorm on the host kernels, `norm` a
    HostBatchNorm of the data (with its activation, if any)."""
    g = None if fix_gamma else gamma
    if training:
        out, mean, var = norm.train(g, beta, eps)
        mean, var = mean.astype(norm.dtype), var.astype(norm.dtype)
        _update_moving(moving_mean, moving_var, mean, var, momentum)
    else:
        mean, var = moving_mean.astype(norm.dtype), moving_var.astype(norm.dtype)
        out = norm.infer(mean, var, g, beta, eps)

    def backward(dy, *unused):
        dx, dgamma, dbeta = norm.backward(dy, fix_gamma)
        return (dx.astype(data.dtype, copy=False), dgamma.astype(gamma.dtype),
                dbeta.astype(beta.dtype), None, None)
    stats = (mean.astype(data.dtype), var.astype(data.dtype))
    return out.astype(data.dtype, copy=False), backward, stats


@register("_BatchNormAct", inputs=("data", "gamma", "beta", "moving_mean", "moving_var"))
def batch_norm_act(xp, data, gamma, beta, moving_mean, moving_var, act_type="relu",
                   a_min=0.0, a_max=6.0, **bn_attrs):
    """BatchNorm, then relu (act_type "relu") or clip(a_min, a_max) (act_type "clip", as
    MobileNet's ReLU6), as one operator: what symbol/rewrite.py puts in a hybridized graph
    in place of a BatchNorm whose output nothing but that activation reads.

    The values, gradients and moving statistics are those of the two operators run one
    after the other; on the host kernels the activation runs in BatchNorm's own passes.
    `bn_attrs` are BatchNorm's (eps, momentum, fix_gamma, use_global_stats, axis).
    """
    act = _bn_activation(act_type, a_min, a_max)
    if bn_attrs.get("output_mean_var"):
        raise ShapeError("_BatchNormAct: output_mean_var is not supported (the activation "
                         "takes BatchNorm's only output); help: leave such a BatchNorm unfused")
    if _channel_kernels(xp, data) is ext and data.size:
        ax = _check_channel_vectors(data, bn_attrs.get("axis", 1), gamma, beta, moving_mean,
                                    moving_var)
        training = autograd.is_training() and not bn_attrs.get("use_global_stats", False)
        out, backward, _ = _host_batch_norm(
            HostBatchNorm(data, ax, act), data, gamma, beta, moving_mean, moving_var,
            bn_attrs.get("eps", 1e-3), bn_attrs.get("momentum", 0.9),
            bn_attrs.get("fix_gamma", True), training)
        return out, backward
    # float16, device arrays, kernels off: the two operators one after the other
    normed, bn_backward = batch_norm(xp, data, gamma, beta, moving_mean, moving_var,
                                     **bn_attrs)
    out, act_backward = get("relu").fn(xp, normed) if act == "relu" else \
        get("clip").fn(xp, normed, a_min, a_max)

    def backward(dy, *unused):
        return bn_backward(*act_backward(dy))
    return out, backward


def _bn_activation(act_type, a_min, a_max):
    """minigluon_ext's `act` for _BatchNormAct's attributes."""
    if act_type == "relu":
        return "relu"
    if act_type == "clip":
        if not a_min <= a_max:
            raise ShapeError(f"_BatchNormAct: a_min ({a_min}) must not exceed a_max ({a_max})")
        return (a_min, a_max)
    raise ShapeError(f"_BatchNormAct: act_type must be 'relu' or 'clip', got {act_type!r}")


def _channel_kernels(xp, work):
    """The per-channel kernels for this data: minigluon_ext's CUDA kernels for CuPy arrays,
    its C kernels (or fallback) for host arrays, None where neither applies."""
    device = device_kernels(xp, work)
    if device is not None:
        return device
    return ext if _HOST_KERNELS and xp is np and work.dtype in ext.LAYER_DTYPES else None


class _KernelBatchNorm:
    """BatchNorm of a float32/float64 array with minigluon_ext's per-channel kernels: the C
    ones (`ext`) for host arrays, `gpu.Kernels` for device arrays (the same functions).

    The data is viewed as (outer, C, inner); statistics and gradient sums accumulate in
    float64; x - mean is recomputed in backward rather than keeping a normalized copy.
    """

    def __init__(self, kernels, xp, work, ax, eps):
        self.kernels, self.xp = kernels, xp
        self.shape, self.dtype, self.eps = work.shape, work.dtype, eps
        self.x = xp.ascontiguousarray(work).reshape(math.prod(work.shape[:ax]),
                                                    work.shape[ax], -1)

    def batch_stats(self):
        """The batch's (mean, biased variance) per channel, rounded to the data's dtype."""
        mean, var = self.kernels.batch_norm_stats(self.x)
        return mean.astype(self.dtype), var.astype(self.dtype)

    def forward(self, mean, var, gamma, beta):
        """(x - mean) * gamma / sqrt(var + eps) + beta, in the data's shape."""
        xp = self.xp
        self.mean = xp.ascontiguousarray(mean, dtype=self.dtype)
        self.inv_std = 1 / xp.sqrt(var.astype(self.dtype) + self.eps)
        self.scale = self.inv_std * gamma.astype(self.dtype)
        return self.kernels.batch_norm_forward(self.x, self.mean, self.scale,
                                               xp.ascontiguousarray(beta, dtype=self.dtype)
                                               ).reshape(self.shape)

    def backward(self, dy, training, fix_gamma):
        """(dx, dgamma, dbeta); with batch statistics, dx includes their gradient."""
        dy = self.xp.ascontiguousarray(dy, dtype=self.dtype).reshape(self.x.shape)
        sum_dy, sum_dy_xc = self.kernels.batch_norm_sums(self.x, dy, self.mean)
        dgamma = self.xp.zeros_like(sum_dy) if fix_gamma else sum_dy_xc * self.inv_std
        if training:
            # dx = scale * (dy - mean(dy) - xhat * mean(dy * xhat)), per channel
            m = self.x.shape[0] * self.x.shape[2]
            inv_std, scale = self.inv_std.astype(np.float64), self.scale.astype(np.float64)
            b = -(scale * inv_std * inv_std * sum_dy_xc / m)
            k = -(scale * sum_dy / m)
            dx = self.kernels.batch_norm_backward(self.x, dy, self.mean, self.scale,
                                                  b.astype(self.dtype), k.astype(self.dtype))
        else:
            dx = dy * self.scale[None, :, None]
        return dx.reshape(self.shape), dgamma, sum_dy


@register("LayerNorm", inputs=("data", "gamma", "beta"))
def layer_norm(xp, data, gamma, beta, axis=-1, eps=1e-5, output_mean_var=False):
    """Normalize over `axis` of each sample, then scale by gamma and shift by beta."""
    ax = axis % data.ndim
    if gamma.shape != (data.shape[ax],) or beta.shape != (data.shape[ax],):
        raise ShapeError(f"LayerNorm: gamma and beta must have shape ({data.shape[ax]},), got "
                         f"{gamma.shape} and {beta.shape}")
    mean = data.mean(axis=ax, keepdims=True)
    inv_std = 1 / xp.sqrt(data.var(axis=ax, keepdims=True) + eps)
    xhat = (data - mean) * inv_std
    gv, bv = _channel_view(gamma, data.ndim, ax), _channel_view(beta, data.ndim, ax)
    out = xhat * gv + bv
    red = tuple(i for i in range(data.ndim) if i != ax)

    def backward(dy):
        n = data.shape[ax]
        dxhat = dy * gv
        dx = inv_std / n * (n * dxhat - dxhat.sum(axis=ax, keepdims=True)
                            - xhat * (dxhat * xhat).sum(axis=ax, keepdims=True))
        return dx, (dy * xhat).sum(axis=red), dy.sum(axis=red)
    return out, backward


def _normalize(xp, x, axes, eps):
    """(x - mean) / sqrt(var + eps) over `axes` (kept), and its backward for a given
    gradient of xhat: dx = inv_std / n * (n * g - sum(g) - xhat * sum(g * xhat))."""
    mean = x.mean(axis=axes, keepdims=True)
    inv_std = 1 / xp.sqrt(x.var(axis=axes, keepdims=True) + eps)
    xhat = (x - mean) * inv_std
    n = math.prod(x.shape[a] for a in axes)

    def backward(dxhat):
        return inv_std / n * (n * dxhat - dxhat.sum(axis=axes, keepdims=True)
                              - xhat * (dxhat * xhat).sum(axis=axes, keepdims=True))
    return xhat, backward


def _check_channel_params(op, data, gamma, beta, axis_name="channels"):
    if data.ndim < 3:
        raise ShapeError(f"{op}: data must be (N, C, ...) with at least one spatial axis, got "
                         f"shape {data.shape}")
    want = (data.shape[1],)
    if gamma.shape != want or beta.shape != want:
        raise ShapeError(f"{op}: gamma and beta must have shape {want} (one per {axis_name} "
                         f"of data {data.shape}), got {gamma.shape} and {beta.shape}")


@register("InstanceNorm", inputs=("data", "gamma", "beta"))
def instance_norm(xp, data, gamma, beta, eps=1e-3):
    """Normalize each channel of each sample over its spatial axes; data (N, C, ...), then
    scale by gamma and shift by beta, one each per channel."""
    _check_channel_params("InstanceNorm", data, gamma, beta)
    spatial = tuple(range(2, data.ndim))
    xhat, norm_backward = _normalize(xp, data, spatial, eps)
    gv, bv = _channel_view(gamma, data.ndim, 1), _channel_view(beta, data.ndim, 1)
    red = (0,) + spatial

    def backward(dy):
        return norm_backward(dy * gv), (dy * xhat).sum(axis=red), dy.sum(axis=red)
    return xhat * gv + bv, backward


@register("GroupNorm", inputs=("data", "gamma", "beta"))
def group_norm(xp, data, gamma, beta, num_groups=1, eps=1e-5, output_mean_var=False):
    """Split the C channels of data (N, C, ...) into `num_groups` groups and normalize each
    group of each sample over its channels and spatial axes; then scale by gamma and shift
    by beta, one each per channel (as in the paper and in PyTorch)."""
    _check_channel_params("GroupNorm", data, gamma, beta)
    if output_mean_var:
        raise ShapeError("GroupNorm: output_mean_var=True is not supported; compute the "
                         "statistics with nd.mean and nd.var on the grouped data instead")
    channels = data.shape[1]
    if num_groups < 1 or channels % num_groups:
        raise ShapeError(f"GroupNorm: num_groups={num_groups} must divide the "
                         f"{channels} channels of data {data.shape}")
    grouped = data.reshape((data.shape[0], num_groups, -1))
    xhat, norm_backward = _normalize(xp, grouped, (2,), eps)
    xhat = xhat.reshape(data.shape)
    gv, bv = _channel_view(gamma, data.ndim, 1), _channel_view(beta, data.ndim, 1)
    red = (0,) + tuple(range(2, data.ndim))

    def backward(dy):
        dx = norm_backward((dy * gv).reshape(grouped.shape)).reshape(data.shape)
        return dx, (dy * xhat).sum(axis=red), dy.sum(axis=red)
    return xhat * gv + bv, backward


@register("softmax_cross_entropy", inputs=("data", "label"))
def softmax_cross_entropy(xp, data, label):
    """Sum over the batch of -log(softmax(data)[label]); data (N, C), label (N,)."""
    if data.ndim != 2 or label.shape != (data.shape[0],):
        raise ShapeError(f"softmax_cross_entropy: expects data (N, C) and label (N,), got "
                         f"{data.shape} and {label.shape}")
    z = data - data.max(axis=1, keepdims=True)
    logp = z - xp.log(xp.exp(z).sum(axis=1, keepdims=True))
    idx = label.astype(np.int64)
    out = -logp[xp.arange(data.shape[0]), idx].sum().reshape(1)

    def backward(dy):
        g = xp.exp(logp)
        g[xp.arange(data.shape[0]), idx] -= 1
        return g * dy.reshape(()), None
    return out.astype(data.dtype), backward
