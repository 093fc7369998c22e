"""FTRL-Proximal (MXNet's `Ftrl`), the online-learning rule with L1 sparsity."""
from ..ndarray.sparse_storage import stype_of
from .optimizer import Optimizer, check_range, register

__all__ = ["Ftrl"]


@register
class Ftrl(Optimizer):
    """Follow the regularized leader, proximal form (McMahan et al., 2013), as MXNet 1.x.

    With `g = clip(rescale_grad * grad, clip_gradient)`::

        z      = z + g - (sqrt(n + g**2) - sqrt(n)) * weight / lr
        n      = n + g**2
        weight = (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd)  where |z| > lamda1
                 0                                                      elsewhere

    Parameters
    ----------
    lamda1 : float
        L1 strength (MXNet's spelling).
    learning_rate : float
        Default 0.1.
    beta : float

    When the weight, its states and the gradient are all row_sparse, only the rows the
    gradient stores are updated (MXNet's sparse ftrl_update); otherwise every row.
    """

    default_learning_rate = 0.1

    def __init__(self, lamda1=0.01, learning_rate=None, beta=1, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_range("Ftrl", "lamda1", lamda1, 0.0, float("inf"))
        check_range("Ftrl", "beta", beta, 0.0, float("inf"))
        self.lamda1, self.beta = lamda1, beta

    def create_state(self, index, weight):
        return (self._zeros_like(weight, stype=weight.stype),     # z
                self._zeros_like(weight, stype=weight.stype))     # n

    def _lazy_rows(self, weight, state):
        return all(stype_of(a) == "row_sparse" for a in (weight,) + tuple(state))

    def _step(self, xp, index, weight, grad, state, lr, wd):
        z, n = state
        g = self._rescaled(xp, grad)
        z += g - (xp.sqrt(n + g * g) - xp.sqrt(n)) * weight / lr
        n += g * g
        shrunk = (xp.sign(z) * self.lamda1 - z) / ((self.beta + xp.sqrt(n)) / lr + wd)
        weight[...] = xp.where(xp.abs(z) > self.lamda1, shrunk, 0)
