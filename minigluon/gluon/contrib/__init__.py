"""`mx.gluon.contrib`: layers MXNet 1.x keeps outside gluon.nn (contrib.nn)."""
from . import nn  # noqa: F401
from . import rnn  # noqa: F401
