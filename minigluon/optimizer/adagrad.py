"""AdaGrad (MXNet's AdaGrad)."""
import math

from ..ndarray.sparse_storage import stype_of
from .optimizer import Optimizer, OptimizerError, check_range, lazy_storage, register

__all__ = ["AdaGrad"]


@register
class AdaGrad(Optimizer):
    """AdaGrad (Duchi et al., 2011): per-element rates from the sum of squared gradients.

    With `g = clip(rescale_grad * grad, clip_gradient)`::

        history = history + g**2
        weight  = weight - lr * (g / sqrt(history + eps) + wd * weight)

    Parameters
    ----------
    eps : float
        Added inside the square root for stability.

    A row_sparse gradient updates only the rows it stores (MXNet's sparse adagrad_update),
    and takes no weight decay.

    >>> opt = mx.optimizer.AdaGrad(learning_rate=0.1, eps=1e-7)
    """

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        check_range("AdaGrad", "eps", eps, 0.0, math.inf)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        return self._zeros_like(weight, stype=weight.stype)    # history of squared gradients

    def _lazy_rows(self, weight, state):
        return lazy_storage(weight, state)

    def _sparse_step(self, xp, index, weight, grad, state, lr, wd):
        if wd and stype_of(grad) == "row_sparse":
            raise OptimizerError(
                f"AdaGrad update of index {index!r}: a row_sparse gradient takes no weight "
                f"decay (as MXNet's sparse adagrad_update), got wd={wd}; help: set wd=0 (or "
                "wd_mult 0 for this parameter), or pass a dense gradient")
        super()._sparse_step(xp, index, weight, grad, state, lr, wd)

    def _step(self, xp, index, weight, grad, state, lr, wd):
        g = self._rescaled(xp, grad)
        state += g * g
        step = g / xp.sqrt(state + self.float_stable_eps)
        if wd:
            step += wd * weight
        weight -= lr * step
