"""AdaMax (MXNet's `Adamax`): Adam with the infinity norm in place of the second moment."""
from .optimizer import Optimizer, check_range, register

__all__ = ["Adamax"]


@register
class Adamax(Optimizer):
    """AdaMax (Kingma & Ba, 2014, section 7), as MXNet 1.x computes it.

    At the t-th update, with `g = clip(rescale_grad * grad + wd * weight, clip_gradient)`::

        m      = beta1 * m + (1 - beta1) * g
        u      = maximum(beta2 * u, |g|)
        weight = weight - lr / (1 - beta1**t) * m / u

    Parameters
    ----------
    learning_rate : float
        Default 0.002.
    beta1, beta2 : float
        Decay rates, in [0, 1).

    >>> opt = mx.optimizer.Adamax(learning_rate=0.002)
    """

    default_learning_rate = 0.002

    def __init__(self, learning_rate=None, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_range("Adamax", "beta1", beta1, 0.0, 1.0, high_open=True)
        check_range("Adamax", "beta2", beta2, 0.0, 1.0, high_open=True)
        self.beta1, self.beta2 = beta1, beta2

    def create_state(self, index, weight):
        return (self._zeros_like(weight), self._zeros_like(weight))    # mean, max |g|

    def _step(self, xp, index, weight, grad, state, lr, wd):
        t = self._index_update_count[index]
        lr /= 1.0 - self.beta1 ** t
        mean, peak = state
        g = self._rescaled_decayed(xp, grad, weight, wd)
        mean *= self.beta1
        mean += (1.0 - self.beta1) * g
        xp.maximum(self.beta2 * peak, xp.abs(g), out=peak)
        weight -= lr * mean / peak
