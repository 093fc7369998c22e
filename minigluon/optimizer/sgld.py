"""SGLD (MXNet's `SGLD`): stochastic gradient Langevin dynamics."""
import math

from ..ndarray import random as nd_random
from .optimizer import Optimizer, register

__all__ = ["SGLD"]


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics (Welling and Teh, 2011): half a gradient step
    plus Gaussian noise whose variance is the learning rate, so the weights sample the
    posterior instead of settling at its mode.

    With `g = clip(rescale_grad * grad, clip_gradient)`, one step is::

        weight = weight - lr / 2 * (g + wd * weight) + normal(0, sqrt(lr))

    The noise comes from `mx.random.normal`, so `mx.random.seed` makes a run repeatable.
    No state is kept.

    >>> opt = mx.optimizer.SGLD(learning_rate=1e-3)
    """

    def _step(self, xp, index, weight, grad, state, lr, wd):
        g = self._rescaled(xp, grad)
        noise = nd_random.normal(0, math.sqrt(lr), shape=weight.shape, dtype=weight.dtype)
        weight += -lr / 2 * (g + wd * weight) + noise._data
