"""LARS (MXNet's `LARS`): SGD whose rate is scaled per layer by eta * ||weight|| /
(||gradient|| + wd * ||weight||), for training with very large batches (You et al., 2017)."""
import math

from .optimizer import Optimizer, check_range, register
from .sgd import SGD

__all__ = ["LARS"]

# parameters whose names end so keep the plain rate, as in MXNet (norms and biases)
_PLAIN = ("gamma", "beta", "bias")


@register
class LARS(SGD):
    """Layer-wise adaptive rate scaling over SGD with momentum, as MXNet 1.x computes it.

    For a parameter not named *gamma, *beta or *bias, with `G = ||rescale_grad * grad||`
    and `W = ||weight||`, the step uses `lr * eta * W / (G + wd * W + epsilon)` when both
    norms are positive; then it is SGD (momentum, weight decay, clipping) with that rate.

    Parameters
    ----------
    learning_rate : float
        Default 0.1.
    momentum : float
    eta : float
        The trust coefficient, default 0.001.
    epsilon : float
    """

    default_learning_rate = 0.1
    layerwise = True

    def __init__(self, learning_rate=None, momentum=0.0, eta=0.001, epsilon=1e-8,
                 lazy_update=False, **kwargs):
        super().__init__(momentum=momentum, lazy_update=lazy_update,
                         learning_rate=learning_rate, **kwargs)
        check_range("LARS", "eta", eta, 0.0, math.inf)
        check_range("LARS", "epsilon", epsilon, 0.0, math.inf)
        self.eta, self.epsilon = eta, epsilon

    def _name(self, index):
        param = self.param_dict.get(index)
        if param is not None:
            return param.name
        return self.idx2name.get(index, str(index))

    def __getstate__(self):
        # the servers of a dist kvstore get a pickled copy without the Parameters: keep
        # their names, so that norms and biases keep the plain rate there too
        state = super().__getstate__()
        state["idx2name"] = {**self.idx2name,
                             **{i: p.name for i, p in self.param_dict.items()}}
        return state

    def _step(self, xp, index, weight, grad, state, lr, wd):
        if not self._name(index).endswith(_PLAIN):
            w_norm = float(xp.linalg.norm(weight))
            g_norm = float(xp.linalg.norm(grad)) * abs(float(self.rescale_grad))
            if w_norm > 0 and g_norm > 0:
                lr *= self.eta * w_norm / (g_norm + wd * w_norm + self.epsilon)
        super()._step(xp, index, weight, grad, state, lr, wd)
