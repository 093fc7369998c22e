"""The six moments of a training run an event handler can act on, as mixin classes.

A handler inherits the mixins of the moments it cares about; the estimator calls only
those methods. `batch_end` and `epoch_end` return True to stop training.
"""


class EventHandler:
    """Base class of every event handler."""


class TrainBegin(EventHandler):
    def train_begin(self, estimator, *args, **kwargs):
        """Called once before the first epoch."""


class TrainEnd(EventHandler):
    def train_end(self, estimator, *args, **kwargs):
        """Called once after the last epoch."""


class EpochBegin(EventHandler):
    def epoch_begin(self, estimator, *args, **kwargs):
        """Called before each epoch (or each evaluation pass)."""


class EpochEnd(EventHandler):
    def epoch_end(self, estimator, *args, **kwargs):
        """Called after each epoch; return True to stop training."""
        return False


class BatchBegin(EventHandler):
    def batch_begin(self, estimator, *args, **kwargs):
        """Called before each batch with `batch=`."""


class BatchEnd(EventHandler):
    def batch_end(self, estimator, *args, **kwargs):
        """Called after each batch with `batch`, `pred`, `label` and `loss`; return True to
        stop training."""
        return False


_MOMENTS = (TrainBegin, EpochBegin, BatchBegin, BatchEnd, EpochEnd, TrainEnd)


def check_event_handlers(handlers):
    """A new list of handlers from one handler, a list or None."""
    if isinstance(handlers, EventHandler):
        return [handlers]
    handlers = list(handlers or [])
    bad = [h for h in handlers if not isinstance(h, EventHandler)]
    if bad:
        raise ValueError(f"event_handlers must be an EventHandler or a list of them, got "
                         f"{bad!r}; help: subclass one of TrainBegin, EpochBegin, BatchBegin, "
                         "BatchEnd, EpochEnd, TrainEnd")
    return handlers


def categorize(handlers):
    """Six lists, one per moment (in _MOMENTS' order), of the handlers that act on it."""
    return tuple([h for h in handlers if isinstance(h, moment)] for moment in _MOMENTS)
