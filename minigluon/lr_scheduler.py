"""Learning-rate schedules (`mx.lr_scheduler`), with MXNet 1.x names and values.

A scheduler maps the optimizer's update count `num_update` to a learning rate:
`lr = scheduler(num_update)`. Every schedule can start with a warmup of `warmup_steps`
updates, rising linearly from `warmup_begin_lr` to `base_lr` ('linear') or holding
`warmup_begin_lr` ('constant').

Unlike MXNet, whose schedulers decay `base_lr` in place as they are called, these compute
the rate from `num_update` alone, so calling out of order, or resuming at a later update,
gives the same values MXNet gives when called in order.
"""
import bisect
import math

from .base import MXNetError

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler",
           "CosineScheduler"]


class LRSchedulerError(MXNetError, ValueError):
    """A schedule built from arguments that cannot describe a learning-rate schedule."""


def _check_int(owner, name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LRSchedulerError(f"{owner}: {name} must be an integer >= {minimum}, "
                               f"got {value!r}")


class LRScheduler:
    """Base class: warmup handling; subclasses give the rate after warmup.

    Parameters
    ----------
    base_lr : float
        The rate reached at the end of warmup, which the schedule then decays.
    warmup_steps : int
        Number of warmup updates (0 for none).
    warmup_begin_lr : float
        The rate at update 0 of the warmup; must not exceed `base_lr`.
    warmup_mode : {'linear', 'constant'}
        Rise linearly from `warmup_begin_lr` to `base_lr`, or hold `warmup_begin_lr`.
    """

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        name = type(self).__name__
        _check_int(name, "warmup_steps", warmup_steps, 0)
        if warmup_begin_lr > base_lr:
            raise LRSchedulerError(f"{name}: warmup_begin_lr ({warmup_begin_lr}) must not "
                                   f"exceed base_lr ({base_lr}); warmup rises towards base_lr")
        if warmup_mode not in ("linear", "constant"):
            raise LRSchedulerError(f"{name}: warmup_mode must be 'linear' or 'constant', "
                                   f"got {warmup_mode!r}")
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_mode = warmup_mode

    @property
    def warmup_final_lr(self):
        """The rate warmup ends at: `base_lr`."""
        return self.base_lr

    def get_warmup_lr(self, num_update):
        """The rate at update `num_update`, which must lie inside the warmup."""
        if not 0 <= num_update < self.warmup_steps:
            raise LRSchedulerError(f"get_warmup_lr: update {num_update} is outside the "
                                   f"warmup [0, {self.warmup_steps})")
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        rise = (self.warmup_final_lr - self.warmup_begin_lr) * num_update / self.warmup_steps
        return self.warmup_begin_lr + rise

    def __call__(self, num_update):
        """The learning rate to use for update number `num_update`."""
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        return self._after_warmup(num_update)

    def _after_warmup(self, num_update):
        raise NotImplementedError(f"{type(self).__name__} must define _after_warmup "
                                  "(or override __call__)")

    def __repr__(self):
        return f"{type(self).__name__}(base_lr={self.base_lr})"


class FactorScheduler(LRScheduler):
    """Multiply the rate by `factor` every `step` updates, never going below `stop_factor_lr`.

    The rate is `base_lr` multiplied by `factor` k times (one multiplication at a time, as
    MXNet does) with `k = (num_update - 1) // step`: the first decay applies from update
    `step + 1`.

    >>> sched = mx.lr_scheduler.FactorScheduler(step=10, factor=0.5, base_lr=1.0)
    >>> sched(10), sched(11)
    (1.0, 0.5)
    """

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01,
                 warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        _check_int("FactorScheduler", "step", step, 1)
        if not 0 <= factor <= 1:
            raise LRSchedulerError(f"FactorScheduler: factor must lie in [0, 1] so the rate "
                                   f"decreases, got {factor}")
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr

    def _after_warmup(self, num_update):
        decays = max(0, (num_update - 1) // self.step)
        return _decayed(self, decays, self.stop_factor_lr)


class MultiFactorScheduler(LRScheduler):
    """Multiply the rate by `factor` once past each update count in the list `step`.

    >>> sched = mx.lr_scheduler.MultiFactorScheduler(step=[5, 8], factor=0.5, base_lr=1.0)
    >>> sched(5), sched(6), sched(9)
    (1.0, 0.5, 0.25)
    """

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, (list, tuple)) or not step:
            raise LRSchedulerError(f"MultiFactorScheduler: step must be a non-empty list of "
                                   f"update counts, got {step!r}")
        for i, s in enumerate(step):
            _check_int("MultiFactorScheduler", f"step[{i}]", s, 1)
            if i and s <= step[i - 1]:
                raise LRSchedulerError(f"MultiFactorScheduler: step must be strictly "
                                       f"increasing, got {list(step)}")
        if not 0 <= factor <= 1:
            raise LRSchedulerError(f"MultiFactorScheduler: factor must lie in [0, 1] so the "
                                   f"rate decreases, got {factor}")
        self.step = list(step)
        self.factor = factor

    def _after_warmup(self, num_update):
        decays = bisect.bisect_left(self.step, num_update)   # steps strictly below num_update
        return _decayed(self, decays, 0.0)


def _decayed(sched, decays, floor):
    """sched.base_lr multiplied by sched.factor `decays` times, one multiplication at a time
    and raised to `floor` after each, as MXNet's schedulers do (so the last bits agree with
    theirs, unlike factor**k). The last answer is kept, so a run of increasing update
    counts costs one multiplication per decay in all."""
    count, lr = 0, sched.base_lr
    memo = getattr(sched, "_decay_memo", None)
    if memo and memo[0] == (sched.base_lr, sched.factor, floor) and memo[1] <= decays:
        count, lr = memo[1], memo[2]
    while count < decays and lr > floor:
        lr = max(lr * sched.factor, floor)
        count += 1
    sched._decay_memo = ((sched.base_lr, sched.factor, floor), decays, lr)
    return lr


class _AnnealScheduler(LRScheduler):
    """Shared by Poly and Cosine: anneal from base_lr to final_lr between warmup and max_update."""

    def __init__(self, max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr,
                 warmup_mode):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        name = type(self).__name__
        _check_int(name, "max_update", max_update, 1)
        if max_update < warmup_steps:
            raise LRSchedulerError(f"{name}: max_update ({max_update}) must be at least "
                                   f"warmup_steps ({warmup_steps})")
        self.max_update = max_update
        self.final_lr = final_lr

    @property
    def max_steps(self):
        """Number of annealing updates after warmup."""
        return self.max_update - self.warmup_steps

    def _after_warmup(self, num_update):
        if num_update >= self.max_update:
            return self.final_lr
        progress = (num_update - self.warmup_steps) / self.max_steps
        return self.final_lr + (self.base_lr - self.final_lr) * self._remaining(progress)

    def _remaining(self, progress):
        raise NotImplementedError


class PolyScheduler(_AnnealScheduler):
    """Polynomial decay: `final_lr + (base_lr - final_lr) * (1 - progress)**pwr`.

    `progress` runs from 0 after warmup to 1 at `max_update`; the rate stays at `final_lr`
    afterwards.

    >>> sched = mx.lr_scheduler.PolyScheduler(max_update=100, base_lr=1.0, pwr=2)
    >>> sched(50)
    0.25
    """

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0,
                 warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr,
                         warmup_mode)
        self.power = pwr

    def _remaining(self, progress):
        return (1.0 - progress) ** self.power


class CosineScheduler(_AnnealScheduler):
    """Cosine decay: `final_lr + (base_lr - final_lr) * (1 + cos(pi * progress)) / 2`.

    >>> sched = mx.lr_scheduler.CosineScheduler(max_update=100, base_lr=1.0)
    >>> sched(50)
    0.5
    """

    def __init__(self, max_update, base_lr=0.01, final_lr=0,
                 warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr,
                         warmup_mode)

    def _remaining(self, progress):
        return (1.0 + math.cos(math.pi * progress)) / 2.0
