"""VariationalDropoutCell: dropout whose mask is drawn once per sequence and reused at
every step (Gal and Ghahramani, 2016)."""
from ....base import MXNetError
from ...rnn.modifier_cell import ModifierCell, unlocked
from ...rnn.sequence import format_sequence, is_merged, mask_padded, module_of, start_states

__all__ = ["VariationalDropoutCell"]


class VariationalDropoutCell(ModifierCell):
    """Applies dropout to the inputs, the first state (h) and the outputs of `base_cell`,
    each with one mask for the whole sequence (the three masks are independent). Masks
    are drawn at the first step and kept until `reset()` (which `unroll` calls); in
    inference nothing is dropped.

    Parameters
    ----------
    base_cell : RecurrentCell
    drop_inputs, drop_states, drop_outputs : float in [0, 1), default 0 (no dropout)

    Example::

        cell = gluon.contrib.rnn.VariationalDropoutCell(gluon.rnn.LSTMCell(50),
                                                        drop_inputs=0.2, drop_outputs=0.2)
    """

    def __init__(self, base_cell, drop_inputs=0., drop_states=0., drop_outputs=0.):
        for name, p in (("drop_inputs", drop_inputs), ("drop_states", drop_states),
                        ("drop_outputs", drop_outputs)):
            if not 0 <= p < 1:
                raise MXNetError(f"VariationalDropoutCell: {name} must be in [0, 1), got {p}")
        if drop_states and not base_cell._can_step:
            raise MXNetError(f"VariationalDropoutCell: state dropout needs a cell that steps; "
                             f"{type(base_cell).__name__} does not, so wrap its cells instead")
        super().__init__(base_cell)
        self.drop_inputs, self.drop_states, self.drop_outputs = \
            drop_inputs, drop_states, drop_outputs
        self._masks = {}

    def _alias(self):
        return "vardrop"

    def reset(self):
        super().reset()
        self._masks = {}

    def __repr__(self):
        return (f"VariationalDropoutCell(p_in={self.drop_inputs}, p_state={self.drop_states}, "
                f"p_out={self.drop_outputs})")

    def _dropped(self, F, what, p, x):
        """x times this sequence's mask for `what` (drawn on first use)."""
        if not p:
            return x
        mask = self._masks.get(what)
        if mask is None or module_of(mask) is not F:   # a new sequence, or a trace begins
            mask = self._masks[what] = F.Dropout(F.ones_like(x), p=p)
        return x * mask

    def hybrid_forward(self, F, inputs, states):
        if self.drop_states:
            states = [self._dropped(F, "states", self.drop_states, states[0])] + \
                list(states[1:])
        inputs = self._dropped(F, "inputs", self.drop_inputs, inputs)
        output, states = self.base_cell(inputs, states)
        return self._dropped(F, "outputs", self.drop_outputs, output), states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """Without state dropout, drops the whole input and output sequences at once (one
        mask shared along time) around the base cell's unroll."""
        if self.drop_states:
            return super().unroll(length, inputs, begin_state, layout, merge_outputs,
                                  valid_length)
        self.reset()
        inputs, axis, F, batch_size = format_sequence(length, inputs, layout, True)
        states = begin_state if begin_state is not None else \
            start_states(self, F, inputs, batch_size, axis)
        if self.drop_inputs:
            inputs = F.Dropout(inputs, p=self.drop_inputs, axes=(axis,))
        with unlocked(self.base_cell) as cell:
            outputs, states = cell.unroll(length, inputs, states, layout, True, valid_length)
        if self.drop_outputs:
            outputs = F.Dropout(outputs, p=self.drop_outputs, axes=(axis,))
        merge = is_merged(outputs) if merge_outputs is None else merge_outputs
        outputs, _, _, _ = format_sequence(length, outputs, layout, merge)
        if valid_length is not None:
            outputs = mask_padded(F, outputs, length, valid_length, axis, merge)
        return outputs, states
