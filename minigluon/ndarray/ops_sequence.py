"""Operators on padded batches of sequences: SequenceMask, SequenceLast, SequenceReverse.

Each takes `data` with a time axis (`axis`, 0 by default, so (T, N, ...)) and, when
`use_sequence_length` is true, `sequence_length` (N,): how many leading steps of each
sequence are real. Without it every sequence has the full length T.
"""
import numpy as np

from ..base import MXNetError, ShapeError
from .registry import register


def _lengths(xp, op, data, sequence_length, use_sequence_length, axis):
    """The valid length of each sequence as ints (N,), checked against the data."""
    if axis not in (0, 1):
        raise MXNetError(f"{op}: axis must be 0 (time first) or 1 (batch first), got {axis}")
    if data.ndim < 2:
        raise ShapeError(f"{op}: data needs a time and a batch axis, got shape {data.shape}")
    steps, batch = data.shape[axis], data.shape[1 - axis]
    if not use_sequence_length:
        return xp.full((batch,), steps, dtype=np.int64)
    if sequence_length is None:
        raise MXNetError(f"{op}: use_sequence_length=True needs sequence_length, an array of "
                         f"shape ({batch},)")
    if sequence_length.shape != (batch,):
        raise ShapeError(f"{op}: sequence_length has shape {sequence_length.shape}, but data "
                         f"{data.shape} holds a batch of {batch} (axis {1 - axis})")
    lengths = sequence_length.astype(np.int64)
    if bool((lengths < 0).any()) or bool((lengths > steps).any()):
        raise MXNetError(f"{op}: sequence_length values must lie in [0, {steps}] (the time "
                         f"axis of data {data.shape}), got {lengths.tolist()}")
    return lengths


def _time_batch_grid(xp, data, axis):
    """Step index t broadcastable against `data`, with the time axis at `axis`."""
    shape = [1] * data.ndim
    shape[axis] = data.shape[axis]
    return xp.arange(data.shape[axis]).reshape(shape)


def _per_batch(lengths, data, axis):
    shape = [1] * data.ndim
    shape[1 - axis] = data.shape[1 - axis]
    return lengths.reshape(shape)


@register("SequenceMask", inputs=("data", "sequence_length"))
def sequence_mask(xp, data, sequence_length=None, use_sequence_length=False, value=0.0,
                  axis=0):
    """Set the steps past each sequence's length to `value`.

    >>> nd.SequenceMask(x, nd.array([1, 3]), use_sequence_length=True)  # x: (T, 2, C)
    """
    lengths = _lengths(xp, "SequenceMask", data, sequence_length, use_sequence_length, axis)
    keep = _time_batch_grid(xp, data, axis) < _per_batch(lengths, data, axis)
    out = xp.where(keep, data, xp.asarray(value, dtype=data.dtype))
    return out, lambda dy: (dy * keep, None)


@register("SequenceLast", inputs=("data", "sequence_length"))
def sequence_last(xp, data, sequence_length=None, use_sequence_length=False, axis=0):
    """The last valid step of each sequence: (N, ...) from data (T, N, ...) for axis 0."""
    lengths = _lengths(xp, "SequenceLast", data, sequence_length, use_sequence_length, axis)
    if bool((lengths < 1).any()):
        raise MXNetError(f"SequenceLast: every sequence needs at least one step, got lengths "
                         f"{lengths.tolist()}")
    batch = xp.arange(data.shape[1 - axis])
    last = lengths - 1
    out = data[last, batch] if axis == 0 else data[batch, last]

    def backward(dy):
        dx = xp.zeros_like(data)
        if axis == 0:
            dx[last, batch] = dy
        else:
            dx[batch, last] = dy
        return dx, None
    return out, backward


def _reversed_index(xp, lengths, steps):
    """(T, N) source step for each output step: the first length[n] steps reversed."""
    t = xp.arange(steps).reshape(-1, 1)
    flipped = lengths.reshape(1, -1) - 1 - t
    return xp.where(t < lengths.reshape(1, -1), flipped, t)


@register("SequenceReverse", inputs=("data", "sequence_length"))
def sequence_reverse(xp, data, sequence_length=None, use_sequence_length=False, axis=0):
    """Reverse the first sequence_length[n] steps of each sequence; padding stays put.
    Only axis=0 (time first), as in MXNet."""
    if axis != 0:
        raise MXNetError(f"SequenceReverse: only axis=0 (time first) is supported, got {axis}; "
                         "swap the axes first")
    lengths = _lengths(xp, "SequenceReverse", data, sequence_length, use_sequence_length, 0)
    src = _reversed_index(xp, lengths, data.shape[0])
    batch = xp.arange(data.shape[1]).reshape(1, -1)
    out = data[src, batch]

    def backward(dy):
        dx = xp.zeros_like(data)
        dx[src, batch] = dy          # the index is a permutation of each column
        return dx, None
    return out, backward
