"""DCASGD (MXNet's `DCASGD`): SGD with delay compensation for asynchronous training."""
import math

from .optimizer import Optimizer, check_range, register

__all__ = ["DCASGD"]


@register
class DCASGD(Optimizer):
    """Delay-compensated asynchronous SGD (Zheng et al., 2016), as MXNet 1.x computes it.

    A gradient computed on an older weight is corrected towards the current one with a
    cheap diagonal Hessian estimate g * g. With `g = clip(rescale_grad * grad, clip_gradient)`
    and `previous` the weight after this parameter's last update::

        step     = -lr * (g + wd * weight + lamda * g * g * (weight - previous))
        mom      = momentum * mom + step        (step alone when momentum is 0)
        previous = weight
        weight   = weight + mom

    Parameters
    ----------
    momentum : float
        In [0, 1).
    lamda : float
        Strength of the delay compensation (MXNet's spelling).
    """

    def __init__(self, momentum=0.0, lamda=0.04, **kwargs):
        super().__init__(**kwargs)
        check_range("DCASGD", "momentum", momentum, 0.0, 1.0, high_open=True)
        check_range("DCASGD", "lamda", lamda, 0.0, math.inf)
        self.momentum, self.lamda = momentum, lamda

    def create_state(self, index, weight):
        mom = self._zeros_like(weight) if self.momentum != 0.0 else None
        return (mom, weight.copy())                      # momentum, previous weight

    def _step(self, xp, index, weight, grad, state, lr, wd):
        mom, previous = state
        g = self._rescaled(xp, grad)
        step = -lr * (g + wd * weight + self.lamda * g * g * (weight - previous))
        if mom is not None:
            mom *= self.momentum
            mom += step
            step = mom
        previous[...] = weight
        weight += step
