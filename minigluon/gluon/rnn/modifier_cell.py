"""Cells that wrap another cell and change what it does: ModifierCell (their base),
ResidualCell (output + input) and ZoneoutCell (randomly keep the previous values).

A wrapped cell is then used through its modifier only: calling its begin_state directly
is an error, and one cell cannot be wrapped twice.
"""
from contextlib import contextmanager

from ... import ndarray as nd
from ...base import MXNetError
from .rnn_cell import HybridRecurrentCell, check_unmodified
from .sequence import format_sequence, is_merged, mask_padded, module_of

__all__ = ["ModifierCell", "ResidualCell", "ZoneoutCell"]


@contextmanager
def unlocked(cell):
    """Let the modifier use its wrapped cell's own begin_state / unroll for a moment."""
    cell._modified = False
    try:
        yield cell
    finally:
        cell._modified = True


class ModifierCell(HybridRecurrentCell):
    """Base of the cells that modify `base_cell`; its states and parameters are the base
    cell's. A step runs imperatively (its wrapped cell may itself be hybridized), since
    modifiers such as ZoneoutCell carry values from one step to the next."""

    def __init__(self, base_cell):
        if base_cell._modified:
            raise MXNetError(f"cell {base_cell.name} is already wrapped by a modifier cell; "
                             "a cell can be modified only once")
        base_cell._modified = True
        super().__init__(prefix=base_cell.prefix + self._alias(), params=None)
        self.base_cell = base_cell

    @property
    def params(self):
        return self.base_cell.params

    def state_info(self, batch_size=0):
        return self.base_cell.state_info(batch_size)

    def begin_state(self, batch_size=0, func=nd.zeros, **kwargs):
        check_unmodified(self)
        with unlocked(self.base_cell) as cell:
            return cell.begin_state(batch_size, func, **kwargs)

    def forward(self, inputs, states):
        with self.name_scope():     # symbols named under this cell's prefix, as when traced
            return self.hybrid_forward(module_of(inputs), inputs, states)

    def hybrid_forward(self, F, inputs, states):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}({self.base_cell!r})"


class ResidualCell(ModifierCell):
    """Adds the input to the base cell's output (Wu et al., 2016); the input and output
    widths must match.

    Example::

        cell = gluon.rnn.ResidualCell(gluon.rnn.LSTMCell(100, input_size=100))
    """

    def hybrid_forward(self, F, inputs, states):
        output, states = self.base_cell(inputs, states)
        return F.elemwise_add(output, inputs, name=self._op_name("fwd")), states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """The base cell's unroll plus the inputs (padding masked to 0 with valid_length)."""
        self.reset()
        with unlocked(self.base_cell) as cell:
            outputs, states = cell.unroll(length, inputs, begin_state, layout, merge_outputs,
                                          valid_length)
        merge = is_merged(outputs) if merge_outputs is None else merge_outputs
        inputs, axis, F, _ = format_sequence(length, inputs, layout, merge)
        if valid_length is not None:
            inputs = mask_padded(F, inputs, length, valid_length, axis, merge)
        if merge:
            return F.elemwise_add(outputs, inputs), states
        return [F.elemwise_add(o, i) for o, i in zip(outputs, inputs)], states


class ZoneoutCell(ModifierCell):
    """Zoneout (Krueger et al., 2016): in training, each output and state element keeps its
    previous value with probability `zoneout_outputs` / `zoneout_states` instead of taking
    the new one. The first step's previous output is 0. In inference it is the base cell.

    Parameters
    ----------
    base_cell : RecurrentCell (not a BidirectionalCell, which cannot step)
    zoneout_outputs, zoneout_states : float in [0, 1)
    """

    def __init__(self, base_cell, zoneout_outputs=0., zoneout_states=0.):
        if not base_cell._can_step:
            raise MXNetError(f"ZoneoutCell: {type(base_cell).__name__} cannot step; wrap the "
                             "cells inside it in ZoneoutCells instead")
        for name, p in (("zoneout_outputs", zoneout_outputs),
                        ("zoneout_states", zoneout_states)):
            if not 0 <= p < 1:
                raise MXNetError(f"ZoneoutCell: {name} must be in [0, 1), got {p}")
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self._prev_output = None

    def _alias(self):
        return "zoneout"

    def __repr__(self):
        return (f"ZoneoutCell(p_out={self.zoneout_outputs}, p_state={self.zoneout_states}, "
                f"{self.base_cell!r})")

    def reset(self):
        super().reset()
        self._prev_output = None

    def hybrid_forward(self, F, inputs, states):
        output, new_states = self.base_cell(inputs, states)
        prev = self._prev_output
        if prev is None or module_of(prev) is not F:   # a new sequence, or a trace begins
            prev = F.zeros_like(output)
        if self.zoneout_outputs:
            output = _zoneout(F, self.zoneout_outputs, output, prev)
        if self.zoneout_states:
            new_states = [_zoneout(F, self.zoneout_states, new, old)
                          for new, old in zip(new_states, states)]
        self._prev_output = output
        return output, new_states


def _zoneout(F, p, new, old):
    """`new` where a dropout mask of rate p keeps it, else `old`."""
    keep = F.Dropout(F.ones_like(new), p=p)
    return F.where(keep, new, old)
