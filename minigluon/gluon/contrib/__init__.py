"""`mx.gluon.contrib`: layers MXNet 1.x keeps outside gluon.nn (contrib.nn, contrib.rnn) and
the Estimator training loop (contrib.estimator)."""
from . import nn  # noqa: F401
from . import rnn  # noqa: F401
from . import estimator  # noqa: F401
