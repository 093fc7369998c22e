"""Connectionist temporal classification loss (Graves et al. 2006) as MXNet's CTCLoss op.

data (T, N, C) holds unnormalized scores per time step; the loss of sample n is
-log p(label_n | data_n), summing over every alignment that collapses to the label
(merge repeats, drop blanks). The forward (alpha) and backward (beta) recursions run in
log space, vectorized over the batch and the extended label (blank, l1, blank, l2, ...,
blank), one time step at a time, in float64. The gradient with respect to the scores is
softmax - posterior occupancy of each class, zero past a sample's length.
"""
import numpy as np

from ..base import ShapeError
from .registry import register

_NEG = -np.inf


def _logsumexp(xp, *terms):
    top = terms[0]
    for t in terms[1:]:
        top = xp.maximum(top, t)
    safe = xp.where(xp.isfinite(top), top, 0)
    total = sum(xp.exp(t - safe) for t in terms)
    with np.errstate(divide="ignore"):
        return xp.where(xp.isfinite(top), xp.log(total) + safe, _NEG)


def _lengths(xp, label, blank, use_label_lengths, label_lengths):
    """Label lengths: given, or up to the first padding value (0 with a 'first' blank,
    -1 with a 'last' one)."""
    if use_label_lengths:
        return xp.asarray(label_lengths).astype(np.int64)
    pad = 0 if blank == 0 else -1
    is_pad = label == pad
    first = xp.where(is_pad.any(axis=1), is_pad.argmax(axis=1), label.shape[1])
    return first.astype(np.int64)


def _shift(xp, a, k):
    """a shifted right by k along the last axis, filled with -inf."""
    out = xp.full_like(a, _NEG)
    out[..., k:] = a[..., :a.shape[-1] - k]
    return out


def _unshift(xp, a, k):
    """a shifted left by k along the last axis, filled with -inf."""
    out = xp.full_like(a, _NEG)
    out[..., :a.shape[-1] - k] = a[..., k:]
    return out


@register("CTCLoss", inputs=("data", "label", "data_lengths", "label_lengths"),
          aliases=("ctc_loss",))
def ctc_loss(xp, data, label, data_lengths=None, label_lengths=None, use_data_lengths=False,
             use_label_lengths=False, blank_label="first"):
    """CTC loss per sample: data (T, N, C), label (N, L) of class indices; returns (N,)."""
    if data.ndim != 3 or label.ndim != 2 or label.shape[0] != data.shape[1]:
        raise ShapeError(f"CTCLoss: data must be (T, N, C) and label (N, L) with the same N, "
                         f"got {data.shape} and {label.shape}")
    if blank_label not in ("first", "last"):
        raise ShapeError(f"CTCLoss: blank_label must be 'first' or 'last', got "
                         f"{blank_label!r}")
    steps, batch, classes = data.shape
    blank = 0 if blank_label == "first" else classes - 1
    label = xp.asarray(label).astype(np.int64)
    lab_len = _lengths(xp, label, blank, use_label_lengths, label_lengths)
    seq_len = xp.asarray(data_lengths).astype(np.int64) if use_data_lengths else \
        xp.full(batch, steps, dtype=np.int64)
    _check(xp, label, lab_len, seq_len, blank, steps, classes)

    x = data.astype(np.float64)
    shifted = x - x.max(axis=2, keepdims=True)
    logp = shifted - xp.log(xp.exp(shifted).sum(axis=2, keepdims=True))
    width = 2 * label.shape[1] + 1
    ext = xp.full((batch, width), blank, dtype=np.int64)
    ext[:, 1::2] = xp.where(label >= 0, label, blank)
    pos = xp.arange(width)
    inside = pos[None, :] < (2 * lab_len + 1)[:, None]                 # (N, S)
    # a skip from s-2 to s: s is a label (odd) that differs from the label before it
    skip = xp.zeros((batch, width), dtype=bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    emit = xp.take_along_axis(logp, xp.broadcast_to(ext[None], (steps, batch, width)),
                              axis=2)
    emit = xp.where(inside[None], emit, _NEG)                         # (T, N, S)

    alpha = xp.full((steps, batch, width), _NEG)
    alpha[0, :, :2] = emit[0, :, :2]
    for t in range(1, steps):
        prev = alpha[t - 1]
        step = _logsumexp(xp, prev, _shift(xp, prev, 1),
                          xp.where(skip, _shift(xp, prev, 2), _NEG)) + emit[t]
        alpha[t] = xp.where((t < seq_len)[:, None], step, prev)
    last = alpha[-1]
    end = 2 * lab_len
    final = xp.take_along_axis(last, end[:, None], axis=1)[:, 0]
    before = xp.take_along_axis(last, xp.maximum(end - 1, 0)[:, None], axis=1)[:, 0]
    log_p = _logsumexp(xp, final, xp.where(lab_len > 0, before, _NEG))
    loss = -log_p

    def backward(dy):
        terminal = xp.where((pos[None, :] == end[:, None]) |
                            ((pos[None, :] == end[:, None] - 1) & (lab_len[:, None] > 0)),
                            0.0, _NEG)
        beta_next = None
        grad = xp.exp(logp)                                           # softmax
        skip_next = _unshift(xp, skip.astype(np.float64), 2) > 0      # s + 2 may skip to s
        onehot = (ext[:, :, None] == xp.arange(classes)[None, None, :]).astype(np.float64)
        feasible = xp.isfinite(log_p)
        safe_log_p = xp.where(feasible, log_p, 0.0)      # an infeasible label: no gradient
        for t in range(steps - 1, -1, -1):
            if beta_next is None:
                beta = xp.where((t == seq_len - 1)[:, None], terminal, _NEG)
            else:
                nxt = beta_next + emit[t + 1]
                step = _logsumexp(xp, nxt, _unshift(xp, nxt, 1),
                                  xp.where(skip_next, _unshift(xp, nxt, 2), _NEG))
                beta = xp.where((t == seq_len - 1)[:, None], terminal,
                                xp.where((t < seq_len - 1)[:, None], step, _NEG))
            occupancy = xp.exp(xp.where(feasible[:, None],
                                        alpha[t] + beta - safe_log_p[:, None], _NEG))
            per_class = xp.einsum("ns,nsc->nc", occupancy, onehot)
            live = ((t < seq_len) & feasible)[:, None]
            grad[t] = xp.where(live, grad[t] - per_class, 0.0)
            beta_next = beta
        scale = xp.asarray(dy, dtype=np.float64).reshape(1, batch, 1)
        return (grad * scale).astype(data.dtype), None, None, None
    return loss.astype(data.dtype), backward


def _check(xp, label, lab_len, seq_len, blank, steps, classes):
    """Name the first bad length or label instead of computing garbage."""
    lab_len_h, seq_len_h = np.asarray(_host(lab_len)), np.asarray(_host(seq_len))
    if (seq_len_h < 1).any() or (seq_len_h > steps).any():
        raise ShapeError(f"CTCLoss: data_lengths must be in [1, {steps}], got "
                         f"{seq_len_h.tolist()}")
    if (lab_len_h < 0).any() or (lab_len_h > label.shape[1]).any():
        raise ShapeError(f"CTCLoss: label_lengths must be in [0, {label.shape[1]}], got "
                         f"{lab_len_h.tolist()}")
    # As in MXNet, the blank class inside a label is not refused: it takes a label slot of
    # the lattice like any class (never skipped over), and MXNet's own tests pass labels
    # such as [3, 2, 2] with blank 3. Only indices outside the classes are an error.
    lab = np.asarray(_host(label))
    for n, length in enumerate(lab_len_h):
        used = lab[n, :length]
        if ((used < 0) | (used >= classes)).any():
            raise ShapeError(f"CTCLoss: label {n} holds {used.tolist()}, but labels must be "
                             f"classes in [0, {classes}) (the blank is {blank}); pad after "
                             "the label's end (or pass label_lengths)")


def _host(a):
    return a.get() if hasattr(a, "get") else a
