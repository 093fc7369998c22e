"""Softmax along an axis: `softmax`, `softmin`, `log_softmax`, and `_softmax_ce_loss`, the
softmax cross-entropy of one picked class per row (SoftmaxCrossEntropyLoss's common case:
sparse labels, the class axis last) as ONE operator.

Host float32/float64 arrays whose softmax runs along their last axis (without a
temperature) go through minigluon_ext's row kernels (src/softmax.c: a row read twice
forward and once backward, rows split over the compute threads). Everything else (CuPy,
float16, another axis, a temperature) runs the formulas below, written for any `xp`.

Unfused, the language model's loss over (1120, 10000) logits was log_softmax, pick and
their backwards: about ten passes over 45 MB on one thread, 27% of a training step.
"""
import numpy as np

import minigluon_ext as ext

from ..base import ShapeError
from .ops_reduce import norm_axis
from .registry import register

# host arrays run the row kernels (tests turn this off to compare with the formulas)
HOST_KERNELS = True


def _kernel_rows(xp, data, axis, temperature=None):
    """data as (rows, width) for the row kernels, or None where they do not apply."""
    if not HOST_KERNELS or xp is not np or not isinstance(data, np.ndarray) or \
            data.dtype not in ext.LAYER_DTYPES or temperature not in (None, 1, 1.0) or \
            data.size == 0 or axis != data.ndim - 1 or not data.flags.c_contiguous:
        return None
    return data.reshape(-1, data.shape[-1])


def _rows_like(dy, rows):
    """An incoming gradient as the kernels take it (a broadcast view becomes an array)."""
    return np.ascontiguousarray(dy, dtype=rows.dtype).reshape(rows.shape)


def _on_rows(data, rows, log):
    """softmax (log: log_softmax) of `rows` by the kernels, and its backward."""
    out = ext.softmax_forward(rows, log=log)

    def backward(dy):
        return (ext.softmax_backward(out, _rows_like(dy, out), log=log).reshape(data.shape),)
    return out.reshape(data.shape), backward


def _by_formula(xp, data, axis, temperature, log):
    """softmax (log: log_softmax) along `axis` by the formulas, and its backward."""
    t = temperature if temperature not in (None, 1, 1.0) else 1.0
    z = data / t if t != 1.0 else data
    z = z - z.max(axis=axis, keepdims=True)
    if log:          # no log of a softmax that may have rounded to 0
        out = z - xp.log(xp.exp(z).sum(axis=axis, keepdims=True))

        def backward(dy):
            return ((dy - xp.exp(out) * dy.sum(axis=axis, keepdims=True)) / t,)
        return out, backward
    e = xp.exp(z)
    out = e / e.sum(axis=axis, keepdims=True)

    def backward(dy):
        return ((dy - (dy * out).sum(axis=axis, keepdims=True)) * out / t,)
    return out, backward


def _softmax(name, xp, data, axis, temperature, log):
    """`name` (softmax, log: log_softmax) along `axis`: the row kernels where they apply,
    else the formulas."""
    ax = norm_axis(name, axis, data.ndim)[0]
    rows = _kernel_rows(xp, data, ax, temperature)
    if rows is not None:
        return _on_rows(data, rows, log)
    return _by_formula(xp, data, axis, temperature, log)


@register("softmax")
def softmax(xp, data, axis=-1, temperature=None, dtype=None, use_length=False):
    """exp(x) / sum(exp(x)) along `axis`, computed stably."""
    return _softmax("softmax", xp, data, axis, temperature, log=False)


@register("softmin")
def softmin(xp, data, axis=-1, temperature=None, dtype=None, use_length=False):
    """softmax(-x) along `axis`: the smallest values get the largest weights."""
    out, softmax_backward = softmax(xp, -data, axis, temperature)
    return out, lambda dy: (-softmax_backward(dy)[0],)


@register("log_softmax")
def log_softmax(xp, data, axis=-1, temperature=None, dtype=None, use_length=False):
    """log(softmax(x)) along `axis`, without the loss of precision of taking the log after."""
    return _softmax("log_softmax", xp, data, axis, temperature, log=True)


def _class_index(xp, data, label):
    """label as int64 class indices, one per row of data's last axis, clipped to the classes
    as pick's mode='clip' does (float labels are truncated first)."""
    if data.ndim == 0 or data.shape[-1] == 0:
        raise ShapeError(f"_softmax_ce_loss: data needs a class axis of at least one value, "
                         f"got shape {data.shape}")
    lead = data.shape[:-1]
    if tuple(label.shape) not in (lead, lead + (1,)):
        raise ShapeError(f"_softmax_ce_loss: label of shape {label.shape} must have shape "
                         f"{lead} (one class index per row) for data of shape {data.shape}")
    idx = label.astype(np.int64) if label.dtype.kind != "i" else label
    return xp.clip(idx, 0, data.shape[-1] - 1).reshape(-1)


@register("_softmax_ce_loss", inputs=("data", "label"))
def softmax_ce_loss(xp, data, label, keepdims=False):
    """-log(softmax(data)[label]) along the last axis: one loss per row, the class axis
    dropped (kept with size 1 with `keepdims`). Gradient: softmax(data) - onehot(label),
    times the row's incoming gradient. Labels are clipped to the classes, as pick's are.

    >>> loss = nd._internal._softmax_ce_loss(logits, label)   # (35, 32, 10000) -> (35, 32)
    """
    idx = _class_index(xp, data, label)
    shape = data.shape[:-1] + ((1,) if keepdims else ())
    rows = _kernel_rows(xp, data, data.ndim - 1)
    if rows is not None:
        loss, stats = ext.softmax_cross_entropy_forward(rows, idx)

        def backward(dy):
            dloss = np.ascontiguousarray(dy, dtype=rows.dtype).reshape(-1)
            dx = ext.softmax_cross_entropy_backward(rows, idx, stats, dloss)
            return dx.reshape(data.shape), None
        return loss.reshape(shape), backward
    logp = log_softmax(xp, data, -1)[0].reshape(-1, data.shape[-1])
    at = xp.arange(logp.shape[0])

    def formula_backward(dy):
        g = xp.exp(logp)
        g[at, idx] -= 1
        return (g * dy.reshape(-1, 1)).reshape(data.shape), None
    return (-logp[at, idx]).reshape(shape), formula_backward
