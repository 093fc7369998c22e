"""LAMB (MXNet's `LAMB`): Adam's direction scaled per layer by ||weight|| / ||direction||,
for training with very large batches (You et al., 2019)."""
import math

from .optimizer import Optimizer, check_range, register

__all__ = ["LAMB"]


@register
class LAMB(Optimizer):
    """Layer-wise adaptive moments, as MXNet 1.x computes it.

    At the t-th update, with `g = clip(rescale_grad * grad, clip_gradient)`::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        (m_hat, v_hat) = (m / (1 - beta1**t), v / (1 - beta2**t)) if bias_correction
        d = m_hat / (sqrt(v_hat) + epsilon) + wd * weight
        r1 = ||weight|| clipped to [lower_bound, upper_bound] where given;  r2 = ||d||
        weight = weight - lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1) * d

    Parameters
    ----------
    learning_rate : float
        Default 0.001.
    beta1, beta2 : float
    epsilon : float
        Default 1e-6.
    lower_bound, upper_bound : float or None
        Bounds on ||weight|| in the trust ratio.
    bias_correction : bool
    """

    default_learning_rate = 0.001
    layerwise = True

    def __init__(self, learning_rate=None, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 lower_bound=None, upper_bound=None, bias_correction=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_range("LAMB", "beta1", beta1, 0.0, 1.0, high_open=True)
        check_range("LAMB", "beta2", beta2, 0.0, 1.0, high_open=True)
        check_range("LAMB", "epsilon", epsilon, 0.0, math.inf)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        self.bias_correction = bias_correction

    def create_state(self, index, weight):
        return (self._zeros_like(weight, stype=weight.stype),     # mean
                self._zeros_like(weight, stype=weight.stype))     # variance

    def _step(self, xp, index, weight, grad, state, lr, wd):
        t = self._index_update_count[index]
        mean, var = state
        g = self._rescaled(xp, grad)
        mean *= self.beta1
        mean += (1.0 - self.beta1) * g
        var *= self.beta2
        var += (1.0 - self.beta2) * (g * g)
        m_hat, v_hat = mean, var
        if self.bias_correction:
            m_hat = mean / (1.0 - self.beta1 ** t)
            v_hat = var / (1.0 - self.beta2 ** t)
        direction = m_hat / (xp.sqrt(v_hat) + self.epsilon)
        if wd:
            direction += wd * weight
        r1 = float(xp.linalg.norm(weight))
        if self.lower_bound is not None:
            r1 = max(r1, self.lower_bound)
        if self.upper_bound is not None:
            r1 = min(r1, self.upper_bound)
        r2 = float(xp.linalg.norm(direction))
        ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
        weight -= (lr * ratio) * direction
