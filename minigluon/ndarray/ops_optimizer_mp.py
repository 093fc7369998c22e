"""The multi-precision and multi-tensor optimizer updates with MXNet 1.x names
(`nd.mp_sgd_update`, `nd.mp_sgd_mom_update`, `nd.mp_nag_mom_update`, `nd.multi_sgd_update`,
`nd.multi_sgd_mom_update`, `nd.multi_mp_sgd_update`, `nd.multi_mp_sgd_mom_update`) and
`nd.reset_arrays`; the single-weight updates are in ops_optimizer.py.

The `*_step` functions are the update rules on raw arrays of the array module `xp`, in
place; these operators and the optimizers in `minigluon.optimizer` both call them, so each
formula is written once. A negative `clip_gradient` (the default, -1) turns clipping off.

>>> mx.nd.mp_sgd_mom_update(w16, g16, mom, w32, lr=0.1, momentum=0.9, out=w16)
"""
from ..base import MXNetError
from . import device_update
from .device_kernels import device_kernels
from .registry import register

__all__ = ["clip_grad", "sgd_step", "sgd_mom_step", "nag_mom_step", "signsgd_step",
           "signum_step", "ftml_step"]


def clip_grad(xp, grad, rescale_grad, clip_gradient):
    """A new array `rescale_grad * grad`, clipped to +-clip_gradient when it is >= 0."""
    g = grad * rescale_grad
    if clip_gradient is not None and clip_gradient >= 0:
        xp.clip(g, -clip_gradient, clip_gradient, out=g)
    return g


def _check_lr(op, lr):
    if lr is None:
        raise MXNetError(f"{op}: lr is required; pass lr=<learning rate>")


# ---- the rules on raw arrays (each updates weight and state in place) -----------------
def sgd_step(xp, weight, grad, lr, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0):
    """weight = (1 - lr * wd) * weight - lr * clip(rescale_grad * grad)."""
    kernels = device_kernels(xp, weight)
    if kernels is not None and device_update.sgd_scaled_step(kernels, weight, grad, lr, wd,
                                                             rescale_grad, clip_gradient):
        return
    g = clip_grad(xp, grad, rescale_grad, clip_gradient)
    weight *= 1.0 - lr * wd
    weight -= lr * g


def sgd_mom_step(xp, weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                 clip_gradient=-1.0):
    """mom = momentum * mom - lr * (wd * weight + g); weight += mom."""
    kernels = device_kernels(xp, weight)
    if kernels is not None and device_update.sgd_mom_step(kernels, weight, grad, mom, lr,
                                                          momentum, wd, rescale_grad,
                                                          clip_gradient):
        return
    g = clip_grad(xp, grad, rescale_grad, clip_gradient)
    mom *= momentum
    mom -= lr * (g + wd * weight)
    weight += mom


def nag_mom_step(xp, weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                 clip_gradient=-1.0):
    """Nesterov, with gw = clip(rescale_grad * grad) + wd * w:
    mom = momentum * mom - lr * gw; w += momentum * mom - lr * gw."""
    kernels = device_kernels(xp, weight)
    if kernels is not None and device_update.nag_step(kernels, weight, grad, mom, lr, momentum,
                                                      wd, rescale_grad, clip_gradient):
        return
    g = clip_grad(xp, grad, rescale_grad, clip_gradient)
    g += wd * weight
    mom *= momentum
    mom -= lr * g
    weight += momentum * mom - lr * g


def signsgd_step(xp, weight, grad, lr, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0,
                 wd_lh=0.0):
    """weight = (1 - lr * (wd + wd_lh)) * weight - lr * sign(grad)."""
    weight *= 1.0 - lr * (wd + wd_lh)
    weight -= lr * xp.sign(grad)


def signum_step(xp, weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                clip_gradient=-1.0, wd_lh=0.0):
    """mom = momentum * mom - (1 - momentum) * (wd * w + g);
    w = (1 - lr * wd_lh) * w + lr * sign(mom)."""
    g = clip_grad(xp, grad, rescale_grad, clip_gradient)
    mom *= momentum
    mom -= (1.0 - momentum) * (g + wd * weight)
    weight *= 1.0 - lr * wd_lh
    weight += lr * xp.sign(mom)


def ftml_step(xp, weight, grad, d, v, z, lr, t, beta1=0.6, beta2=0.999, epsilon=1e-8,
              wd=0.0, rescale_grad=1.0, clip_grad=-1.0):
    """FTML at step t (from 1): v, d, z updated; weight = -z / d."""
    g = grad * rescale_grad + wd * weight
    if clip_grad is not None and clip_grad >= 0:
        xp.clip(g, -clip_grad, clip_grad, out=g)
    v *= beta2
    v += (1.0 - beta2) * g * g
    d_new = (1.0 - beta1 ** t) / lr * (xp.sqrt(v / (1.0 - beta2 ** t)) + epsilon)
    z *= beta1
    z += (1.0 - beta1) * g - (d_new - beta1 * d) * weight
    d[...] = d_new
    weight[...] = -z / d


def _fused(step, name, n_state, mp=False):
    """Register `name`: copy the weight, run `step` on the copy (and the state arrays),
    return the copy. With `mp`, the last input is a float32 master weight that the step
    runs on; the result is the master cast to the weight's dtype."""
    def op(xp, weight, grad, *rest, lr=None, lazy_update=True, **attrs):
        _check_lr(name, lr)
        states, master = (rest[:-1], rest[-1]) if mp else (rest, None)
        given = [s for s in states if s is not None]
        if len(given) != n_state or (mp and master is None):
            raise MXNetError(f"{name}: expected {n_state} state arrays"
                             f"{' and a float32 weight32' if mp else ''}, got {len(given)}; "
                             "pass them after weight and grad")
        if master is None:
            new = weight.copy()
            step(xp, new, grad, *states, float(lr), **attrs)
            return new, None
        step(xp, master, grad.astype(master.dtype), *states, float(lr), **attrs)
        return master.astype(weight.dtype), None
    op.__doc__ = f"MXNet's {name}: {step.__doc__}"
    return op


for _name, _step, _states, _names in [
        ("mp_sgd_update", sgd_step, 0, ("weight32",)),
        ("mp_sgd_mom_update", sgd_mom_step, 1, ("mom", "weight32")),
        ("mp_nag_mom_update", nag_mom_step, 1, ("mom", "weight32"))]:
    register(_name, inputs=("weight", "grad") + _names)(_fused(_step, _name, _states, True))


# ---- multi-tensor forms and reset_arrays ------------------------------------------------
def _multi(step, name, group, n_state, mp):
    """Register `name`: inputs are `group` arrays per weight (weight, grad, states...,
    [weight32]) for `num_weights` weights, with per-weight `lrs` and `wds`."""
    one = _fused(step, name, n_state, mp)

    def op(xp, *arrays, lrs=None, wds=None, num_weights=1, **attrs):
        if lrs is None or wds is None or len(arrays) != group * num_weights or \
                len(lrs) != num_weights or len(wds) != num_weights:
            raise MXNetError(f"{name}: expected {group} arrays per weight and one lr and wd "
                             f"each for num_weights={num_weights}; got {len(arrays)} arrays, "
                             f"lrs={lrs!r}, wds={wds!r}")
        outs = tuple(one(xp, *arrays[i * group:(i + 1) * group], lr=lrs[i], wd=wds[i],
                         **attrs)[0] for i in range(num_weights))
        return outs, None
    op.__doc__ = f"MXNet's {name}: {step.__doc__} (for num_weights weights at once)"
    register(name, variadic=True)(op)


_multi(sgd_step, "multi_sgd_update", 2, 0, False)
_multi(sgd_mom_step, "multi_sgd_mom_update", 3, 1, False)
_multi(sgd_step, "multi_mp_sgd_update", 3, 0, True)
_multi(sgd_mom_step, "multi_mp_sgd_mom_update", 4, 1, True)


@register("reset_arrays", variadic=True)
def reset_arrays(xp, *arrays, num_arrays=None):
    """MXNet's reset_arrays: set every input array to zero, in place; returns nothing."""
    if num_arrays is not None and num_arrays != len(arrays):
        raise MXNetError(f"reset_arrays: num_arrays={num_arrays} but {len(arrays)} arrays given")
    for a in arrays:
        a[...] = 0
    return (), None
