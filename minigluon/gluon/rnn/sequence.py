"""What `unroll` does to sequences before and after stepping a cell: split a sequence into
steps or merge steps into one array (NDArray or Symbol alike), build the starting states,
and mask or reverse padded sequences given their valid lengths.

A sequence is either one array with a time axis ('T' of the layout, e.g. (N, T, C) for
'NTC') or a list of T arrays (N, C).
"""
from ... import ndarray as nd
from ... import symbol as sym
from ...base import MXNetError, ShapeError
from ...symbol.symbol import Symbol


def module_of(x):
    """`mx.sym` for Symbols, `mx.nd` for arrays (x an array or a list of them)."""
    first = x[0] if isinstance(x, (list, tuple)) else x
    return sym if isinstance(first, Symbol) else nd


def is_merged(x):
    """True for one array or symbol (a whole sequence), False for a list of steps."""
    return not isinstance(x, (list, tuple))


def split_steps(F, seq, length, axis):
    """The `length` steps of `seq` along `axis`, that axis removed (always a list)."""
    parts = F.split(seq, num_outputs=length, axis=axis, squeeze_axis=True)
    if length == 1 and not isinstance(parts, (list, tuple)) and F is nd:
        return [parts]
    return [parts[i] for i in range(length)]


def _check_layout(layout):
    if not isinstance(layout, str) or "T" not in layout or "N" not in layout:
        raise MXNetError(f"unroll: layout must name a time and a batch axis, like 'NTC' or "
                         f"'TNC', got {layout!r}")


def format_sequence(length, inputs, layout, merge, in_layout=None):
    """(inputs, time axis, F, batch size) with `inputs` as a list of steps (merge False),
    one array with time on `layout`'s axis (merge True), or as given (merge None).

    `in_layout` is the layout of a merged `inputs` when it differs from `layout`.
    The batch size is 0 for Symbols, whose shapes are not known.
    """
    if inputs is None:
        raise MXNetError("unroll: inputs=None is not supported; give the input array, "
                         "symbol, or list of steps")
    _check_layout(layout)
    axis, batch_axis = layout.find("T"), layout.find("N")
    in_axis = in_layout.find("T") if in_layout is not None else axis
    F = module_of(inputs)
    if is_merged(inputs):
        if F is nd:
            if length is not None and inputs.shape[in_axis] != length:
                raise ShapeError(f"unroll: inputs of shape {inputs.shape} have "
                                 f"{inputs.shape[in_axis]} steps on axis {in_axis} "
                                 f"({in_layout or layout}), but length={length}")
            length = inputs.shape[in_axis]
        elif len(inputs) != 1:
            raise MXNetError(f"unroll: a grouped symbol of {len(inputs)} outputs is not a "
                             "sequence; pass list(symbol) for a list of steps")
        batch_size = inputs.shape[batch_axis] if F is nd else 0
        if merge is False:
            return split_steps(F, inputs, length, in_axis), axis, F, batch_size
        if axis != in_axis:
            inputs = F.swapaxes(inputs, dim1=axis, dim2=in_axis)
        return inputs, axis, F, batch_size
    inputs = list(inputs)
    if length is not None and len(inputs) != length:
        raise ShapeError(f"unroll: got {len(inputs)} input steps, but length={length}")
    batch_size = inputs[0].shape[0] if F is nd else 0
    if merge is True:
        inputs = F.stack(*inputs, axis=axis)
    return inputs, axis, F, batch_size


def first_step(inputs, axis):
    """An array or symbol with the batch on axis 0, to build states like it."""
    if not is_merged(inputs):
        return inputs[0]
    F = module_of(inputs)
    return F.squeeze(F.slice_axis(inputs, axis=axis, begin=0, end=1), axis=axis)


def zero_states_like(F, ref, infos):
    """Zero states shaped as `infos` ((N, ...) each), with N and dtype taken from `ref`
    (N, ...). Works on Symbols, whose batch size is only known when the graph runs."""
    column = F.slice_axis(F.reshape(ref, (0, -1)), axis=1, begin=0, end=1)
    zero = F.zeros_like(column)                                # (N, 1)
    states = []
    for info in infos:
        rest = tuple(info["shape"][1:])
        z = zero if len(rest) == 1 else F.reshape(zero, (0,) + (1,) * len(rest))
        states.append(F.broadcast_axis(z, axis=tuple(range(1, 1 + len(rest))), size=rest))
    return states


def start_states(cell, F, inputs, batch_size, axis):
    """`cell`'s zero states for a batch of `inputs` (arrays: begin_state on the inputs'
    device and dtype; symbols: zeros built from the inputs)."""
    ref = first_step(inputs, axis)
    if F is nd:
        return cell.begin_state(batch_size, ctx=ref.context, dtype=ref.dtype)
    return zero_states_like(F, ref, cell.state_info(0))


def mask_padded(F, data, length, valid_length, axis, merge):
    """`data` (a sequence) with the steps past each valid length set to 0, merged or as a
    list of steps as `merge` says."""
    if not is_merged(data):
        data = F.stack(*data, axis=axis)
    out = F.SequenceMask(data, sequence_length=valid_length, use_sequence_length=True,
                         axis=axis)
    return out if merge else split_steps(F, out, length, axis)


def last_valid(F, steps, valid_length):
    """From a list of per-step arrays, each sequence's value at its last valid step."""
    return F.SequenceLast(F.stack(*steps, axis=0), sequence_length=valid_length,
                          use_sequence_length=True, axis=0)


def reverse_steps(steps, length, valid_length=None):
    """The list of steps reversed in time; with valid lengths, only each sequence's valid
    steps are reversed and its padding stays at the end."""
    if valid_length is None:
        return list(reversed(steps))
    F = module_of(steps)
    flipped = F.SequenceReverse(F.stack(*steps, axis=0), sequence_length=valid_length,
                                use_sequence_length=True)
    return split_steps(F, flipped, length, 0)
