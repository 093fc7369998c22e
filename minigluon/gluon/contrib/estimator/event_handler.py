"""`gluon.contrib.estimator.event_handler`: MXNet's module of event handlers. Each handler
lives in a file of its own; this module gathers them under the name MXNet code imports."""
from .checkpoint_handler import CheckpointHandler
from .early_stopping import EarlyStoppingHandler
from .events import BatchBegin, BatchEnd, EpochBegin, EpochEnd, EventHandler, TrainBegin
from .events import TrainEnd, check_event_handlers  # noqa: F401
from .logging_handler import LoggingHandler
from .loop_handlers import GradientUpdateHandler, MetricHandler, StoppingHandler
from .loop_handlers import ValidationHandler
from .tensorboard_handler import TensorBoardHandler

_check_event_handlers = check_event_handlers  # MXNet's private name, for code that used it

__all__ = ["TrainBegin", "TrainEnd", "EpochBegin", "EpochEnd", "BatchBegin", "BatchEnd",
           "EventHandler", "StoppingHandler", "MetricHandler", "ValidationHandler",
           "LoggingHandler", "CheckpointHandler", "EarlyStoppingHandler",
           "GradientUpdateHandler", "TensorBoardHandler"]
