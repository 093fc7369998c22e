"""Nadam (MXNet's `Nadam`): Adam with Nesterov momentum and a momentum warm-up schedule."""
import math

import numpy as np

from ..ndarray.ndarray import NDArray
from .optimizer import Optimizer, check_range, register

__all__ = ["Nadam"]


@register
class Nadam(Optimizer):
    """Nesterov-accelerated Adam (Dozat, 2016), as MXNet 1.x computes it.

    At the t-th update, with `g = clip(rescale_grad * grad + wd * weight, clip_gradient)`,
    `mu_t = beta1 * (1 - 0.5 * 0.96**(t * schedule_decay))` and the running product
    `S_t = mu_1 * ... * mu_t`::

        m      = beta1 * m + (1 - beta1) * g
        v      = beta2 * v + (1 - beta2) * g**2
        m_bar  = (1 - mu_t) * g / (1 - S_t) + mu_{t+1} * m / (1 - S_t * mu_{t+1})
        weight = weight - lr * m_bar / (sqrt(v / (1 - beta2**t)) + epsilon)

    MXNet keeps one S for the whole optimizer, so its value depends on how many
    parameters were updated before; here each parameter has its own (the same when there
    is one parameter), kept in its state so that checkpoints carry it.

    Parameters
    ----------
    learning_rate : float
        Default 0.001.
    beta1, beta2 : float
        Decay rates, in [0, 1).
    epsilon : float
    schedule_decay : float
        How fast the momentum warms up to beta1.
    """

    default_learning_rate = 0.001

    def __init__(self, learning_rate=None, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 schedule_decay=0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_range("Nadam", "beta1", beta1, 0.0, 1.0, high_open=True)
        check_range("Nadam", "beta2", beta2, 0.0, 1.0, high_open=True)
        check_range("Nadam", "epsilon", epsilon, 0.0, math.inf)
        check_range("Nadam", "schedule_decay", schedule_decay, 0.0, math.inf)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.schedule_decay = schedule_decay

    def create_state(self, index, weight):
        ctx = weight.context
        with ctx.scope():
            schedule = NDArray(ctx.xp.ones(1, dtype=np.float64), ctx)     # S_t, from S_0 = 1
        return (self._zeros_like(weight), self._zeros_like(weight), schedule)

    def _momentum(self, t):
        return self.beta1 * (1.0 - 0.5 * 0.96 ** (t * self.schedule_decay))

    def _step(self, xp, index, weight, grad, state, lr, wd):
        t = self._index_update_count[index]
        mean, var, schedule = state
        g = self._rescaled_decayed(xp, grad, weight, wd)
        mu_t, mu_next = self._momentum(t), self._momentum(t + 1)
        product = float(schedule[0]) * mu_t
        schedule[0] = product
        mean *= self.beta1
        mean += (1.0 - self.beta1) * g
        var *= self.beta2
        var += (1.0 - self.beta2) * (g * g)
        m_bar = (1.0 - mu_t) / (1.0 - product) * g + \
            mu_next / (1.0 - product * mu_next) * mean
        v_hat = var / (1.0 - self.beta2 ** t)
        weight -= lr * m_bar / (xp.sqrt(v_hat) + self.epsilon)
