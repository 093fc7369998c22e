"""MXNet's fused optimizer updates (`nd.sgd_update`, `nd.adam_update`, ...): one call per
weight that returns the new weight (pass `out=weight` to update it in place, as MXNet's
optimizers do) and updates its state arrays (momentum, moments, ...) in place. The formulas
are those of MXNet's operator documentation; they have no gradient.

Most ops first form the effective gradient g = clip(rescale_grad * grad, clip_gradient)
+ wd * weight (clip_gradient < 0: no clipping); adam, rmsprop and rmspropalex add the
weight decay before clipping, signsgd ignores rescale_grad and clip_gradient and decays the
weight multiplicatively, as MXNet's kernels do."""
from ..base import MXNetError, ShapeError
from . import device_update
from .device_kernels import device_kernels
from .registry import register


def _effective_grad(xp, weight, grad, rescale_grad, clip_gradient, wd):
    g = rescale_grad * grad
    if clip_gradient is not None and clip_gradient >= 0:
        g = xp.clip(g, -clip_gradient, clip_gradient)
    return g + wd * weight


def _decayed_then_clipped(xp, weight, grad, rescale_grad, clip_gradient, wd):
    g = rescale_grad * grad + wd * weight
    if clip_gradient is not None and clip_gradient >= 0:
        g = xp.clip(g, -clip_gradient, clip_gradient)
    return g


def _check(name, weight, *arrays):
    for a in arrays:
        if a.shape != weight.shape:
            raise ShapeError(f"{name}: every input must have the weight's shape {weight.shape}, "
                             f"got {a.shape}")


def _clip_weights(xp, w, clip_weights):
    return xp.clip(w, -clip_weights, clip_weights) if clip_weights >= 0 else w


@register("sgd_update", inputs=("weight", "grad"))
def sgd_update(xp, weight, grad, lr, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0,
               lazy_update=True):
    """weight - lr * g."""
    _check("sgd_update", weight, grad)
    new = device_update.sgd_op(device_kernels(xp, weight), weight, grad, None, lr, 0.0,
                               wd, rescale_grad, clip_gradient)
    if new is not None:
        return new, None
    return weight - lr * _effective_grad(xp, weight, grad, rescale_grad, clip_gradient, wd), None


@register("sgd_mom_update", inputs=("weight", "grad", "mom"))
def sgd_mom_update(xp, weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                   clip_gradient=-1.0, lazy_update=True):
    """mom = momentum * mom - lr * g (in place); returns weight + mom."""
    _check("sgd_mom_update", weight, grad, mom)
    new = device_update.sgd_op(device_kernels(xp, weight), weight, grad, mom, lr,
                               momentum, wd, rescale_grad, clip_gradient)
    if new is not None:
        return new, None
    g = _effective_grad(xp, weight, grad, rescale_grad, clip_gradient, wd)
    mom[...] = momentum * mom - lr * g
    return weight + mom, None


@register("nag_mom_update", inputs=("weight", "grad", "mom"))
def nag_mom_update(xp, weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                   clip_gradient=-1.0):
    """Nesterov momentum: mom = momentum * mom - lr * g (in place); returns
    weight + momentum * mom - lr * g (the step taken from the look-ahead point)."""
    _check("nag_mom_update", weight, grad, mom)
    new = device_update.nag_op(device_kernels(xp, weight), weight, grad, mom, lr,
                               momentum, wd, rescale_grad, clip_gradient)
    if new is not None:
        return new, None
    g = _effective_grad(xp, weight, grad, rescale_grad, clip_gradient, wd)
    mom[...] = momentum * mom - lr * g
    return weight + momentum * mom - lr * g, None


@register("signsgd_update", inputs=("weight", "grad"))
def signsgd_update(xp, weight, grad, lr, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0):
    """(1 - lr * wd) * weight - lr * sign(grad): only the gradient's sign counts, so
    rescale_grad and clip_gradient change nothing."""
    _check("signsgd_update", weight, grad)
    return (1 - lr * wd) * weight - lr * xp.sign(grad), None


@register("signum_update", inputs=("weight", "grad", "mom"))
def signum_update(xp, weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                  clip_gradient=-1.0, wd_lh=0.0):
    """mom = momentum * mom - (1 - momentum) * g (in place: MXNet keeps the negated
    average); returns (1 - lr * wd_lh) * weight + lr * sign(mom)."""
    _check("signum_update", weight, grad, mom)
    g = _effective_grad(xp, weight, grad, rescale_grad, clip_gradient, wd)
    mom[...] = momentum * mom - (1 - momentum) * g
    return (1 - lr * wd_lh) * weight + lr * xp.sign(mom), None


@register("adam_update", inputs=("weight", "grad", "mean", "var"))
def adam_update(xp, weight, grad, mean, var, lr, beta1=0.9, beta2=0.999, epsilon=1e-8, wd=0.0,
                rescale_grad=1.0, clip_gradient=-1.0, lazy_update=True):
    """mean and var, the moving first and second moments of g, are updated in place;
    returns weight - lr * mean / (sqrt(var) + epsilon) (no bias correction: the caller
    folds it into lr, as MXNet's Adam does)."""
    _check("adam_update", weight, grad, mean, var)
    new = device_update.adam_op(device_kernels(xp, weight), weight, grad, mean, var, lr,
                                beta1, beta2, epsilon, wd, rescale_grad, clip_gradient)
    if new is not None:
        return new, None
    g = _decayed_then_clipped(xp, weight, grad, rescale_grad, clip_gradient, wd)
    mean[...] = beta1 * mean + (1 - beta1) * g
    var[...] = beta2 * var + (1 - beta2) * g * g
    return weight - lr * mean / (xp.sqrt(var) + epsilon), None


@register("rmsprop_update", inputs=("weight", "grad", "n"))
def rmsprop_update(xp, weight, grad, n, lr, gamma1=0.95, epsilon=1e-8, wd=0.0, rescale_grad=1.0,
                   clip_gradient=-1.0, clip_weights=-1.0):
    """n = gamma1 * n + (1 - gamma1) * g^2 (in place); returns
    weight - lr * g / sqrt(n + epsilon), clipped to +-clip_weights when that is >= 0."""
    _check("rmsprop_update", weight, grad, n)
    g = _decayed_then_clipped(xp, weight, grad, rescale_grad, clip_gradient, wd)
    n[...] = gamma1 * n + (1 - gamma1) * g * g
    return _clip_weights(xp, weight - lr * g / xp.sqrt(n + epsilon), clip_weights), None


@register("rmspropalex_update", inputs=("weight", "grad", "n", "g", "delta"))
def rmspropalex_update(xp, weight, grad, n, g, delta, lr, gamma1=0.95, gamma2=0.9,
                       epsilon=1e-8, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0,
                       clip_weights=-1.0):
    """Graves' centered RMSProp: n and g, moving averages of grad^2 and grad, and the step
    delta = gamma2 * delta - lr * grad / sqrt(n - g^2 + epsilon) are updated in place;
    returns weight + delta (clipped as in rmsprop_update)."""
    _check("rmspropalex_update", weight, grad, n, g, delta)
    eg = _decayed_then_clipped(xp, weight, grad, rescale_grad, clip_gradient, wd)
    n[...] = gamma1 * n + (1 - gamma1) * eg * eg
    g[...] = gamma1 * g + (1 - gamma1) * eg
    delta[...] = gamma2 * delta - lr * eg / xp.sqrt(n - g * g + epsilon)
    return _clip_weights(xp, weight + delta, clip_weights), None


@register("ftrl_update", inputs=("weight", "grad", "z", "n"))
def ftrl_update(xp, weight, grad, z, n, lr, lamda1=0.01, beta=1.0, wd=0.0, rescale_grad=1.0,
                clip_gradient=-1.0):
    """Follow-the-regularized-leader: z and n are updated in place from the rescaled,
    clipped gradient (wd enters the closed-form weight, not g); returns
    (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd) where |z| > lamda1, else 0."""
    _check("ftrl_update", weight, grad, z, n)
    g = _effective_grad(xp, weight, grad, rescale_grad, clip_gradient, 0.0)
    z[...] = z + g - (xp.sqrt(n + g * g) - xp.sqrt(n)) * weight / lr
    n[...] = n + g * g
    w = (xp.sign(z) * lamda1 - z) / ((beta + xp.sqrt(n)) / lr + wd)
    return w * (xp.abs(z) > lamda1), None


@register("_sparse_adagrad_update", inputs=("weight", "grad", "history"),
          aliases=("adagrad_update",))
def sparse_adagrad_update(xp, weight, grad, history, lr, epsilon=1e-7, wd=0.0, rescale_grad=1.0,
                          clip_gradient=-1.0):
    """AdaGrad (`mx.nd.sparse.adagrad_update`): history += g^2 (in place) with the rescaled,
    clipped g; returns weight - lr * g / sqrt(history + epsilon). With a row_sparse grad only
    its rows change (ops_optimizer_sparse.py). It takes no weight decay, as in MXNet."""
    _check("adagrad_update", weight, grad, history)
    if wd:
        raise MXNetError(f"adagrad_update takes no weight decay (as MXNet's sparse "
                         f"adagrad_update), got wd={wd!r}; help: pass wd=0, or use "
                         "mx.optimizer.AdaGrad with a dense gradient for weight decay")
    g = _effective_grad(xp, weight, grad, rescale_grad, clip_gradient, 0.0)
    history += g * g
    return weight - lr * g / xp.sqrt(history + epsilon), None


@register("ftml_update", inputs=("weight", "grad", "d", "v", "z"))
def ftml_update(xp, weight, grad, d, v, z, lr, t, beta1=0.6, beta2=0.999, epsilon=1e-8, wd=0.0,
                rescale_grad=1.0, clip_grad=-1.0):
    """Follow the Moving Leader at step `t` (from 1): d, v and z are updated in place;
    returns -z / d. Here clip_grad bounds the whole g, weight decay included."""
    _check("ftml_update", weight, grad, d, v, z)
    if t < 1:
        raise ShapeError(f"ftml_update: t is the step number, starting at 1; got {t!r}")
    g = _effective_grad(xp, weight, grad, rescale_grad, -1.0, wd)
    if clip_grad >= 0:
        g = xp.clip(g, -clip_grad, clip_grad)
    v[...] = beta2 * v + (1 - beta2) * g * g
    d_t = (1 - beta1 ** t) / lr * (xp.sqrt(v / (1 - beta2 ** t)) + epsilon)
    z[...] = beta1 * z + (1 - beta1) * g - (d_t - beta1 * d) * weight
    d[...] = d_t
    return -z / d_t, None
