"""Adam (MXNet's `adam_update`, with bias correction folded into the learning rate)."""
import math

import numpy as np

import minigluon_ext as ext

from ..ndarray import device_update
from ..ndarray.device_kernels import device_kernels
from .optimizer import Optimizer, check_range, register, lazy_storage

__all__ = ["Adam"]


@register
class Adam(Optimizer):
    """The Adam optimizer (Kingma & Ba, 2014), as MXNet 1.x computes it.

    At the t-th update of a parameter, with `g = clip(rescale_grad * grad + wd * weight,
    clip_gradient)` (weight decay enters before clipping)::

        lr_t   = lr * sqrt(1 - beta2**t) / (1 - beta1**t)
        m      = beta1 * m + (1 - beta1) * g
        v      = beta2 * v + (1 - beta2) * g**2
        weight = weight - lr_t * m / (sqrt(v) + epsilon)

    Parameters
    ----------
    learning_rate : float
        Default 0.001.
    beta1, beta2 : float
        Decay rates of the first and second moment estimates, in [0, 1).
    epsilon : float
        Added to the denominator for stability.
    lazy_update : bool
        With a row_sparse gradient, update only the rows it stores (mean, variance and
        weight) when the states are in the weight's storage type; False updates every row,
        as a dense gradient would. The states are created in the weight's storage type when
        True, dense when False (as in MXNet).

    >>> opt = mx.optimizer.Adam(learning_rate=1e-3, beta1=0.9, beta2=0.999)
    """

    default_learning_rate = 0.001

    def __init__(self, learning_rate=None, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_range("Adam", "beta1", beta1, 0.0, 1.0, high_open=True)
        check_range("Adam", "beta2", beta2, 0.0, 1.0, high_open=True)
        check_range("Adam", "epsilon", epsilon, 0.0, math.inf)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        stype = weight.stype if self.lazy_update else "default"
        return (self._zeros_like(weight, stype=stype),     # mean
                self._zeros_like(weight, stype=stype))     # variance

    def _lazy_rows(self, weight, state):
        return self.lazy_update and lazy_storage(weight, state)

    def _step_rows(self, xp, index, weight, rows, grad, state, lr, wd):
        if not _in_place_rows(xp, weight, rows, grad, state):
            return False
        # the rows' gather, step and scatter in one pass: the bits of _step on them
        ext.rows_adam_update(weight, rows, grad, state[0], state[1], self._bias_corrected(
            index, lr), self.beta1, self.beta2, self.epsilon, wd, float(self.rescale_grad),
            self.clip_gradient)
        return True

    def _bias_corrected(self, index, lr):
        t = self._index_update_count[index]
        return lr * math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)

    def _step(self, xp, index, weight, grad, state, lr, wd):
        lr = self._bias_corrected(index, lr)
        mean, var = state
        kernels = device_kernels(xp, weight)           # None for NumPy arrays: one test
        if kernels is not None and self._step_on_device(kernels, weight, grad, state, lr, wd):
            return
        g = self._rescaled_decayed(xp, grad, weight, wd)
        mean *= self.beta1
        mean += (1.0 - self.beta1) * g
        var *= self.beta2
        var += (1.0 - self.beta2) * (g * g)
        weight -= lr * mean / (xp.sqrt(var) + self.epsilon)

    def _step_on_device(self, kernels, weight, grad, state, lr, wd):
        """The step (lr bias-corrected) by one GPU kernel, the bits of the lines above;
        False if the arrays do not fit it."""
        return device_update.adam_step(kernels, weight, grad, state[0], state[1], lr,
                                       self.beta1, self.beta2, self.epsilon, wd,
                                       float(self.rescale_grad), self.clip_gradient)


def _in_place_rows(xp, weight, rows, grad, state):
    """True when minigluon_ext.rows_adam_update can do a lazy step on the rows where they
    lie: contiguous host arrays of one dtype it takes, and int64 row ids."""
    if xp is not np or not isinstance(state, tuple) or len(state) != 2:
        return False
    arrays = (weight, grad) + state
    return all(type(a) is np.ndarray and a.flags.c_contiguous and a.dtype == weight.dtype
               for a in arrays) and weight.dtype in ext.LAYER_DTYPES and \
        type(rows) is np.ndarray and rows.dtype == np.int64
