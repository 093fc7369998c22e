"""DropoutCell: dropout on a sequence's inputs, as a cell that can sit in a stack."""
import numbers

from ...base import MXNetError
from .rnn_cell import HybridRecurrentCell
from .sequence import format_sequence, is_merged

__all__ = ["DropoutCell"]


class DropoutCell(HybridRecurrentCell):
    """Applies dropout to its input in training; has no states and no parameters.

    Parameters
    ----------
    rate : float
        Fraction of elements dropped, in [0, 1).
    axes : tuple of int, default ()
        Axes along which one dropout mask is shared (() draws every element).

    Inputs:
        - **data**: (N, C) for a step.
        - **states**: [] (passed through).
    Outputs:
        - **out**: of the input's shape; **next_states**: the states given.

    Example::

        stack.add(gluon.rnn.DropoutCell(0.5))
    """

    def __init__(self, rate, axes=(), prefix=None, params=None):
        if not isinstance(rate, numbers.Real) or not 0 <= rate < 1:
            raise MXNetError(f"DropoutCell: rate must be a number in [0, 1), got {rate!r}")
        super().__init__(prefix=prefix, params=params)
        self._rate = rate
        self._axes = tuple(axes)

    def state_info(self, batch_size=0):
        return []

    def _alias(self):
        return "dropout"

    def __repr__(self):
        return f"DropoutCell(rate={self._rate}, axes={self._axes})"

    def hybrid_forward(self, F, inputs, states):
        if self._rate > 0:
            inputs = F.Dropout(inputs, p=self._rate, axes=self._axes,
                               name=self._op_name("fwd"))
        return inputs, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """Drop out the whole sequence at once when it is (or is to be) one array;
        `valid_length` changes nothing, as dropped padding stays padding."""
        self.reset()
        inputs, _, F, _ = format_sequence(length, inputs, layout, merge_outputs)
        if is_merged(inputs):
            return self.hybrid_forward(F, inputs, begin_state or [])
        return super().unroll(length, inputs, begin_state, layout, merge_outputs)
