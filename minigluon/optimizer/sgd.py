"""SGD with optional momentum (MXNet's `sgd_update` / `sgd_mom_update`)."""
import numpy as np

import minigluon_ext as ext

from ..ndarray import device_update
from ..ndarray.device_kernels import device_kernels
from .optimizer import Optimizer, check_range, register, lazy_storage

__all__ = ["SGD"]


@register
class SGD(Optimizer):
    """Stochastic gradient descent with momentum and weight decay.

    With `g = clip(rescale_grad * grad, clip_gradient)`, one step is::

        mom    = momentum * mom - lr * (g + wd * weight)
        weight = weight + mom

    and without momentum `weight -= lr * (g + wd * weight)`. With multi_precision=True,
    float16 weights step on a float32 master copy held in the state, which is then
    `(momentum or None, master)` as in MXNet.

    Parameters
    ----------
    momentum : float
        The momentum, in [0, 1); 0 keeps no state.
    lazy_update : bool
        With a row_sparse gradient, update only the rows it stores (their momentum and
        weight decay included) when the momentum is in the weight's storage type; False
        updates every row, as a dense gradient would. The momentum is created in the
        weight's storage type when True, dense when False (as in MXNet).

    >>> opt = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=1e-4)
    """

    master_last = True

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        check_range("SGD", "momentum", momentum, 0.0, 1.0, high_open=True)
        self.momentum = momentum
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        if self.momentum == 0.0:
            return None
        return self._zeros_like(weight, stype=weight.stype if self.lazy_update else "default")

    def _lazy_rows(self, weight, state):
        return self.lazy_update and not self.layerwise and lazy_storage(weight, state)

    def _step_rows(self, xp, index, weight, rows, grad, state, lr, wd):
        if not _in_place_rows(xp, weight, rows, grad, state):
            return False
        # the rows' gather, step and scatter in one pass: the bits of _step on them
        ext.rows_sgd_update(weight, rows, grad, state, lr, wd, self.momentum,
                            float(self.rescale_grad), self.clip_gradient)
        return True

    def _step(self, xp, index, weight, grad, state, lr, wd):
        kernels = device_kernels(xp, weight)           # None for NumPy arrays: one test
        if kernels is not None and self._step_on_device(kernels, weight, grad, state, lr, wd):
            return
        if _one_pass(xp, weight, grad, state):
            ext.sgd_update(weight, grad, state, lr, wd, self.momentum,
                           float(self.rescale_grad), self.clip_gradient)
            return
        g = self._rescaled(xp, grad)
        if wd:
            g += wd * weight
        if state is None:
            weight -= lr * g
            return
        state *= self.momentum
        state -= lr * g
        weight += state

    def _step_on_device(self, kernels, weight, grad, state, lr, wd):
        """The step by one GPU kernel (the bits of the lines above); False if the arrays
        do not fit it."""
        return device_update.sgd_step(kernels, weight, grad, state, lr, wd, self.momentum,
                                      float(self.rescale_grad), self.clip_gradient)


def _in_place_rows(xp, weight, rows, grad, state):
    """True when minigluon_ext.rows_sgd_update can do a lazy step on the rows where they
    lie: _one_pass's arrays, and int64 row ids."""
    return _one_pass(xp, weight, grad, state) and type(rows) is np.ndarray and \
        rows.dtype == np.int64 and rows.flags.c_contiguous


def _one_pass(xp, weight, grad, state):
    """True when minigluon_ext.sgd_update can do the step: contiguous host arrays of one
    dtype it takes (the same bits as the NumPy lines, in one pass instead of up to seven)."""
    arrays = (weight, grad) if state is None else (weight, grad, state)
    return xp is np and all(type(a) is np.ndarray and a.flags.c_contiguous and
                            a.dtype == weight.dtype for a in arrays) and \
        weight.dtype in ext.LAYER_DTYPES
