"""`mx.gluon.contrib.rnn`: LSTMPCell (LSTM with a projected output) and
VariationalDropoutCell (one dropout mask for all the steps of a sequence)."""
from .lstmp_cell import LSTMPCell  # noqa: F401
from .variational_dropout_cell import VariationalDropoutCell  # noqa: F401
