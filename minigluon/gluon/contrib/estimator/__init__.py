"""`mx.gluon.contrib.estimator`: MXNet 1.9's Estimator (fit / evaluate loops driven by event
handlers), its handlers, BatchProcessor, and our TensorBoardHandler (see docs/estimator.md)."""
from . import batch_processor, estimator, event_handler  # noqa: F401
from .batch_processor import *  # noqa: F401,F403
from .estimator import *  # noqa: F401,F403
from .event_handler import *  # noqa: F401,F403
from .tensorboard_handler import summary_writer  # noqa: F401
