"""Random sampling (`mx.nd.random.*`) and the random state shared by every operator.

One generator per array module (numpy, cupy); `seed()` resets both, so a seeded run is
reproducible whatever devices it uses.
"""
import numpy as np

from ..base import ShapeError
from ..context import current_context
from .ndarray import NDArray

_generators = {}
_seed = None


class _Sampler:
    """The few draws minigluon needs, with one interface over numpy and cupy."""

    def __init__(self, xp, seed):
        self.xp = xp
        self.rng = np.random.default_rng(seed) if xp is np else xp.random.RandomState(seed)

    def uniform(self, low, high, size, dtype):
        if self.xp is np:
            return self.rng.uniform(low, high, size).astype(dtype, copy=False)
        return self.rng.uniform(low, high, size, dtype=dtype)

    def normal(self, loc, scale, size, dtype):
        return self.rng.normal(loc, scale, size).astype(dtype, copy=False)

    def integers(self, low, high, size, dtype):
        if self.xp is np:
            return self.rng.integers(low, high, size).astype(dtype, copy=False)
        return self.rng.randint(low, high, size).astype(dtype, copy=False)

    def permutation(self, n):
        return self.rng.permutation(n)

    def sample(self, name, params, size, dtype):
        """Another of NumPy's distributions by name (poisson, gamma, ...), in float64 and
        then cast; CuPy's RandomState has the same names and parameters."""
        return getattr(self.rng, name)(*params, size).astype(dtype, copy=False)


def generator(xp):
    """The shared sampler for array module `xp`."""
    if xp not in _generators:
        _generators[xp] = _Sampler(xp, _seed)
    return _generators[xp]


def seed(seed_state, ctx="all"):
    """Reset the random state of every device, so later draws repeat exactly."""
    global _seed
    if not isinstance(seed_state, (int, np.integer)):
        raise ShapeError(f"seed must be an int, got {seed_state!r}")
    _seed = int(seed_state)
    for xp in list(_generators):
        _generators[xp] = _Sampler(xp, _seed)


def _draw(fn, params, shape, dtype, ctx, out):
    """Sample with scalar params into `shape`, or per element of NDArray params."""
    arrays = [p for p in params if isinstance(p, NDArray)]
    if arrays:
        ctx = arrays[0].context
        raw = [p._data if isinstance(p, NDArray) else p for p in params]
        base = arrays[0].shape
        extra = () if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
        raw = [r.reshape(r.shape + (1,) * len(extra)) if hasattr(r, "shape") else r for r in raw]
        size = base + extra
    else:
        ctx = ctx or (out.context if out is not None else current_context())
        raw = list(params)
        size = () if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
        if out is not None and shape is None:
            size = out.shape
    dtype = np.dtype(dtype or (out.dtype if out is not None else np.float32))
    with ctx.scope():
        data = fn(generator(ctx.xp), raw, size, dtype)
    if out is not None:
        out._write_dense(data)     # a sparse out keeps its storage type
        return out
    return NDArray(data, ctx)


def uniform(low=0, high=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the uniform distribution on [low, high)."""
    return _draw(lambda g, p, s, d: g.uniform(p[0], p[1], s, d), (low, high), shape, dtype,
                 ctx, out)


def normal(loc=0, scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the normal distribution N(loc, scale^2)."""
    return _draw(lambda g, p, s, d: g.normal(p[0], p[1], s, d), (loc, scale), shape, dtype,
                 ctx, out)


def randn(*shape, loc=0, scale=1, dtype=None, ctx=None, **kwargs):
    """Standard normal samples of the given shape."""
    return normal(loc, scale, shape or None, dtype, ctx)


def randint(low, high, shape=None, dtype="int32", ctx=None, out=None, **kwargs):
    """Integers drawn uniformly from [low, high)."""
    if high <= low:
        raise ShapeError(f"randint: high ({high}) must be greater than low ({low})")
    return _draw(lambda g, p, s, d: g.integers(p[0], p[1], s, d), (low, high), shape, dtype,
                 ctx, out)


def exponential(scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the exponential distribution with the given scale."""
    return _draw(lambda g, p, s, d: (-p[0] * g.xp.log1p(-g.uniform(0, 1, s, "float64")))
                 .astype(d), (scale,), shape, dtype, ctx, out)


def _positive(name, **params):
    """Raise unless every scalar parameter is positive (NDArray parameters are the caller's)."""
    for key, value in params.items():
        if not isinstance(value, NDArray) and not value > 0:
            raise ShapeError(f"{name}: {key} must be positive, got {value!r}")


def poisson(lam=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the Poisson distribution of rate `lam` (as floats, MXNet's default)."""
    _positive("poisson", lam=lam)
    return _draw(lambda g, p, s, d: g.sample("poisson", p, s, d), (lam,), shape, dtype, ctx,
                 out)


def gamma(alpha=1, beta=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the gamma distribution of shape `alpha` and scale `beta`."""
    _positive("gamma", alpha=alpha, beta=beta)
    return _draw(lambda g, p, s, d: g.sample("gamma", p, s, d), (alpha, beta), shape, dtype,
                 ctx, out)


def negative_binomial(k=1, p=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Failures before the `k`-th success of trials succeeding with probability `p`."""
    _positive("negative_binomial", k=k, p=p)
    if not isinstance(p, NDArray) and p > 1:
        raise ShapeError(f"negative_binomial: p is a probability in (0, 1], got {p!r}")
    return _draw(lambda g, q, s, d: g.sample("negative_binomial", q, s, d), (k, p), shape,
                 dtype, ctx, out)


def generalized_negative_binomial(mu=1, alpha=1, shape=None, dtype=None, ctx=None, out=None,
                                  **kwargs):
    """Samples of mean `mu` and dispersion `alpha` (variance mu + alpha*mu^2): Poisson draws
    whose rates are gamma(1/alpha, alpha*mu); alpha = 0 is Poisson(mu)."""
    _positive("generalized_negative_binomial", mu=mu)

    def draw(g, p, s, d):
        mu_, alpha_ = p
        rate = g.xp.where(g.xp.asarray(alpha_) > 0, g.sample(
            "gamma", (1 / g.xp.maximum(alpha_, 1e-12), alpha_ * mu_), s, "float64"), mu_)
        return g.sample("poisson", (g.xp.broadcast_to(rate, s),), s, d)
    return _draw(draw, (mu, alpha), shape, dtype, ctx, out)


def shuffle(data, **kwargs):
    """A copy of `data` with its rows (first axis) in random order."""
    ctx = data.context
    with ctx.scope():
        order = ctx.xp.asarray(generator(ctx.xp).permutation(data.shape[0]))
        return NDArray(data._data[order], ctx)


def multinomial(data, shape=None, get_prob=False, dtype="int32", **kwargs):
    """Draw category indices from the probabilities in the last axis of `data`."""
    ctx = data.context
    n = 1 if shape is None else int(np.prod((shape,) if isinstance(shape, int) else shape))
    probs = data.asnumpy().astype(np.float64)
    flat = probs.reshape(-1, probs.shape[-1])
    u = generator(np).uniform(0, 1, (flat.shape[0], n), np.float64)
    idx = (u[..., None] > np.cumsum(flat, axis=-1)[:, None, :]).sum(-1)
    idx = np.minimum(idx, flat.shape[-1] - 1)
    extra = () if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
    samples = idx.reshape(probs.shape[:-1] + extra).astype(dtype)
    out = NDArray(ctx.xp.asarray(samples), ctx)
    if not get_prob:
        return out
    logp = np.log(np.take_along_axis(flat, idx, axis=1)).reshape(samples.shape)
    return out, NDArray(ctx.xp.asarray(logp.astype(np.float32)), ctx)
