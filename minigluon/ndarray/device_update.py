"""The optimizer updates on a GPU: one kernel of minigluon_ext.gpu per step instead of the
five to ten elementwise passes (and temporaries) of the NumPy-style lines on CuPy arrays.

Each function takes the `Kernels` to run on, so the tests run this very path with the
CUDA sources compiled for the CPU (tests/ext/cuda_on_cpu.py) on NumPy arrays; the caller
passes `device_kernels(xp, weight)` (device_kernels.py, which picks the layers' kernels
too). Each returns False (or None) when there are no kernels (NumPy arrays, unless a test
set a stand-in) or the arrays do not fit them (float16, non-contiguous, mixed dtypes): the
caller then runs its NumPy-style lines, which are right on CuPy arrays too, only slower.
The kernels give the bits of those lines (cuda_src/update.cu).

>>> if sgd_step(device_kernels(xp, w), w, g, mom, lr, wd, 0.9, 1.0, None):
...     return                          # done by the kernel; else the NumPy-style lines
"""
import minigluon_ext as ext

__all__ = ["fits", "sgd_step", "sgd_scaled_step", "sgd_mom_step", "adam_step",
           "nag_step", "sgd_op", "adam_op", "nag_op"]


def fits(kernels, weight, *others):
    """True when there are kernels (not None) and they take these arrays (None entries
    aside): contiguous arrays of the backend, all of weight's dtype, float32 or float64."""
    if kernels is None:
        return False
    for a in (weight,) + others:
        if a is None:
            continue
        if not isinstance(a, kernels.xp.ndarray) or not a.flags.c_contiguous or \
                a.dtype != weight.dtype:
            return False
    return weight.dtype in ext.LAYER_DTYPES


def _op_clip(clip_gradient):
    """An operator's clip_gradient (< 0 off, >= 0 on) as the kernels take it (None off,
    > 0 on); False for 0, which clips every value to zero: the NumPy lines do that."""
    if clip_gradient is None or clip_gradient < 0:
        return None
    return clip_gradient if clip_gradient > 0 else False


# ---- the optimizers' steps (weight and states change in place) ----------------------------
def sgd_step(kernels, weight, grad, mom, lr, wd, momentum, rescale_grad, clip_gradient):
    """optimizer/sgd.py's step by one kernel; False when the arrays do not fit."""
    if not fits(kernels, weight, grad, mom):
        return False
    kernels.sgd_update(weight, grad, mom, lr, wd, momentum, rescale_grad, clip_gradient)
    return True


def adam_step(kernels, weight, grad, mean, var, lr, beta1, beta2, epsilon, wd, rescale_grad,
              clip_gradient):
    """optimizer/adam.py's step (lr bias-corrected) by one kernel; False when the arrays
    do not fit."""
    if not fits(kernels, weight, grad, mean, var):
        return False
    kernels.adam_update(weight, grad, mean, var, lr, beta1, beta2, epsilon, wd, rescale_grad,
                        clip_gradient)
    return True


def sgd_scaled_step(kernels, weight, grad, lr, wd, rescale_grad, clip_gradient):
    """ops_optimizer_mp.py's sgd_step (clip_gradient < 0: off) by one kernel; False when
    it does not fit."""
    clip = _op_clip(clip_gradient)
    if clip is False or not fits(kernels, weight, grad):
        return False
    kernels.sgd_scaled_update(weight, grad, lr, wd, rescale_grad, clip)
    return True


def sgd_mom_step(kernels, weight, grad, mom, lr, momentum, wd, rescale_grad, clip_gradient):
    """ops_optimizer_mp.py's sgd_mom_step (clip_gradient < 0: off; wd * weight always
    added, as the operators do) by one kernel; False when it does not fit."""
    clip = _op_clip(clip_gradient)
    if clip is False or not fits(kernels, weight, grad, mom):
        return False
    kernels.sgd_update(weight, grad, mom, lr, wd, momentum, rescale_grad, clip,
                       form="operator")
    return True


def nag_step(kernels, weight, grad, mom, lr, momentum, wd, rescale_grad, clip_gradient):
    """nag_mom_step (clip_gradient < 0: off) by one kernel; False when it does not fit."""
    clip = _op_clip(clip_gradient)
    if clip is False or not fits(kernels, weight, grad, mom):
        return False
    kernels.nag_mom_update(weight, grad, mom, lr, momentum, wd, rescale_grad, clip)
    return True


# ---- the nd.* operators (a new weight returned, states in place) --------------------------
def sgd_op(kernels, weight, grad, mom, lr, momentum, wd, rescale_grad, clip_gradient):
    """nd.sgd_update (mom None) or nd.sgd_mom_update: the new weight, or None when the
    arrays do not fit."""
    clip = _op_clip(clip_gradient)
    if clip is False or not fits(kernels, weight, grad, mom):
        return None
    return kernels.sgd_update(weight.copy(), grad, mom, lr, wd, momentum, rescale_grad, clip,
                              form="operator")


def adam_op(kernels, weight, grad, mean, var, lr, beta1, beta2, epsilon, wd, rescale_grad,
            clip_gradient):
    """nd.adam_update: the new weight, or None when the arrays do not fit."""
    clip = _op_clip(clip_gradient)
    if clip is False or not fits(kernels, weight, grad, mean, var):
        return None
    return kernels.adam_update(weight.copy(), grad, mean, var, lr, beta1, beta2, epsilon, wd,
                               rescale_grad, clip, form="operator")


def nag_op(kernels, weight, grad, mom, lr, momentum, wd, rescale_grad, clip_gradient):
    """nd.nag_mom_update: the new weight, or None when the arrays do not fit."""
    clip = _op_clip(clip_gradient)
    if clip is False or not fits(kernels, weight, grad, mom):
        return None
    return kernels.nag_mom_update(weight.copy(), grad, mom, lr, momentum, wd, rescale_grad,
                                  clip, form="operator")
