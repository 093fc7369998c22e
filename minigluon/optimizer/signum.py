"""Signum and signSGD (MXNet's `signum_update` / `signsgd_update`)."""
from ..ndarray.ops_optimizer_mp import signsgd_step, signum_step
from .optimizer import Optimizer, check_range, register

__all__ = ["Signum"]


@register
class Signum(Optimizer):
    """Step by the sign of the momentum (Bernstein et al., 2018).

    With `g = clip(rescale_grad * grad, clip_gradient)`::

        mom    = momentum * mom - (1 - momentum) * (g + wd * weight)
        weight = (1 - lr * wd_lh) * weight + lr * sign(mom)

    (the momentum holds the negated average, as MXNet's `signum_update` keeps it). With
    momentum 0 (signSGD) no state is kept and the step is
    `weight = (1 - lr * (wd + wd_lh)) * weight - lr * sign(grad)`.

    Parameters
    ----------
    learning_rate : float
        Default 0.01.
    momentum : float
        The momentum, in [0, 1).
    wd_lh : float
        Decoupled weight decay (Loshchilov & Hutter), applied to the weight directly.

    >>> opt = mx.optimizer.Signum(learning_rate=0.01, momentum=0.9, wd_lh=1e-4)
    """

    def __init__(self, learning_rate=None, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_range("Signum", "momentum", momentum, 0.0, 1.0, high_open=True)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index, weight):
        if self.momentum == 0.0:
            return None
        return self._zeros_like(weight, stype=weight.stype)

    def _step(self, xp, index, weight, grad, state, lr, wd):
        args = dict(wd=wd, rescale_grad=float(self.rescale_grad),
                    clip_gradient=self._clip_arg(), wd_lh=self.wd_lh)
        if state is None:
            signsgd_step(xp, weight, grad, lr, **args)
        else:
            signum_step(xp, weight, grad, state, lr, momentum=self.momentum, **args)
