"""AdaDelta (MXNet's AdaDelta)."""
import math

from .optimizer import Optimizer, check_range, register

__all__ = ["AdaDelta"]


@register
class AdaDelta(Optimizer):
    """AdaDelta (Zeiler, 2012): step sizes from running averages, no learning rate.

    With `g = clip(rescale_grad * grad, clip_gradient)`::

        acc_g     = rho * acc_g + (1 - rho) * g**2
        delta     = sqrt(acc_delta + epsilon) / sqrt(acc_g + epsilon) * g
        acc_delta = rho * acc_delta + (1 - rho) * delta**2
        weight    = weight - (delta + wd * weight)

    As in MXNet 1.x's implementation, the learning rate is not used and weight decay enters
    only the final step.

    Parameters
    ----------
    rho : float
        Decay rate of both running averages, in [0, 1].
    epsilon : float
        Added inside the square roots.

    >>> opt = mx.optimizer.AdaDelta(rho=0.9, epsilon=1e-5)
    """

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        check_range("AdaDelta", "rho", rho, 0.0, 1.0)
        check_range("AdaDelta", "epsilon", epsilon, 0.0, math.inf)
        self.rho, self.epsilon = rho, epsilon

    def create_state(self, index, weight):
        return (self._zeros_like(weight), self._zeros_like(weight))    # acc_g, acc_delta

    def _step(self, xp, index, weight, grad, state, lr, wd):
        acc_g, acc_delta = state
        g = self._rescaled(xp, grad)
        acc_g *= self.rho
        acc_g += (1.0 - self.rho) * (g * g)
        delta = xp.sqrt(acc_delta + self.epsilon) / xp.sqrt(acc_g + self.epsilon) * g
        acc_delta *= self.rho
        acc_delta += (1.0 - self.rho) * (delta * delta)
        if wd:
            delta += wd * weight
        weight -= delta
