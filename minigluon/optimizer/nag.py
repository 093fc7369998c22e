"""Nesterov accelerated gradient (MXNet's NAG)."""
from .optimizer import Optimizer, check_range, register

__all__ = ["NAG"]


@register
class NAG(Optimizer):
    """SGD with Nesterov momentum.

    With `g = clip(rescale_grad * grad, clip_gradient) + wd * weight`, one step is::

        mom    = momentum * mom + g
        weight = weight - lr * (g + momentum * mom)

    and without momentum `weight -= lr * g`.

    Parameters
    ----------
    momentum : float
        The momentum, in [0, 1); 0 keeps no state.

    >>> opt = mx.optimizer.NAG(learning_rate=0.1, momentum=0.9)
    """

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        check_range("NAG", "momentum", momentum, 0.0, 1.0, high_open=True)
        self.momentum = momentum

    def create_state(self, index, weight):
        return self._zeros_like(weight) if self.momentum != 0.0 else None

    def _step(self, xp, index, weight, grad, state, lr, wd):
        g = self._rescaled(xp, grad)
        if wd:
            g += wd * weight
        if state is not None:
            state *= self.momentum
            state += g
            g += self.momentum * state
        weight -= lr * g
