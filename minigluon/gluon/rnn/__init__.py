"""`mx.gluon.rnn`: recurrent cells (RNNCell, LSTMCell, GRUCell, stacks) and layers (RNN,
LSTM, GRU)."""
from .rnn_cell import (GRUCell, HybridRecurrentCell, HybridSequentialRNNCell,  # noqa: F401
                       LSTMCell, RecurrentCell, RNNCell, SequentialRNNCell)
from .rnn_layer import GRU, LSTM, RNN  # noqa: F401
from .bidirectional_cell import BidirectionalCell  # noqa: F401
from .dropout_cell import DropoutCell  # noqa: F401
from .modifier_cell import ModifierCell, ResidualCell, ZoneoutCell  # noqa: F401
