"""FTML (MXNet's `FTML`): follow the moving leader."""
import math

from ..ndarray.ops_optimizer_mp import ftml_step
from .optimizer import Optimizer, check_range, register

__all__ = ["FTML"]


@register
class FTML(Optimizer):
    """Follow the moving leader (Zheng and Kwok, 2017), as MXNet 1.x computes it.

    At the t-th update, with `g = clip(rescale_grad * grad + wd * weight, clip_gradient)`::

        v      = beta2 * v + (1 - beta2) * g**2
        d      = (1 - beta1**t) / lr * (sqrt(v / (1 - beta2**t)) + epsilon)
        z      = beta1 * z + (1 - beta1) * g - (d - beta1 * d_prev) * weight
        weight = -z / d,   d_prev = d

    Parameters
    ----------
    learning_rate : float
        Default 0.01 (MXNet's FTML takes the Optimizer default).
    beta1, beta2 : float
        In [0, 1).
    epsilon : float
    """

    def __init__(self, learning_rate=None, beta1=0.6, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_range("FTML", "beta1", beta1, 0.0, 1.0, high_open=True)
        check_range("FTML", "beta2", beta2, 0.0, 1.0, high_open=True)
        check_range("FTML", "epsilon", epsilon, 0.0, math.inf)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, index, weight):
        return tuple(self._zeros_like(weight) for _ in range(3))     # d_prev, v, z

    def _step(self, xp, index, weight, grad, state, lr, wd):
        d, v, z = state
        ftml_step(xp, weight, grad, d, v, z, lr, self._index_update_count[index],
                  beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon, wd=wd,
                  rescale_grad=float(self.rescale_grad), clip_grad=self._clip_arg())
