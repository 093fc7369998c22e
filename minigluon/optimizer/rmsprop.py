"""RMSProp, plain (Tieleman & Hinton) or centered (Graves), as MXNet computes them."""
import math

from .optimizer import Optimizer, check_range, register

__all__ = ["RMSProp"]


@register
class RMSProp(Optimizer):
    """RMSProp. With `g = clip(rescale_grad * grad + wd * weight, clip_gradient)`:

    plain (`centered=False`)::

        n      = (1 - gamma1) * g**2 + gamma1 * n
        weight = weight - lr * g / sqrt(n + epsilon)

    centered (`centered=True`, Graves 2013)::

        n      = (1 - gamma1) * g**2 + gamma1 * n
        m      = (1 - gamma1) * g + gamma1 * m
        delta  = gamma2 * delta - lr * g / sqrt(n - m**2 + epsilon)
        weight = weight + delta

    then, if `clip_weights` is set, the weight is clipped to [-clip_weights, clip_weights].

    Parameters
    ----------
    learning_rate : float
        Default 0.001.
    gamma1 : float
        Decay of the running averages, in [0, 1].
    gamma2 : float
        Momentum of the centered version, in [0, 1].
    epsilon : float
        Added inside the square root.
    centered : bool
        Use Graves's centered version.
    clip_weights : float, optional
        Clip weights after each step; None or <= 0 is off.

    >>> opt = mx.optimizer.RMSProp(learning_rate=1e-3, gamma1=0.9, centered=True)
    """

    default_learning_rate = 0.001

    def __init__(self, learning_rate=None, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                 centered=False, clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_range("RMSProp", "gamma1", gamma1, 0.0, 1.0)
        check_range("RMSProp", "gamma2", gamma2, 0.0, 1.0)
        check_range("RMSProp", "epsilon", epsilon, 0.0, math.inf)
        self.gamma1, self.gamma2, self.epsilon = gamma1, gamma2, epsilon
        self.centered = centered
        self.clip_weights = clip_weights

    def create_state(self, index, weight):
        count = 3 if self.centered else 1      # n, then m and delta when centered
        return tuple(self._zeros_like(weight, stype=weight.stype) for _ in range(count))

    def _step(self, xp, index, weight, grad, state, lr, wd):
        g = self._rescaled_decayed(xp, grad, weight, wd)
        n = state[0]
        n *= self.gamma1
        n += (1.0 - self.gamma1) * (g * g)
        if self.centered:
            self._centered_step(xp, weight, g, state, lr)
        else:
            weight -= lr * g / xp.sqrt(n + self.epsilon)
        if self.clip_weights is not None and self.clip_weights > 0:
            xp.clip(weight, -self.clip_weights, self.clip_weights, out=weight)

    def _centered_step(self, xp, weight, g, state, lr):
        n, m, delta = state
        m *= self.gamma1
        m += (1.0 - self.gamma1) * g
        delta *= self.gamma2
        delta -= lr * g / xp.sqrt(n - m * m + self.epsilon)
        weight += delta
