"""Nesterov accelerated gradient (MXNet's NAG, `nag_mom_update`)."""
from ..ndarray.ops_optimizer_mp import nag_mom_step, sgd_step
from .optimizer import Optimizer, check_range, register

__all__ = ["NAG"]


@register
class NAG(Optimizer):
    """SGD with Nesterov momentum, in MXNet 1.x's form (the momentum holds lr-scaled steps).

    With `g = clip(rescale_grad * grad, clip_gradient) + wd * weight`, one step is::

        mom    = momentum * mom - lr * g
        weight = weight + momentum * mom - lr * g

    and without momentum `weight -= lr * g`. With multi_precision=True, float16 weights step
    on a float32 master copy; the state is then `(momentum or None, master)` as in MXNet.

    Parameters
    ----------
    momentum : float
        The momentum, in [0, 1); 0 keeps no state.

    >>> opt = mx.optimizer.NAG(learning_rate=0.1, momentum=0.9)
    """

    master_last = True

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        check_range("NAG", "momentum", momentum, 0.0, 1.0, high_open=True)
        self.momentum = momentum

    def create_state(self, index, weight):
        return self._zeros_like(weight) if self.momentum != 0.0 else None

    def _step(self, xp, index, weight, grad, state, lr, wd):
        args = dict(wd=wd, rescale_grad=float(self.rescale_grad),
                    clip_gradient=self._clip_arg())
        if state is None:
            sgd_step(xp, weight, grad, lr, **args)
        else:
            nag_mom_step(xp, weight, grad, state, lr, momentum=self.momentum, **args)
