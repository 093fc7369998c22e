"""BidirectionalCell: one cell reads the sequence left to right, another right to left,
and their outputs are concatenated step by step."""
from ...base import MXNetError
from .rnn_cell import ChildStatesMixin, HybridRecurrentCell
from .sequence import (format_sequence, is_merged, mask_padded, reverse_steps,
                       start_states)

__all__ = ["BidirectionalCell"]


class BidirectionalCell(ChildStatesMixin, HybridRecurrentCell):
    """Runs `l_cell` forward and `r_cell` backward in time over a sequence; the output at
    each step is concat(l_output, r_output) on the feature axis. It can only be unrolled.

    Parameters
    ----------
    l_cell, r_cell : RecurrentCell
    output_prefix : str, default 'bi_'
        Prefix of the output names in a symbolic graph (`bi_t0`, ... or `bi_out`).

    States: l_cell's states followed by r_cell's. With `valid_length`, r_cell reads each
    sequence from its last valid step back to its first.
    """

    _can_step = False

    def __init__(self, l_cell, r_cell, output_prefix="bi_"):
        super().__init__(prefix="", params=None)
        self.register_child(l_cell, "l_cell")
        self.register_child(r_cell, "r_cell")
        self._output_prefix = output_prefix

    def __call__(self, inputs, states):
        raise MXNetError("BidirectionalCell cannot be stepped; call unroll(length, inputs)")

    def __repr__(self):
        return (f"BidirectionalCell(forward={self._children['l_cell']!r}, "
                f"backward={self._children['r_cell']!r})")

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """As RecurrentCell.unroll; each output has both cells' features (l first)."""
        self.reset()
        steps, axis, F, batch_size = format_sequence(length, inputs, layout, False)
        states = begin_state if begin_state is not None else \
            start_states(self, F, steps, batch_size, axis)
        l_cell, r_cell = self._children["l_cell"], self._children["r_cell"]
        n_left = len(l_cell.state_info())
        l_out, l_states = l_cell.unroll(length, steps, states[:n_left], layout,
                                        merge_outputs, valid_length)
        r_out, r_states = r_cell.unroll(length, reverse_steps(steps, length, valid_length),
                                        states[n_left:], layout, False, valid_length)
        r_out = reverse_steps(r_out, length, valid_length)
        merge = is_merged(l_out) if merge_outputs is None else merge_outputs
        l_out, _, _, _ = format_sequence(length, l_out, layout, merge)
        if merge:
            outputs = F.concat(l_out, F.stack(*r_out, axis=axis), dim=2,
                               name=f"{self._output_prefix}out")
        else:
            outputs = [F.concat(left, right, dim=1, name=f"{self._output_prefix}t{i}")
                       for i, (left, right) in enumerate(zip(l_out, r_out))]
        if valid_length is not None:
            outputs = mask_padded(F, outputs, length, valid_length, axis, merge)
        return outputs, l_states + r_states
